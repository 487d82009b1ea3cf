"""Running the checkout's submit.py (the perf-sanity path), on this machine or on a
cluster's login node: its output kept in a log file whatever happens, its failures
as one-line :class:`BuildError` messages."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from scriptbuilder.errors import BuildError
from scriptbuilder.outputs.atomic import write_atomic


def _text(data: str | bytes | None) -> str:
    if isinstance(data, bytes):
        return data.decode("utf-8", "replace")
    return data or ""


def _last_line(text: str) -> str:
    return next((line.strip() for line in reversed(text.splitlines()) if line.strip()), "")


def _keep_log(
    path: Path,
    argv: Sequence[str],
    cwd: Path | str,
    out: str,
    err: str,
    status: str,
    where: str = "",
) -> None:
    def ended(text: str) -> str:
        return text if not text or text.endswith("\n") else text + "\n"

    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(
        path,
        f"{where}$ cd {shlex.quote(str(cwd))} && {shlex.join(argv)}\n--- stdout ---\n"
        f"{ended(out)}--- stderr ---\n{ended(err)}--- {status} ---\n",
    )


def run_submit(
    argv: Sequence[str],
    *,
    cwd: str | os.PathLike[str],
    timeout: float,
    output_log: Path,
    env: Mapping[str, str] | None = None,
) -> str:
    """Run submit.py (no shell, in its own session) and return its stdout; its full
    output goes to ``output_log`` whatever happens. A timeout (which kills the
    whole process group) or a non-zero exit is a :class:`BuildError`."""
    argv, work, log = [str(a) for a in argv], Path(cwd), Path(output_log)
    try:
        proc = subprocess.Popen(
            argv,
            cwd=work,
            env=None if env is None else dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="replace",
            start_new_session=True,
        )
    except OSError as exc:
        _keep_log(log, argv, work, "", f"{exc}\n", "could not start")
        raise BuildError(
            f"cannot run submit.py ({argv[0]}: {exc.strerror or exc}); check the Python"
            f" interpreter and {argv[1] if len(argv) > 1 else 'submit.py'}"
        ) from None
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            proc.kill()
        try:
            stdout, stderr = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = _text(exc.stdout), _text(exc.stderr)
        _keep_log(log, argv, work, stdout or "", stderr or "", f"killed after {timeout:g} s")
        raise BuildError(
            f"submit.py did not finish within {timeout:g} s and was killed; full output in {log}"
        ) from None
    stdout, stderr = stdout or "", stderr or ""
    _keep_log(log, argv, work, stdout, stderr, f"exit code {proc.returncode}")
    if proc.returncode != 0:
        line = _last_line(stderr) or _last_line(stdout) or "no error output"
        raise BuildError(f"submit.py failed (exit {proc.returncode}): {line}; full output in {log}")
    return stdout


class LoginNode(Protocol):
    """A cluster's login node (``ssh`` there): what a remote submit.py run needs of it.
    Each method raises :class:`BuildError` when the node cannot be reached."""

    def describe(self) -> str:
        """``ssh USER@HOST``, for messages and the log."""
        ...

    def run(
        self, argv: Sequence[str], *, stdin: bytes | None = None, timeout: float = 60.0
    ) -> subprocess.CompletedProcess[bytes]: ...

    def read_head(self, path: str, max_bytes: int) -> bytes | None: ...

    def write_file(self, path: str, data: bytes, mode: int) -> None: ...


#: Runs ``"$@"`` in the folder ``$1`` (values as positional parameters, never pasted).
_IN_FOLDER = 'cd "$1" && shift && exec "$@"'
#: The most of the launch script read back (submit.py writes a few kilobytes).
MAX_LAUNCH_BYTES = 16 << 20


def run_submit_remote(
    node: LoginNode,
    argv: Sequence[str],
    *,
    cwd: str,
    timeout: float,
    output_log: Path,
    inputs: Sequence[tuple[str, str, int]],
    launch_sh: str,
) -> bytes:
    """Run submit.py on ``node`` in ``cwd`` (created first, with the ``inputs`` it
    reads: ``(path, text, mode)``) and return the launch script it wrote at
    ``launch_sh`` there; its full output goes to the local ``output_log``
    whatever happens. A non-zero exit or a missing launch script is a
    :class:`BuildError`."""
    argv, where = [str(a) for a in argv], f"# on {node.describe()}\n"
    made = node.run(["mkdir", "-p", "--", cwd])
    if made.returncode != 0:
        said = _last_line(_text(made.stderr)) or "mkdir failed"
        raise BuildError(
            f"{node.describe()}: cannot create remote_work_dir {cwd} ({said}); "
            "set a writable remote_work_dir"
        )
    for path, text, mode in inputs:
        node.write_file(path, text.encode("utf-8"), mode)
    try:
        done = node.run(["sh", "-c", _IN_FOLDER, "sh", cwd, *argv], timeout=timeout)
    except BuildError as exc:
        _keep_log(output_log, argv, cwd, "", f"{exc}\n", "no answer", where)
        raise
    out, err = _text(done.stdout), _text(done.stderr)
    _keep_log(output_log, argv, cwd, out, err, f"exit code {done.returncode}", where)
    if done.returncode != 0:
        line = _last_line(err) or _last_line(out) or "no error output"
        raise BuildError(
            f"submit.py failed on {node.describe()} (exit {done.returncode}): {line}; "
            f"full output in {output_log}"
        )
    script = node.read_head(launch_sh, MAX_LAUNCH_BYTES)
    if script is None:
        raise BuildError(
            f"submit.py on {node.describe()} wrote no {launch_sh}; full output in {output_log}"
        )
    return script
