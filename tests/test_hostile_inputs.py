"""Hostile and broken input files end in one short line and exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.build_env import BuildEnv
from tests.test_build_stops import run_cli, snapshot_tree

ALIAS_BOMB = "\n".join(
    [
        "workflow_type: custom",
        "work_dir: /w",
        'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
        *(
            f"{n}: &{n} [*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p}]"
            for p, n in zip("abcdefgh", "bcdefghi", strict=True)
        ),
        "custom_cmd: *i",
    ]
)


def _refused(argv: list[str], message: str) -> str:
    code, out, err = run_cli(argv)
    assert code == 2, err
    assert out == ""
    assert len(err.splitlines()) == 1 and err.startswith("scriptbuilder: error: ")
    assert message in err
    assert len(err) < 400
    return err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"workflow_type": "custom", "work_dir": "/w\xff"}', "is not UTF-8 text (byte 0xff"),
        (b"\xfe\xff\x00{", "is not UTF-8 text"),
        (b"[" * 100_000, "is nested too deeply"),
        (b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "is nested too deeply"),
        (b"a: " + b"[" * 5000 + b"]" * 5000, "maximum nesting depth"),
        (ALIAS_BOMB.encode(), "uses the YAML alias *a; aliases are not accepted"),
        (b"a: &x 1\nb: *x\n", "uses the YAML alias *x"),
        (
            b'{"workflow_type": "custom", "work_dir": "/w", "x": "' + b"y" * 10**7 + b'"}',
            "larger than 2048 KiB",
        ),
        (b"custom_cmd: " + b"z" * 10**7, "larger than 2048 KiB"),
    ],
    ids=[
        "non-utf8",
        "utf16",
        "json-nesting",
        "json-nesting-in-value",
        "yaml-nesting",
        "alias-bomb",
        "alias",
        "10MB-json",
        "10MB-yaml",
    ],
)
def test_hostile_request_file(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "request.yaml"
    path.write_bytes(content)
    _refused(["build", str(path)], message)


def test_lone_surrogate_in_a_command(build_env: BuildEnv, tmp_path: Path) -> None:
    path = tmp_path / "request.json"
    text = json.dumps(build_env.request("custom", custom_cmd="echo \ud800 " + "x" * 10**5))
    assert "\\ud800" in text
    path.write_text(text)
    before = snapshot_tree(build_env.work_dir)
    _refused(["build", str(path)], "request field 'custom_cmd': holds a lone surrogate")
    assert snapshot_tree(build_env.work_dir) == before


@pytest.mark.parametrize(
    "name", ["-m", "--help", ".hidden", "_x", "a b", "x" * 201, "\u00e9" * 101], ids=repr
)
def test_model_name_that_cannot_name_files_and_containers(
    build_env: BuildEnv, tmp_path: Path, name: str
) -> None:
    """Docker names start with a letter or digit; a file name holds at most 255 bytes."""
    path = tmp_path / "request.json"
    path.write_text(json.dumps(build_env.request("custom", model_name=name)))
    before = snapshot_tree(build_env.work_dir)
    _refused(["build", "--dry-run", str(path)], "must start with a letter or digit, then hold")
    assert snapshot_tree(build_env.work_dir) == before


@pytest.mark.parametrize(("line", "got"), [("time_limit: 30:00", "1800"), ("account: 0123", "83")])
def test_yaml_number_for_a_string_says_to_quote_it(
    build_env: BuildEnv, tmp_path: Path, line: str, got: str
) -> None:
    path = tmp_path / "request.yaml"
    request = {k: v for k, v in build_env.request("custom").items() if k not in line}
    path.write_text(yaml.safe_dump(request) + line + "\n")
    err = _refused(["build", str(path)], f"expected a string, got {got} (YAML reads")
    assert "quote it" in err


def test_huge_value_is_shortened(build_env: BuildEnv, tmp_path: Path) -> None:
    path = tmp_path / "request.json"
    path.write_text(json.dumps(build_env.request("custom", account="a\n" + "b" * 10**6)))
    err = _refused(["build", str(path)], "request field 'account': holds a newline")
    assert "..." in err


def test_request_at_the_size_limit_is_read(build_env: BuildEnv, tmp_path: Path) -> None:
    from scriptbuilder.inputs.request_file import MAX_REQUEST_BYTES

    # a long command (but within the 128 KiB CUSTOM_COMMAND can carry), the rest blanks
    request = build_env.request("custom", custom_cmd="echo " + "x" * 100_000)
    text = json.dumps(request)
    path = tmp_path / "request.json"
    path.write_text(text + " " * (MAX_REQUEST_BYTES - len(text.encode())))
    assert path.stat().st_size == MAX_REQUEST_BYTES
    code, _, err = run_cli(["build", "--dry-run", str(path)])
    assert code == 0, err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"arch": "x86_64\xff"}', "is not UTF-8 text"),
        (b"[" * 100_000, "is nested too deeply"),
        (b"{" * 10, "is not valid JSON"),
    ],
    ids=["non-utf8", "nesting", "garbage"],
)
def test_hostile_env_info_file(
    build_env: BuildEnv, tmp_path: Path, content: bytes, message: str
) -> None:
    info = tmp_path / "info.json"
    info.write_bytes(content)
    request = tmp_path / "request.json"
    request.write_text(json.dumps(build_env.request()))
    err = _refused(["build", "--env-info", str(info), str(request)], message)
    assert "--env-info" in err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"user": "\xff"}', "is not UTF-8 text"),
        (b"[" * 100_000, "is nested too deeply"),
        (b'{"user": "\\ud800"}', "holds a lone surrogate"),
        (b'{"mounts": 5}', "field 'mounts': expected a list, got 5; fix the probe output"),
    ],
    ids=["non-utf8", "nesting", "surrogate", "bad-type"],
)
def test_hostile_slurm_env_file(
    build_env: BuildEnv, tmp_path: Path, content: bytes, message: str
) -> None:
    (build_env.work_dir / "slurm_env.json").write_bytes(content)
    request = tmp_path / "request.json"
    request.write_text(json.dumps(build_env.request()))
    before = snapshot_tree(build_env.work_dir)
    err = _refused(["build", str(request)], message)
    assert "slurm_env_file" in err
    assert snapshot_tree(build_env.work_dir) == before
