"""The pydantic models, the one declaration and validator of the request, slurm_env.json,
job_spec.json and a build's result; ``scriptbuilder schema NAME`` prints their JSON Schemas.
"""

from __future__ import annotations

import json

from pydantic import BaseModel

from scriptbuilder.models.build_result import BuildOutcome, TraceEntry
from scriptbuilder.models.job_spec import SCHEMA_VERSION, JobSpec, SlurmParams
from scriptbuilder.models.request import BuildRequest, EnvCheck, ExecutionScenario, WorkflowType
from scriptbuilder.models.slurm_env import Partition, Pmix, SlurmEnv

__all__ = [
    "SCHEMAS",
    "SCHEMA_VERSION",
    "BuildOutcome",
    "BuildRequest",
    "EnvCheck",
    "ExecutionScenario",
    "JobSpec",
    "Partition",
    "Pmix",
    "SlurmEnv",
    "SlurmParams",
    "TraceEntry",
    "WorkflowType",
    "json_schema",
]

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
