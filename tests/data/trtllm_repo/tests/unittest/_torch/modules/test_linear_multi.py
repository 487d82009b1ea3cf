"""Synthetic stand-in for TensorRT-LLM multi-GPU unit tests: data, never imported."""

import pytest
import torch


@pytest.mark.gpu8
class TestLinear:
    def test_tp8(self):
        assert torch
