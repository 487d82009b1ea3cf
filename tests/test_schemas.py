"""The shipped JSON Schemas match the pydantic models, and checking against them
agrees with pydantic, so builds can skip importing pydantic."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from scriptbuilder import models
from scriptbuilder.schema_check import SchemaError, validate
from scriptbuilder.schemas import MODELS, generate, schema, schema_text
from tests.build_env import SLURM_ENV, BuildEnv


@pytest.mark.parametrize("name", list(MODELS))
def test_shipped_schema_is_current(name: str) -> None:
    assert schema_text(name) == generate(name), (
        "the pydantic models changed: run python -m scriptbuilder.schemas and commit "
        "scriptbuilder/data/schemas"
    )


REQUESTS: list[dict[str, Any]] = [
    {"workflow_type": "pytest", "work_dir": "/w"},
    {
        "workflow_type": "eval",
        "work_dir": "/w",
        "required_devices": 2,
        "persistent_mode": False,
        "env_check": {"gpus_per_node": 4},
    },
    {
        "workflow_type": "custom",
        "work_dir": "/w",
        "execution_scenario": "local_docker",
        "custom_cmd": "echo 'x'",
        "env_check": {"default_models_repo": "/m", "available_gpus": 0},
    },
]


@pytest.mark.parametrize("request_data", REQUESTS)
def test_request_check_agrees_with_pydantic(request_data: dict[str, Any]) -> None:
    checked = validate(request_data, schema("request"))
    assert checked.data == models.BuildRequest.model_validate(request_data).model_dump()


# (request, field, kind, refused by pydantic too): JSON requests are checked strictly,
# where pydantic's lax mode would turn True or "8" into an integer.
BAD_REQUESTS: list[tuple[dict[str, Any], str, str, bool]] = [
    ({"work_dir": "/w"}, "workflow_type", "missing", True),
    ({"workflow_type": "pytest", "work_dir": "/w", "colour": 1}, "colour", "extra", True),
    ({"workflow_type": "moon", "work_dir": "/w"}, "workflow_type", "enum", True),
    (
        {"workflow_type": "pytest", "work_dir": "/w", "required_devices": 0},
        "required_devices",
        "range",
        True,
    ),
    (
        {"workflow_type": "pytest", "work_dir": "/w", "required_devices": True},
        "required_devices",
        "type",
        False,
    ),
    (
        {"workflow_type": "pytest", "work_dir": "/w", "env_check": {"gpus_per_node": "8"}},
        "env_check.gpus_per_node",
        "type",
        False,
    ),
    (
        {"workflow_type": "pytest", "work_dir": "/w", "env_check": {"nope": 1}},
        "env_check.nope",
        "extra",
        True,
    ),
    ({"workflow_type": "pytest", "work_dir": 5}, "work_dir", "type", True),
]


@pytest.mark.parametrize(("request_data", "path", "kind", "pydantic_refuses"), BAD_REQUESTS)
def test_request_check_refusals(
    request_data: dict[str, Any], path: str, kind: str, pydantic_refuses: bool
) -> None:
    from pydantic import ValidationError

    with pytest.raises(SchemaError) as err:
        validate(request_data, schema("request"))
    assert (err.value.path, err.value.kind) == (path, kind)
    if pydantic_refuses:
        with pytest.raises(ValidationError):
            models.BuildRequest.model_validate(request_data)


def test_slurm_env_check_agrees_with_pydantic() -> None:
    checked = validate(SLURM_ENV, schema("slurm-env"))
    assert checked.data == models.SlurmEnv.model_validate(SLURM_ENV).model_dump()
    assert checked.partitions[0].name == "gpu"
    assert checked.data["probe_extra"] == SLURM_ENV["probe_extra"]


@pytest.mark.parametrize("scenario", ["local_slurm", "remote_slurm", "local_docker"])
@pytest.mark.parametrize("workflow", ["pytest", "eval", "bench", "custom"])
def test_job_spec_documents_are_valid_job_specs(
    build_env: BuildEnv, workflow: str, scenario: str
) -> None:
    job = build_env.build(build_env.request(workflow, execution_scenario=scenario))
    model = job.job_spec
    dumped = {k: v for k, v in model.model_dump(mode="json").items() if v is not None}
    assert dumped == job.job_spec_data
    assert json.loads(job.job_spec_json) == job.job_spec_data


def test_build_does_not_import_pydantic(build_env: BuildEnv) -> None:
    request = json.dumps(build_env.request("eval"))
    code = (
        "import json, sys; import scriptbuilder.api as a; "
        f"job = a.build(json.loads({request!r}), environ={{'HOME': '/h'}}); "
        "job.write(); print('pydantic' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    "doc",
    [
        {"a": 'x\n"y" ü \u2028 \\ \t', "b": None, "c": True, "d": False, "e": 0, "f": -12},
        {"l": [], "d": {}, "n": [[], [1, [2, {"k": []}]], {"x": {"y": {}}}]},
        {"slurm_env": SLURM_ENV, "after": ["x"]},
        {"slurm_env": {}, "nested": {"slurm_env": {"not": "top level"}}},
        {"s": ["a", "\u00fc\n"], "m": ["a", 1, None, True], "f": 1.5, "t": [1.25]},
    ],
)
def test_job_spec_json_is_exactly_json_dumps(doc: dict[str, Any]) -> None:
    from scriptbuilder.outputs.job_spec import job_spec_json

    assert job_spec_json(doc) == json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def test_job_spec_document_refuses_unknown_fields() -> None:
    from scriptbuilder.outputs.job_spec import job_spec_document

    with pytest.raises(TypeError, match=r"not job_spec fields: \['bogus'\]"):
        job_spec_document(workflow_type="custom", bogus=1)


@pytest.mark.parametrize(
    "request_data",
    [
        *REQUESTS,
        *(bad for bad, _, _, _ in BAD_REQUESTS),
        {"workflow_type": "pytest", "work_dir": "/w", "model_name": None, "partition": "ü"},
        {"workflow_type": "bench", "work_dir": "/w", "persistent_mode": None, "env_check": {}},
        {"workflow_type": "bench", "work_dir": "/w", "model_name": ["x"]},
        {"workflow_type": "bench", "work_dir": "/w", "execution_scenario": "moon"},
    ],
)
def test_compiled_object_check_equals_the_full_check(request_data: dict[str, Any]) -> None:
    """Objects are checked through a per-schema table of accepted types; it must
    give exactly what the full rule-by-rule check gives, value or error."""
    from scriptbuilder.schema_check import _check_object, _check_object_slowly

    request_schema = schema("request")

    def outcome(check: Any) -> Any:
        try:
            return check(request_data, request_schema, request_schema, "")
        except SchemaError as exc:
            return (exc.path, exc.problem, exc.kind)

    fast = outcome(_check_object)
    assert fast == outcome(_check_object_slowly)
    if isinstance(fast, dict):
        assert list(fast) == list(outcome(_check_object_slowly))
