"""Fixture: cases a function makes at collection time (their ids are not known here)."""

import pytest
from tensorrt_llm import LLM


def make_cases():
    return [pytest.param(backend, id=f"{backend}-NVFP4") for backend in ("CUTLASS", "TRTLLM")]


@pytest.mark.skipif("torch.cuda.device_count() < 4")
@pytest.mark.parametrize("case", make_cases())
def test_generated_cases(case):
    pass


def test_one_gpu():
    pass


def get_device_count():
    return 0


def _label(config):
    return "-".join(f"{key}:{value}" for key, value in config.items())


@pytest.mark.parametrize(
    "tp_size,pp_size", [(1, 2), (2, 1), (2, 2), (4, 1)], ids=lambda v: _label(v)
)
def test_labels_bind_the_case(tp_size, pp_size):
    if get_device_count() < tp_size * pp_size:
        pytest.skip("needs tp_size * pp_size GPUs")


NUM_GPUS = 8


@pytest.mark.parametrize(
    "tp_size", list(filter(lambda x: x <= NUM_GPUS, [1, 2, 4, 8])), ids=lambda x: f"TP={x}"
)
def test_sizes_made_by_a_call(tp_size):
    LLM(tensor_parallel_size=tp_size)
