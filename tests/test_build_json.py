"""``scriptbuilder build --json``: one JSON object on stdout, the same fields as a
``--many`` result line, exit codes as without ``--json``; its shape is
``scriptbuilder schema build-result``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from scriptbuilder.models.build_result import BuildResult
from tests.build_env import BuildEnv
from tests.test_build_many import own_work_dir, sweep_file
from tests.test_build_stops import run_cli, snapshot_tree


def request_file(build_env: BuildEnv, request: dict[str, Any]) -> Path:
    path = build_env.root / "request.json"
    path.write_text(json.dumps(request))
    return path


def json_result(args: list[str], code: int = 0) -> tuple[dict[str, Any], str]:
    """The one JSON object ``scriptbuilder <args>`` prints, checked against the model."""
    got, out, err = run_cli(args)
    assert got == code, err
    (line,) = out.splitlines()
    result = json.loads(line)
    dumped = BuildResult.model_validate(result).model_dump(mode="json")
    assert {k: v for k, v in dumped.items() if v is not None} == result
    return result, err


def test_json_prints_what_was_written_instead_of_the_report(build_env: BuildEnv) -> None:
    request = own_work_dir(build_env, "w", "custom")
    result, err = json_result(["build", "--json", str(request_file(build_env, request))])
    assert err == ""
    work = Path(request["work_dir"])
    assert result["ok"] is True and result["exit_code"] == 0 and result["written"] is True
    assert result["work_dir"] == str(work)
    script = result["job_spec"]["script_path"]
    assert result["files"] == [script, str(work / "job_spec.json")]
    assert all(Path(f).is_file() for f in result["files"])
    assert result["job_spec"] == json.loads((work / "job_spec.json").read_text())
    assert result["warnings"] == result["job_spec"]["warnings"]
    assert "line" not in result and "trace" not in result and "error" not in result


def test_json_has_the_fields_of_a_many_line(build_env: BuildEnv) -> None:
    request = own_work_dir(build_env, "w")
    single, _ = json_result(["build", "--json", str(request_file(build_env, request))])
    code, out, _ = run_cli(["build", "--many", str(sweep_file(build_env.root / "s", [request]))])
    assert code == 0
    (line,) = [json.loads(text) for text in out.splitlines()]
    assert line.pop("line") == 1
    assert line == single
    # --json beside --many changes nothing: a sweep always prints JSON lines
    again = run_cli(["build", "--json", "--many", str(build_env.root / "s")])
    assert again[:2] == (0, out)


def test_json_explain_adds_the_trace_with_secrets_masked(build_env: BuildEnv) -> None:
    secret = {"llm_models_root": "/s3cr3t-v4lue", "secret_values": ["s3cr3t-v4lue"]}
    request = {**own_work_dir(build_env, "w", "custom"), **secret}
    path = str(request_file(build_env, request))
    result, _ = json_result(["build", "--json", "--explain", path])
    trace = result["trace"]
    assert {
        "field": "install step",
        "value": "pip install -e . first",
        "rule": "default (skip_install not true)",
    } in trace
    _, text, _ = run_cli(["build", "--dry-run", "--explain", path])
    explained = text.split("\n\n", 1)[0].splitlines()[1:]
    assert len(trace) == len(explained)
    for entry, line in zip(trace, explained, strict=True):
        assert line.strip().startswith(entry["field"]) and line.endswith(f"<- {entry['rule']}")
    assert "s3cr3t-v4lue" not in json.dumps(result)
    assert {"field": "llm_models_root", "value": "/***", "rule": "llm_models_root input"} in trace
    assert result["job_spec"]["container_mounts"].endswith(":/***")


def test_json_dry_run_writes_nothing(build_env: BuildEnv) -> None:
    request = own_work_dir(build_env, "w", "eval")
    path = str(request_file(build_env, request))
    before = snapshot_tree(build_env.root)
    result, _ = json_result(["build", "--json", "--dry-run", path])
    assert snapshot_tree(build_env.root) == before
    assert result["ok"] is True and result["written"] is False
    assert result["files"][-1] == f"{request['work_dir']}/job_spec.json"
    assert not any(Path(f).exists() for f in result["files"])
    assert result["job_spec"]["workflow_type"] == "eval"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"colour": "blue"}, "request field 'colour' is unknown"),
        ({"job_name": "a,b"}, "request field 'job_name': holds a comma"),
    ],
)
def test_json_refusal_is_an_object_and_exit_2(
    build_env: BuildEnv, change: dict[str, Any], message: str
) -> None:
    request = {**own_work_dir(build_env, "w"), **change}
    path = str(request_file(build_env, request))
    before = snapshot_tree(build_env.root)
    result, err = json_result(["build", "--json", path], code=2)
    assert result == {"ok": False, "exit_code": 2, "error": result["error"]}
    assert message in result["error"]
    assert err == f"scriptbuilder: error: {result['error']}\n"
    assert snapshot_tree(build_env.root) == before


def test_json_unreadable_request_is_an_object_too(build_env: BuildEnv) -> None:
    result, err = json_result(["build", "--json", str(build_env.root / "missing.json")], code=2)
    assert result["ok"] is False and "missing.json" in result["error"]
    assert err.startswith("scriptbuilder: error: ")


def test_json_unusable_work_dir_is_an_object_and_exit_2(build_env: BuildEnv) -> None:
    blocker = build_env.root / "a-file"
    blocker.write_text("")
    request = {**own_work_dir(build_env, "x"), "work_dir": str(blocker / "work")}
    result, err = json_result(["build", "--json", str(request_file(build_env, request))], code=2)
    assert result["ok"] is False and result["exit_code"] == 2
    assert str(blocker) in result["error"] and "\n" not in result["error"]
    assert len(err.splitlines()) == 1


def test_schema_build_result_describes_both_shapes() -> None:
    code, out, _ = run_cli(["schema", "build-result"])
    assert code == 0
    schema = json.loads(out)
    assert schema["additionalProperties"] is False
    assert {"line", "ok", "exit_code", "error", "files", "job_spec", "warnings", "trace"} <= set(
        schema["properties"]
    )
    assert set(schema["required"]) == {"ok", "exit_code"}
