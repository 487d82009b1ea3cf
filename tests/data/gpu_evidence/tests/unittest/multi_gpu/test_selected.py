"""Fixture: -k expressions over names, classes, modules and ids; case values bound by the
selected id; totals above the per-node marker."""

import pytest
import torch


def get_device_count():
    return 0


def test_one_gpu_basic():
    pass


@pytest.mark.skip_less_device(2)
def test_two_gpu_allreduce():
    pass


class TestSizes:
    @pytest.mark.skip_less_device(2)
    def test_tp_2gpu(self):
        pass

    @pytest.mark.skip_less_device(4)
    @pytest.mark.parametrize("dtype", ["fp8", "bf16"])
    def test_tp_4gpu(self, dtype):
        pass


@pytest.mark.skip_less_device(8)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])  # ids: dtype0, dtype1
def test_dtypes_8gpus(dtype):
    pass


# ids bottom decorator first: tp:N-pp:M
@pytest.mark.parametrize("pp_size", [1, 2], ids=lambda x: f"pp:{x}")
@pytest.mark.parametrize("tp_size", [1, 2], ids=lambda x: f"tp:{x}")
def test_guard_of_the_case(tp_size, pp_size):
    if get_device_count() < tp_size * pp_size:
        pytest.skip("needs tp_size * pp_size GPUs")


CONFIGS = [
    pytest.param({"tp": 8, "pp": 1}, id="tp:8-pp:1"),
    pytest.param({"tp": 8, "pp": 2}, id="tp:8-pp:2"),
]


@pytest.mark.skip_less_device(8)
@pytest.mark.parametrize("config", CONFIGS)
def test_two_nodes(config):
    pass


def test_from_a_fixture(model_config):
    pass


@pytest.mark.parametrize("backend", ["CUTLASS", "TRTLLM"])
def test_backends(backend):
    pass


BACKEND = "TRTLLM"


@pytest.mark.skip_less_device(4)
@pytest.mark.parametrize("backend", [BACKEND, "CUTLASS"])
def test_named_value_4gpus(backend):
    pass
