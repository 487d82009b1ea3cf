"""A real OpenSSH server (``sshd``) on loopback for the remote_slurm tests.

``server.SshServer`` brings it up and tears it down; ``fixtures.ssh_server`` is the
session-scoped pytest fixture. The remote shell sees the test Slurm of
tests/slurm_cluster (``SLURM_CONF`` and the stand-in tools on ``PATH``).
"""

from tests.ssh_server.server import SshServer, SshUnavailable

__all__ = ["SshServer", "SshUnavailable"]
