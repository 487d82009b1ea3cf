"""Fixture: tests written once and imported by the test modules that run them."""

import pytest


@pytest.mark.skip_less_device(2)
@pytest.mark.parametrize("backend", ["NCCL", "MNNVL"])
def test_shared_two_gpus(backend):
    pass
