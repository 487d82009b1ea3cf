"""Fixture: skip helpers and a launcher defined in a helper module of the test tree."""

import pytest
import torch
from torch import multiprocessing as mp

from .deeper import skip_from_two_modules_away  # noqa: F401


def skip_num_gpus_less_than(num_gpus: int):
    return pytest.mark.skipif(
        torch.cuda.device_count() < num_gpus, reason=f"The test needs at least {num_gpus} GPUs"
    )


skip_single_gpu = skip_num_gpus_less_than(2)
skip_pre_hopper = pytest.mark.skipif(False, reason="not a device count")


def run_ranks(world_size, fn):
    mp.spawn(fn, nprocs=world_size)
