"""Synthetic stand-in for TensorRT-LLM's accuracy/test_disaggregated_serving.py.

Data for scriptbuilder's tests: read as text, never imported. The multi-GPU
tests carry no device mark; they skip in their body.
"""

import pytest
from defs.conftest import get_device_count, parametrize_with_ids

from ..accuracy_core import GSM8K, LlmapiAccuracyTestHarness

WORLD = 8


class TestLlama3_1_8BInstruct(LlmapiAccuracyTestHarness):
    MODEL_NAME = "meta-llama/Llama-3.1-8B-Instruct"

    @parametrize_with_ids("ctx_pp", [1, 2, 4])
    @parametrize_with_ids("gen_tp", [1, 2])
    def test_ctx_pp_gen_tp_asymmetric(self, ctx_pp, gen_tp):
        if ctx_pp + gen_tp > get_device_count():
            pytest.skip(f"Not enough devices for ctx_pp={ctx_pp}+gen_tp={gen_tp} test")
        GSM8K(self.MODEL_NAME).evaluate(ctx_pp, gen_tp)

    @pytest.mark.parametrize(
        "tp_size,pp_size", [(4, 1), (2, 2), (1, 2)], ids=["tp4", "tp2pp2", "pp2"]
    )
    def test_exact_world(self, tp_size, pp_size):
        world_size = tp_size * pp_size
        if get_device_count() != world_size:
            pytest.skip("Device count mismatch with world size")
        GSM8K(self.MODEL_NAME).evaluate(tp_size, pp_size)

    @pytest.mark.skip_less_device(8)
    @pytest.mark.parametrize("tp_size", [2])
    def test_marker_wins(self, tp_size):
        if get_device_count() < tp_size:
            pytest.skip("too few")
        GSM8K(self.MODEL_NAME).evaluate(tp_size)

    @pytest.mark.parametrize(
        "gpu_count", [pytest.param(2, id="2gpus"), pytest.param(4, id="4gpus")]
    )
    def test_not_equal_form(self, gpu_count):
        if not get_device_count() == gpu_count:  # noqa: SIM201
            pytest.skip("needs the exact count")
        GSM8K(self.MODEL_NAME).evaluate(gpu_count)

    def test_module_constant(self):
        if get_device_count() < WORLD:
            pytest.skip("needs a full node")
        GSM8K(self.MODEL_NAME).evaluate()

    @pytest.mark.parametrize("tp_size", [8], ids=["tp8"])
    def test_nothing_declared(self, tp_size):
        GSM8K(self.MODEL_NAME).evaluate(tp_size)

    def test_and_is_no_guard(self, request):
        if get_device_count() < 4 and request.config.getoption("--strict"):
            pytest.skip("only with --strict")
        GSM8K(self.MODEL_NAME).evaluate()


@pytest.mark.parametrize("gen_tp", [2, 4])
class TestQwen3_8B(LlmapiAccuracyTestHarness):
    @pytest.mark.parametrize("ctx_tp", [pytest.param(1, id="ctx1"), pytest.param(2, id="ctx2")])
    def test_class_param(self, ctx_tp, gen_tp):
        if get_device_count() < ctx_tp + gen_tp:
            pytest.skip("Not enough devices")
        GSM8K("Qwen3/Qwen3-8B").evaluate(ctx_tp, gen_tp)
