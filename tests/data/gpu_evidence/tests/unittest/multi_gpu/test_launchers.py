"""Fixture: tests that start their ranks through helpers, with no device mark."""

import subprocess

import pytest
import torch
import torch.multiprocessing as mp
from conftest import run_on_mpi_pool  # tests/unittest/conftest.py


def _worker(rank, world_size):
    pass


def _run(world_size, fn):
    mp.spawn(fn, args=(world_size,), nprocs=world_size, join=True)


def run_test_in_distributed(world_size, test_fn, use_cuda=True):
    if use_cuda and torch.cuda.device_count() < world_size:
        pytest.skip("not enough GPUs")
    _run(world_size, test_fn)


def test_module_launcher():
    _run(4, _worker)


def test_keyword_launcher():
    run_test_in_distributed(world_size=2, test_fn=_worker)


def test_direct_spawn():
    mp.spawn(_worker, args=(6,), nprocs=6)


def test_conftest_pool():
    run_on_mpi_pool(2, _worker)


def test_mpirun_words():
    subprocess.check_call(["mpirun", "--allow-run-as-root", "-n", "4", "python3", "w.py"])


def test_mpirun_string():
    subprocess.check_call("mpirun -np 2 python3 w.py", shell=True)


@pytest.mark.parametrize("ranks", [2, 8])
def test_mpirun_fstring(ranks):
    subprocess.check_call(f"mpirun -n {ranks} python3 w.py", shell=True)


def test_launch_flags():
    subprocess.check_call(
        ["trtllm-llmapi-launch", "python3", "run.py", "--tp_size=4", "--pp_size=2"]
    )


class TestMethods:
    def _launch(self, n):
        _run(n, _worker)

    def test_method_helper(self):
        self._launch(2)


def test_single():
    assert _worker(0, 1) is None
