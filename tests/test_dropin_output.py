"""How the drop-in's script leaves the process: bytes unchanged on stdout and in
``--output``, the log folder made only after the script is out, OS errors in one
line naming the path.

The command lines run in this process with standard output and error on real
files, as a pipe is for a process: what reaches the descriptors is what a reader
gets. The entry points as processes are tests/test_cli.py's.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from scriptbuilder.cli.build import main as build_main
from scriptbuilder.cli.dropin import main as dropin_main
from tests.build_env import make_build_env
from tests.script_runner import FIXED_CLOCK, run_script
from tests.test_compat_flags import base, with_flag

ESC_CMD = "printf '\x1b[31mred\x1b[0m ü\\n'"
#: Standard output's text encoding must not matter: the script is bytes.
ENCODINGS = [None, "latin-1", "ascii"]


@dataclass
class Ran:
    returncode: int
    stdout: bytes
    stderr: bytes


def _on_descriptors(
    main: Callable[[list[str]], None], args: list[str], encoding: str | None, stdout: str | None
) -> Ran:
    """``main(args)`` with descriptors 1 and 2 on files (``stdout``: a path for 1) and
    ``sys.stdout``/``sys.stderr`` text streams over them in ``encoding``."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        target = open(stdout, "wb") if stdout else out  # noqa: SIM115
        saved, streams = (os.dup(1), os.dup(2)), (sys.stdout, sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(target.fileno(), 1)
        os.dup2(err.fileno(), 2)
        sys.stdout = io.TextIOWrapper(open(1, "wb", closefd=False), encoding=encoding)  # noqa: SIM115
        sys.stderr = io.TextIOWrapper(open(2, "wb", closefd=False), encoding=encoding)  # noqa: SIM115
        code = 0
        try:
            main(args)
        except SystemExit as exc:
            code = int(exc.code or 0)
        finally:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(OSError):  # a full disk: the command said so
                    stream.flush()
            sys.stdout, sys.stderr = streams
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
            if stdout:
                target.close()
        out.seek(0)
        err.seek(0)
        return Ran(code, out.read(), err.read())


def drop_in(args: list[str], encoding: str | None = None, stdout: str | None = None) -> Ran:
    """``build_slurm_script args``, standard output a file (never a terminal)."""
    return _on_descriptors(
        lambda a: dropin_main(a, clock=lambda: FIXED_CLOCK), args, encoding, stdout
    )


def drop_in_process(args: list[str], **kwargs: object) -> subprocess.CompletedProcess[bytes]:
    """The drop-in as a process (for limits that only a child may take on)."""
    return subprocess.run(
        [sys.executable, "-m", "scriptbuilder.cli.dropin", *args],
        capture_output=True,
        check=False,
        **kwargs,  # type: ignore[call-overload]
    )


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_escape_sequences_reach_stdout_and_the_program_unchanged(
    tmp_path: Path, encoding: str | None
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    # record-argv: the stand-in pytest, like pytest, exits 4 for the words after -k's value
    args = with_flag(base("pytest", tmp_path), "--test-cmd", f"record-argv -k {ESC_CMD}")
    args = with_flag(args, "--project-path", str(project))
    piped = drop_in(args, encoding)
    assert piped.returncode == 0, piped.stderr
    out = tmp_path / "job.slurm"
    written = drop_in([*args, "--output", str(out)])
    assert written.returncode == 0, written.stderr
    assert piped.stdout == out.read_bytes()
    run = run_script(piped.stdout.decode("utf-8"), tmp_path)
    assert run.exit_code == 0, run.stderr
    assert run.calls("record-argv")[-1] == ["-k", "printf", "\x1b[31mred\x1b[0m ü\\n"]


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_scriptbuilder_dry_run_prints_the_script_bytes(
    tmp_path: Path, encoding: str | None
) -> None:
    env = make_build_env(tmp_path)
    request = env.request("custom", custom_cmd=ESC_CMD)
    path = tmp_path / "request.json"
    path.write_text(json.dumps(request))
    proc = _on_descriptors(build_main, ["build", "--dry-run", str(path)], encoding, None)
    assert proc.returncode == 0, proc.stderr
    built = env.build(request, environ=os.environ)
    assert built.script_text.encode("utf-8") in proc.stdout
    assert built.job_spec_json.encode("utf-8") in proc.stdout


def test_output_into_a_missing_folder_names_it(tmp_path: Path) -> None:
    out = tmp_path / "no" / "such" / "folder" / "job.slurm"
    proc = drop_in([*base("pytest", tmp_path), "--output", str(out)])
    assert proc.returncode == 2
    lines = proc.stderr.decode().splitlines()
    assert lines == [
        f"build_slurm_script: error: cannot write job.slurm into --output folder {out.parent}: "
        f"No such file or directory; create {out.parent} or choose another --output folder"
    ]
    assert "Traceback" not in proc.stderr.decode()
    assert proc.stdout == b""


@pytest.mark.parametrize("flag", ["--log-dir", "--local-log-dir"])
def test_output_may_go_into_the_log_folder_it_makes(tmp_path: Path, flag: str) -> None:
    """The procedure's remote form: ``--local-log-dir <work_dir> --output <work_dir>/...``."""
    work_dir = tmp_path / "new" / "work_dir"
    args = with_flag(base("pytest", tmp_path), flag, str(work_dir))
    proc = drop_in([*args, "--output", str(work_dir / "m_auto_test.slurm")])
    assert proc.returncode == 0, proc.stderr
    assert (work_dir / "m_auto_test.slurm").read_text().startswith("#!/bin/bash")


def test_output_onto_a_folder_names_it(tmp_path: Path) -> None:
    folder = tmp_path / "a-folder"
    folder.mkdir()
    proc = drop_in([*base("pytest", tmp_path), "--output", str(folder)])
    assert proc.returncode == 2
    (line,) = proc.stderr.decode().splitlines()
    assert line.endswith(
        f"error: cannot write the script to --output {folder}: Is a directory; name a file "
        "or choose another --output"
    )
    assert not (tmp_path / "logs").exists()
    assert os.listdir(folder) == []


def test_full_disk_on_stdout_is_one_line(tmp_path: Path) -> None:
    proc = drop_in(base("pytest", tmp_path), stdout="/dev/full")
    assert proc.returncode == 1
    (line,) = proc.stderr.decode().splitlines()
    assert line == "build_slurm_script: error: standard output: No space left on device"


@pytest.mark.parametrize("flag", ["--log-dir", "--local-log-dir"])
def test_unmakeable_log_dir_names_it_and_leaves_no_script(tmp_path: Path, flag: str) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    log_dir = blocker / "logs"
    out = tmp_path / "job.slurm"
    proc = drop_in([*with_flag(base("pytest", tmp_path), flag, str(log_dir)), "--output", str(out)])
    assert proc.returncode == 2
    (line,) = proc.stderr.decode().splitlines()
    assert line == (
        f"build_slurm_script: error: cannot create {flag} {log_dir}: Not a directory; "
        f"make {blocker} a writable folder or choose another {flag}"
    )
    assert not out.exists()
    assert sorted(os.listdir(tmp_path)) == ["a-file"]
    on_stdout = drop_in(with_flag(base("pytest", tmp_path), flag, str(log_dir)))
    assert (on_stdout.returncode, on_stdout.stdout) == (2, b"")  # no script for a dead job


def test_undecodable_argv_bytes_work_with_and_without_output(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    args = with_flag(base("custom", tmp_path), "--project-path", str(project))
    command = os.fsdecode(b"record-argv \xff\xfe")  # as Python reads such argv bytes
    args = with_flag(args, "--custom-cmd", command)
    to_stdout = drop_in(args)
    assert to_stdout.returncode == 0, to_stdout.stderr
    out = tmp_path / "job.slurm"
    to_file = drop_in([*args, "--output", str(out)])
    assert to_file.returncode == 0, to_file.stderr
    assert to_stdout.stdout == out.read_bytes()


def _file_too_large() -> None:
    """In the child: files may not grow past 1 KiB, as on a full disk (EFBIG, not a signal)."""
    import resource
    import signal

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))


@pytest.mark.parametrize("case", ["missing folder", "unwritable folder", "full disk"])
def test_a_refused_output_leaves_nothing_it_created(tmp_path: Path, case: str) -> None:
    """The log folder (and its new parents) made before the script was written is
    removed again when ``--output`` cannot be written."""
    log_dir = tmp_path / "new" / "logs"
    out = {
        "missing folder": tmp_path / "no" / "such" / "job.slurm",
        "unwritable folder": Path("/sys/job.slurm"),  # refused even to root
        "full disk": tmp_path / "job.slurm",
    }[case]
    args = [*with_flag(base("pytest", tmp_path), "--log-dir", str(log_dir)), "--output", str(out)]
    before = sorted(os.listdir(tmp_path))
    if case == "full disk":
        proc: Ran | subprocess.CompletedProcess[bytes] = drop_in_process(
            args, preexec_fn=_file_too_large
        )
    else:
        proc = drop_in(args)
    assert proc.returncode in (1, 2) and proc.stdout == b"", proc.stderr
    (line,) = proc.stderr.decode().splitlines()
    assert line.startswith(f"build_slurm_script: error: cannot write {out.name} into"), line
    assert sorted(os.listdir(tmp_path)) == before
    assert not out.exists()


def test_an_existing_log_folder_is_kept_when_output_is_refused(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    args = [*with_flag(base("pytest", tmp_path), "--log-dir", str(log_dir)), "--output"]
    proc = drop_in([*args, str(tmp_path / "no" / "job.slurm")])
    assert proc.returncode == 2 and log_dir.is_dir() and os.listdir(log_dir) == []
