"""Synthetic stand-in for TensorRT-LLM's accuracy/test_llm_api_pytorch.py.

Data for scriptbuilder's test_inspect tests: read as text, never imported.
"""

import pytest
from defs.conftest import llm_models_root, parametrize_with_ids, skip_pre_hopper

from ..accuracy_core import GSM8K, MMLU, LlmapiAccuracyTestHarness

pytestmark = pytest.mark.threadleak(enabled=False)

EIGHT_GPUS = 8


class TestLlama3_1_8BInstruct(LlmapiAccuracyTestHarness):
    MODEL_NAME = "meta-llama/Llama-3.1-8B-Instruct"
    MODEL_PATH = f"{llm_models_root()}/llama-3.1-model/Llama-3.1-8B-Instruct"

    def test_bfloat16(self):
        GSM8K(self.MODEL_NAME).evaluate(self.MODEL_PATH)

    @pytest.mark.skip_less_device_memory(140000)
    def test_fp8_large_memory(self):
        MMLU(self.MODEL_NAME).evaluate(self.MODEL_PATH)

    @pytest.mark.skip_less_device(4)
    @pytest.mark.skip_less_device_memory(80000)
    @parametrize_with_ids("torch_compile", [False, True])
    @parametrize_with_ids("attn_backend", ["TRTLLM", "FLASHINFER"])
    @pytest.mark.parametrize(
        "tp_size,pp_size", [(4, 1), (2, 2), (1, 4)], ids=["tp4", "tp2pp2", "pp4"]
    )
    def test_bfloat16_4gpus(self, tp_size, pp_size, attn_backend, torch_compile):
        GSM8K(self.MODEL_NAME).evaluate(self.MODEL_PATH, tp_size, pp_size)


@pytest.mark.skip_less_device(8)
@pytest.mark.skip_less_device_memory(80000)
class TestDeepSeekV3Lite(LlmapiAccuracyTestHarness):
    NOTES = """Text that mentions
@pytest.mark.skip_less_device(16)
def test_nvfp4_8gpus(self):
at column 0, which the outline must not mistake for code.
"""

    MODEL_NAME = "deepseek-ai/DeepSeek-V3-Lite"

    def test_nvfp4_8gpus(self):
        GSM8K(self.MODEL_NAME).evaluate()

    @pytest.mark.skip_less_device(4)
    def test_fp8_4gpus(self):
        GSM8K(self.MODEL_NAME).evaluate()


@pytest.mark.skip_less_device(2)
class TestQwen3_30B_A3B(LlmapiAccuracyTestHarness):
    MODEL_NAME = "Qwen3/Qwen3-30B-A3B"

    @parametrize_with_ids("attn_backend", ["TRTLLM", "FLASHINFER"])
    @pytest.mark.parametrize(
        "tp_size,pp_size,ep_size",
        [
            pytest.param(1, 1, 1, id="tp1"),
            pytest.param(4, 1, 4, id="tp4", marks=pytest.mark.skip_less_device(4)),
            pytest.param(
                2,
                2,
                1,
                id="tp2pp2",
                marks=[pytest.mark.skip_less_device(4), pytest.mark.skip_less_device_memory(80000)],
            ),
            pytest.param(
                8, 1, 8, id="ep8", marks=(skip_pre_hopper, pytest.mark.skip_less_device(EIGHT_GPUS))
            ),
        ],
    )
    def test_auto_dtype(self, tp_size, pp_size, ep_size, attn_backend):
        MMLU(self.MODEL_NAME).evaluate(tp_size, pp_size, ep_size, attn_backend)

    @pytest.mark.parametrize("tp_size", [1, 2])
    def test_plain_cases(self, tp_size):
        MMLU(self.MODEL_NAME).evaluate(tp_size)


class TestMixtral8x7B(LlmapiAccuracyTestHarness):
    pytestmark = [pytest.mark.skip_less_device(2), pytest.mark.skip_less_device_memory(80000)]  # noqa: RUF012

    def test_tp2(self):
        MMLU("mistralai/Mixtral-8x7B-v0.1").evaluate()

    @pytest.mark.skip_less_mpi_world_size(8)
    def test_world_size_8(self):
        MMLU("mistralai/Mixtral-8x7B-v0.1").evaluate()


@pytest.mark.skip_less_device(4)
class _FourGpuBase(LlmapiAccuracyTestHarness):
    def test_inherited(self):
        GSM8K("base").evaluate()


class TestChildOfFourGpuBase(_FourGpuBase):
    def test_own(self):
        GSM8K("child").evaluate()


class TestOuter:
    @pytest.mark.skip_less_device(2)
    class TestInner:
        def test_nested(self):
            GSM8K("nested").evaluate()


@pytest.mark.skip_less_mpi_world_size(4)
def test_module_level_function():
    GSM8K("function").evaluate()
