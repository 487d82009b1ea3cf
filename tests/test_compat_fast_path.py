"""The drop-in CLI reads well-formed calls without click: the values must be the
ones click gives, and everything else must still go through click."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

from scriptbuilder.cli import dropin as compat
from tests.script_runner import run_compat

REQUIRED = {
    "pytest": ["--test-cmd", "pytest -x"],
    "custom": ["--custom-cmd", "echo hi"],
    "bench": ["--bench-cmd", "trtllm-bench --model m throughput"],
    "eval": ["--eval-cmd", "trtllm-eval --model m gsm8k"],
}
COMMON = [
    "--model-name",
    "llama",
    "--partition",
    "batch",
    "--account",
    "acct",
    "--docker-image",
    "img:1",
    "--container-mounts",
    "/a:/a",
    "--project-path",
    "/proj",
]


def click_params(args: list[str]) -> dict[str, object]:
    """What click passes to the subcommand for ``args`` (nothing is run)."""
    group = compat.click_group()
    parent = click.Context(group, info_name=compat.PROG)
    with group.commands[args[0]].make_context(args[0], args[1:], parent=parent) as ctx:
        return dict(ctx.params)


SIMPLE_CALLS = [
    ["pytest", *COMMON, *REQUIRED["pytest"]],
    ["pytest", *REQUIRED["pytest"], *COMMON, "--log-dir", "/logs", "--nodes", "2"],
    ["custom", *COMMON, *REQUIRED["custom"], "--custom-env=A=1 B=2", "--run-script="],
    ["bench", *COMMON, "--bench-cmd", "--help", "--ntasks", "08", "--ntasks-per-node=4"],
    ["eval", *COMMON, "--eval-cmd", "-h", "--mpi", "pmix_v5", "--gres", ""],
    ["eval", *COMMON, "--eval-cmd", "--", "--output", "-", "--container-name=--x"],
    ["pytest", *COMMON, "--test-cmd", "pytest 'ünïcode' \x1b[31m $(x)", "--time-limit", " 1 "],
]


@pytest.mark.parametrize("args", SIMPLE_CALLS)
def test_simple_calls_read_as_click_reads_them(args: list[str]) -> None:
    simple = compat.parse_simple(args)
    assert simple is not None
    assert simple[0] == args[0]
    assert simple[1] == click_params(args)


NOT_SIMPLE = [
    [],
    ["--help"],
    ["--version"],
    ["pytest", "--help"],
    ["pytest", "-h", *COMMON, *REQUIRED["pytest"]],
    ["nosuch", *COMMON],
    ["pytest", *COMMON],  # --test-cmd missing
    ["pytest", *COMMON, *REQUIRED["pytest"], "--nodes"],  # no value
    ["pytest", *COMMON, *REQUIRED["pytest"], "--nodes", "0"],
    ["pytest", *COMMON, *REQUIRED["pytest"], "--nodes", "+2"],
    ["pytest", *COMMON, *REQUIRED["pytest"], "--nodes", "٣"],
    ["pytest", *COMMON, *REQUIRED["pytest"], "--account", "again"],  # repeated
    ["pytest", *COMMON, *REQUIRED["pytest"], "--bogus", "1"],
    ["pytest", *COMMON, *REQUIRED["pytest"], "extra"],
    ["pytest", *COMMON, *REQUIRED["pytest"], "--"],
    ["pytest", *COMMON, *REQUIRED["pytest"], "-x", "1"],
    ["custom", *COMMON, *REQUIRED["pytest"]],  # a flag of another subcommand
]


@pytest.mark.parametrize("args", NOT_SIMPLE)
def test_everything_else_goes_to_click(args: list[str]) -> None:
    assert compat.parse_simple(args) is None


def test_completion_goes_to_click(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("_BUILD_SLURM_SCRIPT_COMPLETE", "bash_complete")
    assert compat.parse_simple(["pytest", *COMMON, *REQUIRED["pytest"]]) is None


def test_click_interface_lists_every_flag() -> None:
    for name, command in compat.COMMANDS.items():
        params = compat.click_group().commands[name].params
        options = [p.opts[0] for p in params if isinstance(p, click.Option) and p.opts]
        assert [flag.name for flag in command.flags] == [o for o in options if o != "--help"]


@pytest.mark.parametrize(
    "workload",
    [
        ["--test-cmd", "pytest -k 'ünïcode and not x' \x1b[31mred\x1b[0m"],
        ["--test-cmd", 'pytest "$HOME" `id` \\ \t tab'],
    ],
)
def test_process_output_matches_click(tmp_path: Path, workload: list[str]) -> None:
    """The fast path (a real process writing to a pipe) prints the bytes click
    prints (tests call main in-process, where output always goes through click)."""
    args = ["pytest", *COMMON, "--log-dir", str(tmp_path), *workload]
    proc = subprocess.run(
        [sys.executable, "-m", "scriptbuilder.cli.dropin", *args],
        capture_output=True,
        env={**os.environ, "PYTHONUTF8": "1"},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode("utf-8") == run_compat(args).stdout


def test_process_errors_match_click(tmp_path: Path) -> None:
    args = ["pytest", *COMMON, "--log-dir", str(tmp_path), "--test-cmd", "x", "--nodes", "3"]
    args = [a if a != "llama" else "a\\b" for a in args]
    proc = subprocess.run(
        [sys.executable, "-m", "scriptbuilder.cli.dropin", *args],
        capture_output=True,
        text=True,
        check=False,
    )
    expected = run_compat(args)
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        expected.exit_code,
        expected.stdout,
        expected.stderr,
    )
