"""Request fields: every field takes the values of its type and refuses others;
a refusal is one line naming the field, the same from the API and the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from scriptbuilder.errors import BuildError
from scriptbuilder.models.fields import ONE_LINE_PATTERN
from scriptbuilder.models.request import BuildRequest
from tests.build_env import BuildEnv
from tests.test_build_stops import run_cli

#: (values the field's type accepts, values it refuses), by kind of field.
ONE_LINE = (["/ü b"], [5, "/a\nb"])
TEXT = (["echo a\necho 'b'\r\n"], [5, "echo \ud800"])
COUNT = ([4, None], ["4", 0])
FLAG = ([False], ["true", 1])
KINDS: dict[str, tuple[list[Any], list[Any]]] = {
    "workflow_type": (["pytest", "custom"], ["moon", "PYTEST", 1, None]),
    "execution_scenario": (["local_slurm", "remote_slurm"], ["local_direct", True]),
    "work_dir": ONE_LINE,
    "required_devices": COUNT,
    "node_count": COUNT,
    "persistent_mode": FLAG,
    "perf_benchmark_mode": (["e2e", "gen_only", "ctx_only", None], ["E2E", "both", 1, True]),
    "allow_missing_tests": FLAG,
    "env_check": (
        [{}, {"gpus_per_node": 2, "available_gpus": 0, "default_models_repo": "/m"}],
        [
            "x",
            {"gpus_per_node": "2"},
            {"gpus_per_node": 0},
            {"available_gpus": True},
            {"default_models_repo": "/m\n"},
            {"nope": 1},
        ],
    ),
    "timeout_warning_seconds": ([1, 300, 65535, None], ["300", True, 0, 65536, 1.5]),
    "secret_name_patterns": ([["*TOKEN*"], [], None], ["*TOKEN*", [5], ["\ud800"]]),
    "secret_values": ([["abc123", "a\nb"], [], None], ["abc123", [5], [True]]),
    "secrets_from_environment": ([True, False, None], ["true", 1]),
}
KINDS.update(
    total_required_devices=COUNT,
    required_devices_per_node=COUNT,
    build_project=FLAG,
    skip_install=FLAG,
    monitor_timeout=(["1h", "30m", "3600s", "01:30:00"], ["1 h", "2hours", 5, "1h\n", "1:5:0"]),
    slurm_password=(["pw", "a\nb $x"], [5, True, ["pw"]]),
    default_test_minutes=([1, 2.5, None], [0, -1.0, "10", True]),
    max_jobs=COUNT,
    share_node=FLAG,
    test_db=(
        [{"context": "l0"}, {"context": "l0", "gpus": 4, "terms": {"cpu": "x86_64", "n": 1}}],
        [
            "l0",
            {},
            {"context": ""},
            {"context": "l0", "gpus": 0},
            {"context": "l0", "nope": 1},
            {"context": "l0", "gpus": 4, "terms": {"system_gpu_count": 4}},
            {"context": "l0\nx"},
        ],
    ),
)
#: Fields given in place of test_cmd, tried on a pytest request without one.
CAMPAIGN_FIELDS = ("test_list", "test_db")
for _name in ("test_cmd", "eval_cmd", "bench_cmd", "custom_cmd", "custom_env"):
    KINDS[_name] = TEXT
for _name in BuildRequest.model_fields:
    KINDS.setdefault(_name, ONE_LINE)
#: The first field of each kind stands for the kind in a build.
BUILT = {id(kind): name for name, kind in reversed(KINDS.items())}
CASES = [
    (name, value, valid)
    for name, kind in KINDS.items()
    if BUILT[id(kind)] == name
    for valid, values in zip((True, False), kind, strict=True)
    for value in values
]


def test_the_table_kinds_are_the_model_types() -> None:
    """A field is in ONE_LINE exactly when its schema carries the one-line pattern."""
    properties = BuildRequest.model_json_schema()["properties"]
    for name in BuildRequest.model_fields:
        options = properties[name].get("anyOf", [properties[name]])
        one_line = any(o.get("pattern") == ONE_LINE_PATTERN for o in options)
        assert (KINDS[name] is ONE_LINE) == one_line, name


def _request(build_env: BuildEnv, name: str, value: Any) -> dict[str, Any]:
    if name in CAMPAIGN_FIELDS:
        data = build_env.request("pytest", test_cmd=None)
    else:
        data = build_env.request("custom")
    if value is None:
        data.pop(name, None)
    else:
        data[name] = value
    return data


def _accepted(data: dict[str, Any]) -> bool:
    try:
        BuildRequest.model_validate(data)
    except ValidationError:
        return False
    return True


def test_every_field_takes_the_values_of_its_kind(build_env: BuildEnv) -> None:
    wrong = [
        (name, value)
        for name, (good, bad) in KINDS.items()
        for valid, values in ((True, good), (False, bad))
        for value in values
        if _accepted(_request(build_env, name, value)) is not valid
    ]
    assert wrong == []


@pytest.mark.parametrize(
    ("name", "value", "valid"),
    CASES,
    ids=[f"{n}-{'ok' if ok else 'bad'}-{i}" for i, (n, _, ok) in enumerate(CASES)],
)
def test_a_build_refuses_a_bad_value_naming_the_field(
    build_env: BuildEnv, name: str, value: Any, valid: bool
) -> None:
    try:
        build_env.build(_request(build_env, name, value))
    except BuildError as exc:
        refused = str(exc).startswith("request field")
        assert refused is not valid, exc
        if refused:
            assert f"'{name}" in str(exc) and len(str(exc)) < 400 and "\n" not in str(exc)
    else:
        assert valid


def test_api_and_cli_refuse_a_field_alike(build_env: BuildEnv, tmp_path: Path) -> None:
    data = _request(build_env, "required_devices", "4")
    with pytest.raises(BuildError) as caught:
        build_env.build(data)
    path = tmp_path / "request.json"
    path.write_text(json.dumps(data))
    code, out, err = run_cli(["build", "--dry-run", str(path)])
    assert (code, out) == (2, "")
    assert err == f"scriptbuilder: error: {caught.value}\n"


def test_built_job_request_is_a_build_request(build_env: BuildEnv) -> None:
    data = build_env.request("custom")
    job = build_env.build(data)
    assert isinstance(job.request, BuildRequest)
    dumped = job.request.model_dump(exclude_defaults=True)
    assert dumped == BuildRequest.model_validate(data).model_dump(exclude_defaults=True)
    assert build_env.build(job.request).job_spec_json == job.job_spec_json
