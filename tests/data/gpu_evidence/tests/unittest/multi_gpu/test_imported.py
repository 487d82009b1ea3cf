"""Fixture: skip helpers and launchers imported from a helper module of the test tree."""

import subprocess

from product_marks import skip_from_the_product
from utils.deepest import skip_from_far, skip_from_three
from utils.util import run_ranks, skip_num_gpus_less_than, skip_pre_hopper, skip_single_gpu
from utils.util import skip_from_two_modules_away as skip_two_away


def _worker(rank):
    pass


@skip_single_gpu
def test_helper_mark():
    subprocess.run(["mpirun", "-n", "1", "python", "worker.py"], check=True)


@skip_num_gpus_less_than(4)
def test_helper_factory():
    pass


def test_imported_launcher():
    run_ranks(4, _worker)


@skip_pre_hopper
def test_not_a_device_mark():
    pass


@skip_two_away
def test_two_imports_away():
    pass


@skip_from_far
def test_beyond_the_depth():
    pass


@skip_from_three
def test_three_imports_away():
    pass


@skip_from_the_product
def test_product_module_not_read():
    pass
