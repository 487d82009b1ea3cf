"""The pydantic models are the validator: strict types, null as "not known" in
slurm_env.json, and one-line messages naming the field."""

from __future__ import annotations

import json
from typing import Any

import pytest

from scriptbuilder.cli.build import SCHEMAS
from scriptbuilder.errors import BuildError
from scriptbuilder.models.messages import validated
from scriptbuilder.models.request import BuildRequest
from scriptbuilder.models.slurm_env import SlurmEnv
from scriptbuilder.scenarios.registry import SCENARIOS
from scriptbuilder.workflows.registry import WORKFLOWS
from tests.build_env import SLURM_ENV, BuildEnv
from tests.test_build_stops import run_cli


def request_error(data: dict[str, Any]) -> str:
    with pytest.raises(BuildError) as err:
        validated(BuildRequest, data, "request field", "fix its value")
    return str(err.value)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"workflow_type": None}, "request field 'workflow_type' is required; add it"),
        ({"colour": 1}, "request field 'colour' is unknown; known fields: workflow_type, "),
        ({"modle_name": "x"}, "request field 'modle_name' is unknown; did you mean 'model_name'?"),
        ({"env_check": {"gpu_per_node": 1}}, "'env_check.gpu_per_node' is unknown; did you mean"),
        ({"workflow_type": "moon"}, "'workflow_type': expected one of 'pytest', 'eval',"),
        ({"required_devices": 0}, "'required_devices': must be at least 1, got 0; fix its value"),
        ({"required_devices": True}, "'required_devices': expected an integer, got True;"),
        ({"required_devices": "4"}, "'required_devices': expected an integer, got '4';"),
        ({"env_check": {"gpus_per_node": "8"}}, "'env_check.gpus_per_node': expected an integer"),
        ({"persistent_mode": "yes"}, "'persistent_mode': expected true or false, got 'yes'"),
        ({"work_dir": 5}, "'work_dir': expected a string, got 5"),
        ({"account": "a\nb"}, "'account': holds a newline, which would break a #SBATCH line"),
        ({"time_limit": "1:00\r"}, "'time_limit': holds a carriage return"),
        ({"work_dir": "/w\x00x"}, "'work_dir': holds a NUL character"),
        ({"custom_cmd": "echo \ud800"}, "'custom_cmd': holds a lone surrogate"),
        ({"partition": "a\ud800"}, "'partition': holds a lone surrogate"),
    ],
)
def test_request_refusals_name_the_field(changes: dict[str, Any], message: str) -> None:
    data = {"workflow_type": "pytest", "work_dir": "/w", **changes}
    data = {k: v for k, v in data.items() if v is not None}
    assert message in request_error(data)


def test_multi_line_commands_are_accepted() -> None:
    req = BuildRequest.model_validate(
        {"workflow_type": "custom", "work_dir": "/w", "custom_cmd": "echo a\necho b\r\n"}
    )
    assert req.custom_cmd == "echo a\necho b\r\n"


def test_unknown_field_message_is_bounded() -> None:
    message = request_error({"workflow_type": "pytest", "work_dir": "/w", "colour": 1})
    assert len(message) < 400 and message.endswith(", ...")


def test_messages_are_short_for_huge_values() -> None:
    message = request_error({"workflow_type": "pytest", "work_dir": "/w", "account": ["x" * 10**6]})
    assert len(message) < 300
    name = "y" * 10**5
    message = request_error({"workflow_type": "pytest", "work_dir": "/w", name: 1})
    assert len(message) < 1000


def test_slurm_env_null_means_not_known() -> None:
    nulls = {
        "user": None,
        "default_account": None,
        "accounts": None,
        "default_partition": None,
        "partitions": [{"name": "p", "arch": None, "gres": None, "requires_gres": None}],
        "pmix": None,
        "errors": None,
        "cluster_name": None,
        "mounts": None,
        "ssh_host": None,
        "slurm_user": None,
        "remote_cwd": None,
        "mfa_style": None,
    }
    env = SlurmEnv.model_validate(nulls)
    assert (env.accounts, env.errors, env.mounts, env.pmix.available) == ([], [], [], [])
    assert not env.partitions[0].requires_gres
    schema = SlurmEnv.model_json_schema()
    assert {"type": "null"} in schema["properties"]["mounts"]["anyOf"]


def test_slurm_env_keeps_unknown_keys() -> None:
    env = SlurmEnv.model_validate(SLURM_ENV)
    assert env.partitions[0].name == "gpu"
    assert env.model_dump()["probe_extra"] == SLURM_ENV["probe_extra"]


def test_slurm_env_union_refusal_is_one_problem() -> None:
    env = {"partitions": [{"name": "p", "nodes": 1.5}]}
    with pytest.raises(BuildError) as err:
        validated(SlurmEnv, env, "slurm_env_file x: field", "fix the probe output")
    assert str(err.value) == (
        "slurm_env_file x: field 'partitions.0.nodes': expected a string or an integer, "
        "got 1.5; fix the probe output"
    )


@pytest.mark.parametrize("scenario", list(SCENARIOS))
@pytest.mark.parametrize("workflow", list(WORKFLOWS))
def test_job_spec_documents_are_valid_job_specs(
    build_env: BuildEnv, workflow: str, scenario: str
) -> None:
    job = build_env.build(build_env.request(workflow, execution_scenario=scenario))
    model = job.job_spec
    dumped = {k: v for k, v in model.model_dump(mode="json").items() if v is not None}
    assert dumped == job.job_spec_data
    assert job.job_spec_json == json.dumps(job.job_spec_data, indent=2, ensure_ascii=False) + "\n"


def test_job_spec_document_refuses_unknown_fields() -> None:
    from scriptbuilder.outputs.job_spec import job_spec_document

    with pytest.raises(TypeError, match=r"not job_spec fields: \['bogus'\]"):
        job_spec_document(workflow_type="custom", bogus=1)


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_json_schema_is_the_models(name: str) -> None:
    code, out, _ = run_cli(["schema", name])
    assert code == 0 and json.loads(out) == SCHEMAS[name].model_json_schema()
