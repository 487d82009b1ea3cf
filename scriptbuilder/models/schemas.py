"""``scriptbuilder schema NAME``: the JSON Schemas of the models."""

from __future__ import annotations

import json

from pydantic import BaseModel

from scriptbuilder.models.build_result import BuildOutcome
from scriptbuilder.models.job_spec import JobSpec
from scriptbuilder.models.request import BuildRequest
from scriptbuilder.models.slurm_env import SlurmEnv

#: ``scriptbuilder schema NAME`` -> the model.
SCHEMAS: dict[str, type[BaseModel]] = {
    "request": BuildRequest,
    "slurm-env": SlurmEnv,
    "job-spec": JobSpec,
    "build-result": BuildOutcome,
}


def json_schema(name: str) -> str:
    """The JSON Schema of the model ``name`` (a key of :data:`SCHEMAS`), as text."""
    schema = SCHEMAS[name].model_json_schema()
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"
