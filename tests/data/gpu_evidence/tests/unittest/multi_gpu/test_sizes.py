"""Fixture: parallel sizes in case parameters, ids, names, bodies and guards."""

import pytest
from tensorrt_llm import LLM


def get_device_count():
    return 0


def _needs(tp_size, pp_size=1):
    if get_device_count() < tp_size * pp_size:
        pytest.skip("not enough GPUs")


@pytest.mark.parametrize("tp_size,pp_size", [(2, 1), (2, 2), (1, 4)], ids=["tp2", "tp2pp2", "pp4"])
def test_param_product(tp_size, pp_size):
    LLM("m", tensor_parallel_size=tp_size, pipeline_parallel_size=pp_size)


@pytest.mark.parametrize("cp_size", [2])
@pytest.mark.parametrize("world_size", [3])
def test_world_and_cp(world_size, cp_size):
    pass


@pytest.mark.parametrize("parallel", ["cfg2_ulysses2", "attn2d_2x2", "ulysses4-cfg2"])
def test_visual_ids(parallel):
    pass


def test_llama_tp8():
    pass


def test_eight_4gpus():
    pass


def test_body_literal():
    LLM("m", tensor_parallel_size=2)


def test_dict_config():
    config = {"tensor_parallel_size": 2, "pipeline_parallel_size": 2}
    LLM("m", **config)


@pytest.mark.parametrize("tp", [2, 4])
def test_helper_guard(tp):
    _needs(tp_size=tp)


@pytest.mark.skip_less_device(2)
def test_guard_above_floor():
    if get_device_count() < 4:
        pytest.skip("needs 4")


@pytest.mark.parametrize("device", ["cpu", "cuda:1"])
def test_and_guard_of_the_case(device):
    if device == "cuda:1" and get_device_count() < 2:
        pytest.skip("needs a second GPU")


def test_no_evidence():
    LLM("m", tensor_parallel_size=1)
