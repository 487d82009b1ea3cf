"""Running the checkout's submit.py (the perf-sanity path): its output kept in a
log file whatever happens, its failures as one-line :class:`BuildError` messages."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from scriptbuilder.errors import BuildError
from scriptbuilder.outputs.atomic import write_atomic


def _text(data: str | bytes | None) -> str:
    if isinstance(data, bytes):
        return data.decode("utf-8", "replace")
    return data or ""


def _last_line(text: str) -> str:
    return next((line.strip() for line in reversed(text.splitlines()) if line.strip()), "")


def _keep_log(path: Path, argv: Sequence[str], cwd: Path, out: str, err: str, status: str) -> None:
    def ended(text: str) -> str:
        return text if not text or text.endswith("\n") else text + "\n"

    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(
        path,
        f"$ cd {shlex.quote(str(cwd))} && {shlex.join(argv)}\n--- stdout ---\n{ended(out)}"
        f"--- stderr ---\n{ended(err)}--- {status} ---\n",
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
