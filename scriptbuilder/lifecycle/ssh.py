"""A login node reached with the ``ssh`` client: the Transport of remote_slurm.

Every call is one ``ssh`` run with ``-o BatchMode=yes`` (never a password
prompt: a job is submitted unattended), the executor's ControlMaster socket
when a ``control_path`` is given (``-o ControlPath=...``, as the remote
executor uses ``/tmp/ssh-trtllm-%r@%h:%p``; with no master listening there ssh
connects on its own), then the caller's ``-o KEY=VALUE`` options. The remote
command is one string made by :func:`shlex.join` from an argv, so every value
reaches the remote shell quoted (paths with spaces or quotes included). The
few shell snippets here take their values as positional parameters (``sh -c
SCRIPT sh ARG...``), never pasted into the snippet.

Files are written as the executor writes them, ``cat > PATH`` with the data
on standard input (into a temporary name beside the target, then ``chmod`` and
``mv``, so a half-written script is never the one submitted); no rsync, scp
or sshfs. Reads are bounded by ``head -c``/``tail -c`` on the remote side.

When ssh itself fails (exit status 255 with its own message: an unknown or
unreachable host, a refused key, an unknown host key) or is missing,
:class:`TransportError` carries one line naming the host and the fix.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from collections.abc import Sequence

from scriptbuilder.lifecycle.errors import TransportError
from scriptbuilder.models.job_spec import JobSpec

#: Exit status of ssh when the connection (not the remote command) failed.
SSH_FAILED = 255
#: How long ssh may take to connect, unless the caller's options say otherwise.
CONNECT_TIMEOUT_SECONDS = 20
#: The remote snippets' exit status for a missing file.
_MISSING = 66
_READ = 'if [ -f "$1" ]; then exec {tool} -c "$2" -- "$1"; fi; exit {missing}'
# from byte $3 (0 the first): tail seeks there in a regular file, head stops the read
_READ_RANGE = (
    'if [ -f "$1" ]; then tail -c "+$(($3 + 1))" -- "$1" | head -c "$2"; exit 0; fi; exit {missing}'
)
_WRITE = (
    'tmp="$1.tmp$$"; umask 077; '
    'if cat > "$tmp" && chmod "$2" "$tmp" && mv -f -- "$tmp" "$1"; then exit 0; fi; '
    'rm -f -- "$tmp"; exit 1'
)
#: ssh's own messages, and what to do about each.
_FIXES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), fix)
    for pattern, fix in (
        (
            r"could not resolve hostname|name or service not known",
            "the host name is unknown: check ssh_host in job_spec.json (or your ~/.ssh/config)",
        ),
        (
            r"connection refused|connection timed out|no route to host|network is unreachable"
            r"|operation timed out|connection closed|connection reset|kex_exchange_identification",
            "the host does not answer: check ssh_host and that 'ssh HOST' works from here",
        ),
        (
            r"host key verification failed|remote host identification has changed",
            "the host key is not known here: connect once with 'ssh HOST' and accept it",
        ),
        (
            r"permission denied|too many authentication failures|no supported authentication",
            "authentication refused (BatchMode allows no password prompt): load your key with "
            "ssh-add, or open the executor's ControlMaster connection first and pass its "
            "--control-path",
        ),
    )
)


class SshTransport:
    """``ssh [options] HOST COMMAND`` for each call (see the module text).

    ``options``: ``KEY=VALUE`` strings, each passed as ``-o KEY=VALUE``."""

    def __init__(
        self,
        host: str,
        user: str | None = None,
        control_path: str | None = None,
        options: Sequence[str] = (),
    ) -> None:
        if not host or host.startswith("-") or any(c.isspace() for c in host):
            raise TransportError(
                f"ssh_host {host!r} is not a host name; set ssh_host in job_spec.json"
            )
        self.host = host
        self.user = user or None
        self.control_path = control_path or None
        self.options = tuple(options)
        self._base = ["ssh", "-o", "BatchMode=yes"]
        if self.control_path:
            self._base += ["-o", f"ControlPath={self.control_path}"]
        for option in self.options:
            self._base += ["-o", option]
        self._base += ["-o", f"ConnectTimeout={CONNECT_TIMEOUT_SECONDS}"]
        if self.user:
            self._base += ["-l", self.user]
        self._base += ["--", host]

    @classmethod
    def from_job_spec(
        cls,
        job_spec: JobSpec,
        *,
        control_path: str | None = None,
        options: Sequence[str] = (),
    ) -> SshTransport:
        """The login node of a remote_slurm build: ``ssh_host`` and ``slurm_user`` of
        job_spec.json, else of its ``slurm_env``."""
        probed = job_spec.slurm_env or {}
        host = job_spec.ssh_host or probed.get("ssh_host")
        user = job_spec.slurm_user or probed.get("slurm_user")
        if not isinstance(host, str) or not host:
            raise TransportError(
                "job_spec.json has no ssh_host, so the login node is unknown: set ssh_host "
                "in the request (or slurm_env.json) and build again"
            )
        return cls(host, str(user) if user else None, control_path, options)

    def describe(self) -> str:
        return f"ssh {self.user}@{self.host}" if self.user else f"ssh {self.host}"

    def _target(self) -> str:
        return f"{self.user}@{self.host}" if self.user else self.host

    def ssh_argv(self, argv: Sequence[str]) -> list[str]:
        """The local argv that runs ``argv`` on the host."""
        return [*self._base, shlex.join(argv)]

    def run(
        self, argv: Sequence[str], *, stdin: bytes | None = None, timeout: float = 60.0
    ) -> subprocess.CompletedProcess[bytes]:
        try:
            result = subprocess.run(
                self.ssh_argv(argv),
                input=stdin if stdin is not None else b"",
                capture_output=True,
                timeout=timeout,
            )
        except FileNotFoundError:
            raise TransportError(
                f"ssh: command not found, so {self._target()} cannot be reached; "
                "install the OpenSSH client (openssh-client)"
            ) from None
        except subprocess.TimeoutExpired:
            raise TransportError(
                f"ssh {self._target()}: no answer within {timeout:g}s running {argv[0]}; "
                "check that the host is up and 'ssh HOST' works from here"
            ) from None
        if result.returncode == SSH_FAILED:
            self._raise_if_ssh_failed(result.stderr)
        return result

    def _raise_if_ssh_failed(self, stderr: bytes) -> None:
        text = stderr.decode(errors="replace")
        for pattern, fix in _FIXES:
            if pattern.search(text):
                lines = [line.strip() for line in text.splitlines() if pattern.search(line)]
                said = lines[-1] if lines else pattern.pattern
                raise TransportError(f"ssh {self._target()}: {said.rstrip('.')}; {fix}")

    def _read(
        self, tool: str, path: str, max_bytes: int, offset: int | None = None
    ) -> bytes | None:
        if offset is None:
            snippet, extra = _READ.format(tool=tool, missing=_MISSING), []
        else:
            snippet, extra = _READ_RANGE.format(missing=_MISSING), [str(offset)]
        result = self.run(["sh", "-c", snippet, "sh", path, str(max_bytes), *extra])
        if result.returncode == _MISSING:
            return None
        if result.returncode != 0:
            raise TransportError(
                f"ssh {self._target()}: cannot read {path} "
                f"({_last_line(result.stderr)}); check its permissions there"
            )
        return result.stdout

    def read_tail(self, path: str, max_bytes: int) -> bytes | None:
        return self._read("tail", path, max_bytes)

    def read_head(self, path: str, max_bytes: int) -> bytes | None:
        return self._read("head", path, max_bytes)

    def read_range(self, path: str, offset: int, max_bytes: int) -> bytes | None:
        return self._read("tail", path, max_bytes, offset)

    def write_file(self, path: str, data: bytes, mode: int) -> None:
        result = self.run(["sh", "-c", _WRITE, "sh", path, f"{mode:o}"], stdin=data)
        if result.returncode != 0:
            raise TransportError(
                f"ssh {self._target()}: cannot write {path} ({_last_line(result.stderr)}); "
                "check that its folder exists and is writable there"
            )


def _last_line(data: bytes) -> str:
    lines = [line.strip() for line in data.decode(errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else "no message"
