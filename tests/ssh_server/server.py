"""Bring up a private ``sshd`` on loopback, with its own keys, and tear it down.

Everything lives in a fresh temporary directory: a generated host key, a user key
pair whose public half is the only authorized key, a ``known_hosts`` file naming the
host key for ``[127.0.0.1]:<port>``, the ``sshd_config`` and the daemon's log. The port
is picked free at start. ``sshd -D -e -f CONFIG`` runs in the foreground as a child of
this process, is stopped by pid, and gets SIGTERM if the process that started it dies.

The sessions it starts get ``SetEnv`` values from the config (``SLURM_CONF`` and
``PATH`` of the test Slurm), so a command run over ssh talks to that cluster, as a
login node's shell talks to its own; ``HOME`` is an empty folder of the server's, so
the shell reads no start-up file of this machine's user (which could put other tools
first on ``PATH``).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from tests.slurm_cluster.cluster import (
    _apt_get,
    _die_with_parent,
    _dpkg_installed,
    _free_port,
    terminate,
)

PACKAGE = "openssh-server"
SSHD = Path("/usr/sbin/sshd")  # sshd re-executes itself, so it must be run by absolute path
#: sshd's privilege-separation folder (Debian's service unit makes it at boot).
PRIVSEP_DIR = Path("/run/sshd")
HOST = "127.0.0.1"


class SshUnavailable(RuntimeError):
    """sshd cannot be brought up on this machine (not root, no apt-get, install failed...)."""


def ensure_package() -> None:
    """Install openssh-server when it is missing, or raise SshUnavailable."""
    if _dpkg_installed(PACKAGE) and SSHD.exists():
        return
    if os.geteuid() != 0:
        raise SshUnavailable(f"{PACKAGE} missing and not running as root")
    if shutil.which("apt-get") is None:
        raise SshUnavailable(f"{PACKAGE} missing and no apt-get")
    install = ("install", "-y", "-q", "--no-install-recommends", PACKAGE)
    result = _apt_get(*install)
    if result.returncode != 0:
        _apt_get("update", "-q")
        result = _apt_get(*install)
    if result.returncode != 0 or not SSHD.exists():
        tail = (result.stdout + result.stderr).strip().splitlines()[-15:]
        raise SshUnavailable(
            f"apt-get install {PACKAGE} failed ({result.returncode}):\n" + "\n".join(tail)
        )


def _keygen(path: Path) -> str:
    """A new ed25519 key pair without passphrase at ``path``; the public line."""
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "scriptbuilder-tests", "-f", path],
        check=True,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=30,
    )
    return path.with_name(f"{path.name}.pub").read_text().strip()


class SshServer:
    """A private sshd: log in as ``user`` at ``HOST``:``port`` with ``options()``.

    ``session_env``: what every session gets by ``SetEnv`` (values without spaces)."""

    def __init__(self, session_env: Mapping[str, str], *, start_timeout: float = 30.0) -> None:
        self.session_env = dict(session_env)
        self.start_timeout = start_timeout
        self.user = os.environ.get("USER") or "root"
        self.host = HOST
        self.port = 0
        self.base = Path()
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def key(self) -> Path:
        return self.base / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.base / "known_hosts"

    @property
    def log(self) -> Path:
        return self.base / "sshd.log"

    def options(self) -> list[str]:
        """``-o`` values that reach this server with its key and nothing else of the user's."""
        return [
            f"Port={self.port}",
            f"IdentityFile={self.key}",
            "IdentitiesOnly=yes",
            f"UserKnownHostsFile={self.known_hosts}",
            "GlobalKnownHostsFile=/dev/null",
            "StrictHostKeyChecking=yes",
        ]

    def start(self) -> None:
        if os.geteuid() != 0:
            raise SshUnavailable("the sshd harness must run as root (sshd changes user)")
        ensure_package()
        self.base = Path(tempfile.mkdtemp(prefix="sshd-harness-"))
        try:
            self._configure()
            self._start_daemon()
        except BaseException:
            self.stop(remove=False)
            raise

    def _configure(self) -> None:
        b = self.base
        host_public = _keygen(b / "host_ed25519")
        (b / "authorized_keys").write_text(_keygen(self.key) + "\n")
        self.port = _free_port()
        self.known_hosts.write_text(f"[{HOST}]:{self.port} {host_public}\n")
        (b / "home").mkdir()
        session_env = {"HOME": str(b / "home"), **self.session_env}
        for name, value in session_env.items():
            if any(c.isspace() or c == '"' for c in value):
                raise ValueError(f"SetEnv value of {name} holds a space or quote: {value!r}")
        setenv = " ".join(f"{name}={value}" for name, value in session_env.items())
        (b / "sshd_config").write_text(
            f"""\
# Written by tests/ssh_server/server.py: a private sshd for the test suite.
Port {self.port}
ListenAddress {HOST}
HostKey {b / "host_ed25519"}
PidFile {b / "sshd.pid"}
AuthorizedKeysFile {b / "authorized_keys"}
AuthenticationMethods publickey
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
StrictModes no
UsePAM no
PrintMotd no
UseDNS no
LogLevel VERBOSE
{"SetEnv " + setenv if setenv else ""}
"""
        )

    def _start_daemon(self) -> None:
        PRIVSEP_DIR.mkdir(mode=0o755, exist_ok=True)
        config = self.base / "sshd_config"
        check = subprocess.run(
            [SSHD, "-t", "-f", config], capture_output=True, text=True, timeout=30, check=False
        )
        if check.returncode != 0:
            raise RuntimeError(f"sshd -t refused {config}: {check.stderr.strip()}")
        with self.log.open("wb") as out:
            self._proc = subprocess.Popen(
                [SSHD, "-D", "-e", "-f", config],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        deadline = time.monotonic() + self.start_timeout
        while True:
            if self._proc.poll() is not None:
                raise RuntimeError(f"sshd exited at start:\n{self.log.read_text()[-3000:]}")
            with socket.socket() as sock:
                sock.settimeout(1)
                if sock.connect_ex((HOST, self.port)) == 0:
                    return
            if time.monotonic() > deadline:
                raise RuntimeError(f"sshd did not listen in time:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.05)

    def stop(self, *, remove: bool = True) -> None:
        """Stop the daemon this object started (by pid) and remove the temp dir."""
        proc, self._proc = self._proc, None
        if proc is not None:
            terminate(proc)
        if remove and self.base != Path() and self.base.exists():
            shutil.rmtree(self.base, ignore_errors=True)
