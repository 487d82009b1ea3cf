"""Synthetic stand-in for a TensorRT-LLM multi-GPU unit test (never imported)."""

import pytest
import torch
from pytest import mark

pytestmark = pytest.mark.gpu2

skip_less_than_4 = pytest.mark.skipif(torch.cuda.device_count() < 4, reason="needs 4 GPUs")


def run_allreduce(world_size):
    return world_size


def test_allreduce_default():
    assert run_allreduce(2)


@pytest.mark.skipif(torch.cuda.device_count() < 4, reason="needs 4 GPUs")
def test_allreduce_skipif_lt():
    assert run_allreduce(4)


@pytest.mark.skipif(torch.cuda.device_count() <= 7, reason="needs 8 GPUs")
def test_allreduce_skipif_le():
    assert run_allreduce(8)


@pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.device_count() < 2,
    reason="needs 2 GPUs",
)
def test_allreduce_skipif_or():
    assert run_allreduce(2)


@mark.gpu4
def test_allreduce_mark_alias():
    assert run_allreduce(4)


@skip_less_than_4
def test_allreduce_named_mark():
    assert run_allreduce(4)


@pytest.mark.parametrize("world_size", [2, pytest.param(4, marks=pytest.mark.gpu4)])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_allreduce_auto_ids(world_size, dtype):
    assert run_allreduce(world_size)


SCRIPT = """
@pytest.mark.skip_less_device(16)
def test_allreduce_default():
    pass
"""
