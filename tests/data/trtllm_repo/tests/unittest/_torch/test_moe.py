"""Synthetic stand-in for a TensorRT-LLM single-GPU unit test file (never imported)."""

import pytest
import torch


def run_moe(num_gpus):
    return num_gpus


class TestMoe:
    @pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
    def test_two_gpus(self):
        assert run_moe(2)

    def test_plain(self):
        assert run_moe(1)


@pytest.mark.gpu4
class TestMoeMultiGpu:
    def test_four(self):
        assert run_moe(4)


def test_no_marker():
    assert run_moe(1)
