"""Synthetic stand-in for TensorRT-LLM multi-GPU unit tests: data, never imported."""

import pytest
import torch


@pytest.mark.gpu2
def test_moe_two():
    assert torch


@pytest.mark.gpu4
def test_moe_four():
    assert torch


def test_moe_single():
    assert torch


@pytest.mark.parametrize("gpu_count", [pytest.param(2, marks=pytest.mark.gpu2), 1])
def test_moe_alltoall(gpu_count):
    if torch.cuda.device_count() < gpu_count:
        pytest.skip("needs more GPUs")
