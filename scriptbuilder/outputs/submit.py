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
    if data is None:
        return ""
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else data


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _log_text(argv: Sequence[str], cwd: Path, stdout: str, stderr: str, status: str) -> str:
    return (
        f"$ cd {shlex.quote(str(cwd))} && {shlex.join(argv)}\n"
        f"--- stdout ---\n{stdout}"
        f"{'' if not stdout or stdout.endswith(chr(10)) else chr(10)}"
        f"--- stderr ---\n{stderr}"
        f"{'' if not stderr or stderr.endswith(chr(10)) else chr(10)}"
        f"--- {status} ---\n"
    )


def _keep_log(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text)


def run_submit(
    argv: Sequence[str],
    *,
    cwd: str | os.PathLike[str],
    timeout: float,
    output_log: Path,
    env: Mapping[str, str] | None = None,
) -> str:
    """Run submit.py (no shell) and return its stdout.

    Its full stdout and stderr are written to ``output_log`` whatever happens.
    A timeout or a non-zero exit is a :class:`BuildError` naming the last error
    line and the log. The process runs in its own session, so on timeout the
    whole group it started is killed.
    """
    argv = [str(a) for a in argv]
    work = Path(cwd)
    output_log = Path(output_log)
    try:
        proc = subprocess.Popen(
            argv,
            cwd=work,
            env=dict(env) if env is not None else None,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="replace",
            start_new_session=True,
        )
    except OSError as exc:
        _keep_log(output_log, _log_text(argv, work, "", f"{exc}\n", "could not start"))
        raise BuildError(
            f"cannot run submit.py ({argv[0]}: {exc.strerror or exc}); check the Python"
            f" interpreter and {argv[1] if len(argv) > 1 else 'submit.py'}"
        ) from None
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        _kill_group(proc)
        try:
            stdout, stderr = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = _text(exc.stdout), _text(exc.stderr)
        status = f"killed after {timeout:g} s"
        _keep_log(output_log, _log_text(argv, work, stdout or "", stderr or "", status))
        raise BuildError(
            f"submit.py did not finish within {timeout:g} s and was killed;"
            f" full output in {output_log}"
        ) from None
    stdout, stderr = stdout or "", stderr or ""
    _keep_log(output_log, _log_text(argv, work, stdout, stderr, f"exit code {proc.returncode}"))
    if proc.returncode != 0:
        line = _last_line(stderr) or _last_line(stdout) or "no error output"
        raise BuildError(
            f"submit.py failed (exit {proc.returncode}): {line}; full output in {output_log}"
        )
    return stdout
