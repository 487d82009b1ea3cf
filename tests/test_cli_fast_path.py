"""``scriptbuilder build`` reads well-formed calls without click: the values must
be the ones click gives, the output the bytes click prints, and everything else
must still go through click."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import click
import pytest

from scriptbuilder.cli import build as cli
from scriptbuilder.cli.console import run_click
from tests.build_env import BuildEnv


def click_params(args: list[str]) -> dict[str, object]:
    """What click passes to ``build`` for ``args`` (nothing is run)."""
    group = cli.click_group()
    parent = click.Context(group, info_name=cli.PROG)
    with group.commands["build"].make_context("build", args[1:], parent=parent) as ctx:
        return dict(ctx.params)


SIMPLE_CALLS = [
    ["build", "r.json"],
    ["build", "-"],
    ["build", "--dry-run", "r.json"],
    ["build", "r.json", "--explain", "--dry-run"],
    ["build", "--env-info", "info.json", "r.yaml"],
    ["build", "--env-info=info.json", "--explain", "r.json"],
    ["build", "--env-info=", "r.json"],
    ["build", "ünïcode request.json"],
]


@pytest.mark.parametrize("args", SIMPLE_CALLS)
def test_simple_calls_read_as_click_reads_them(args: list[str]) -> None:
    opts = cli.parse_build(args)
    assert opts is not None
    assert opts == click_params(args)


NOT_SIMPLE = [
    [],
    ["build"],
    ["--help"],
    ["--version"],
    ["build", "--help"],
    ["build", "-h", "r.json"],
    ["build", "r.json", "other.json"],
    ["build", "--dry-run", "--dry-run", "r.json"],
    ["build", "--dry-run=1", "r.json"],
    ["build", "--env-info", "a", "--env-info", "b", "r.json"],
    ["build", "--env-info"],
    ["build", "r.json", "--env-info"],
    ["build", "--env-info", "--explain", "r.json"],
    ["build", "--env-info", "-", "r.json"],
    ["build", "--dry", "r.json"],
    ["build", "--", "r.json"],
    ["build", "-x", "r.json"],
    ["schema", "request"],
]


@pytest.mark.parametrize("args", NOT_SIMPLE)
def test_everything_else_goes_to_click(args: list[str]) -> None:
    assert cli.parse_build(args) is None


def test_completion_goes_to_click(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("_SCRIPTBUILDER_COMPLETE", "bash_complete")
    assert cli.parse_build(["build", "r.json"]) is None


def _through_click(args: list[str]) -> tuple[int, str, str]:
    """``args`` run by click in this process."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with redirect_stdout(out), redirect_stderr(err):
        try:
            run_click(cli.PROG, cli.click_group(), args)
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


def _as_process(args: list[str]) -> tuple[int, str, str]:
    code = "import sys; from scriptbuilder.cli.build import main; main(sys.argv[1:])"
    proc = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=False
    )
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize(
    "flags", [["--dry-run"], ["--dry-run", "--explain"], ["--explain"], []], ids=str
)
def test_process_output_matches_click(
    build_env: BuildEnv, tmp_path: Path, flags: list[str]
) -> None:
    request = tmp_path / "request.json"
    request.write_text(json.dumps(build_env.request("custom", custom_cmd="echo 'ü' \x1b[1m")))
    args = ["build", *flags, str(request)]
    fast = _as_process(args)
    written = {p.name: p.read_bytes() for p in build_env.work_dir.iterdir()}
    assert fast == _through_click(args)
    assert written == {p.name: p.read_bytes() for p in build_env.work_dir.iterdir()}


def test_process_errors_match_click(build_env: BuildEnv, tmp_path: Path) -> None:
    request = tmp_path / "request.json"
    request.write_text(json.dumps({**build_env.request(), "colour": "blue"}))
    for args in (["build", str(request)], ["build", str(tmp_path / "missing.json")]):
        fast = _as_process(args)
        assert fast[0] == 2 and len(fast[2].splitlines()) == 1
        assert fast == _through_click(args)


def test_build_does_not_import_click(build_env: BuildEnv, tmp_path: Path) -> None:
    request = tmp_path / "request.json"
    request.write_text(json.dumps(build_env.request()))
    code = (
        "import sys; from scriptbuilder.cli.build import main; main(sys.argv[1:]); "
        "print('click' in sys.modules, file=sys.stderr)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, "build", str(request)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert proc.stderr.strip() == "False"
