"""pytest fixture for the private sshd.

``ssh_server`` (session scope) brings it up once, on first use, on top of the test
Slurm (its sessions see that cluster), and stops it at the end of the session. If it
cannot be brought up, every test using it is skipped with one reason, except under
``CI=true`` where the error is raised instead.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.slurm_cluster.cluster import SlurmCluster
from tests.slurm_cluster.fixtures import _in_ci
from tests.ssh_server.server import SshServer, SshUnavailable


@pytest.fixture(scope="session")
def ssh_server(slurm_cluster: SlurmCluster) -> Iterator[SshServer]:
    """A running sshd on loopback: ``.options()``, ``.user``, ``.host``, ``.port``..."""
    cluster_env = slurm_cluster.env
    server = SshServer({name: cluster_env[name] for name in ("SLURM_CONF", "PATH")})
    try:
        server.start()
    except (SshUnavailable, RuntimeError, OSError, TimeoutError) as exc:
        if _in_ci():
            raise
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
        pytest.skip(f"sshd unavailable: {first_line}")
    try:
        yield server
    finally:
        server.stop()
