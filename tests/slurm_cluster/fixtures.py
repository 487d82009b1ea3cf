"""pytest fixtures for the real one-node Slurm.

``slurm_cluster`` (session scope) brings the cluster up once, on first use, and tears it
down at the end of the session. If it cannot be brought up, every test using it is
skipped with one reason, except under ``CI=true`` where the error is raised instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.slurm_cluster.cluster import SlurmCluster, SlurmUnavailable


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    """A running private Slurm: ``.partitions``, ``.env``, ``.submit()``, ``.test_only()``..."""
    cluster = SlurmCluster()
    try:
        cluster.start()
    except (SlurmUnavailable, RuntimeError, OSError, TimeoutError) as exc:
        if _in_ci():
            raise
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
        kept = f" (logs kept in {cluster.base})" if not isinstance(exc, SlurmUnavailable) else ""
        pytest.skip(f"real Slurm unavailable: {first_line}{kept}")
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def standin_record(slurm_cluster: SlurmCluster, request: pytest.FixtureRequest) -> Path:
    """A fresh path for STANDIN_RECORD, named after the test."""
    name = "".join(c if c.isalnum() or c in "-_" else "_" for c in request.node.name)[:80]
    return slurm_cluster.new_record_file(name)
