"""The user's home on the cluster, asked from the login host with a non-interactive,
time-bounded ``ssh HOST 'echo $HOME'``.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence

from scriptbuilder.errors import BuildError

#: Seconds for the whole ssh call (its connection alone gets 10).
SSH_TIMEOUT = 30.0
#: Runs ``argv`` with a timeout and returns its standard output, or raises BuildError.
Runner = Callable[[Sequence[str], float], str]


def ssh_argv(host: str, user: str | None) -> list[str]:
    login = ["-l", user] if user else []
    return ["ssh", *login, "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", host, "echo $HOME"]


def run_ssh(argv: Sequence[str], timeout: float) -> str:
    """The default runner: ``argv`` as a subprocess, without standard input."""
    shown = " ".join(argv[:-1]) + " 'echo $HOME'"
    try:
        done = subprocess.run(
            list(argv),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise BuildError(
            f"home: {shown} did not answer within {timeout:g} s; set remote_cwd "
            "(in the request or slurm_env.json)"
        ) from None
    except OSError as exc:
        raise BuildError(f"home: cannot run ssh ({exc.strerror}); set remote_cwd") from None
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        raise BuildError(f"home: {shown} failed ({reason[:120]}); set remote_cwd")
    return done.stdout


def remote_home(host: str, user: str | None, runner: Runner = run_ssh) -> str:
    """``$HOME`` on ``host``, an absolute path, or a BuildError saying why not."""
    out = runner(ssh_argv(host, user), SSH_TIMEOUT).strip()
    if not out.startswith("/") or "\n" in out or "," in out:
        raise BuildError(
            f"home: ssh {host} 'echo $HOME' printed {out[:80]!r}, not an absolute path; "
            "set remote_cwd"
        )
    return out
