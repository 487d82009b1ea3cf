"""Fixture conftest: a launcher helper the tests below call without importing it."""

from mpi4py.futures import MPIPoolExecutor


def run_on_mpi_pool(n_workers, fn):
    with MPIPoolExecutor(max_workers=n_workers) as pool:
        return list(pool.map(fn, range(n_workers)))
