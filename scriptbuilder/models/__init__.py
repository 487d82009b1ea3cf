"""The pydantic models, the one declaration and validator of the request
(:mod:`.request`), slurm_env.json (:mod:`.slurm_env`), job_spec.json (:mod:`.job_spec`)
and a build's result (:mod:`.build_result`); ``scriptbuilder schema NAME`` prints
their JSON Schemas.
"""

from __future__ import annotations

from scriptbuilder.models.build_result import BuildResult
from scriptbuilder.models.job_spec import JobSpec
from scriptbuilder.models.request import BuildRequest
from scriptbuilder.models.slurm_env import SlurmEnv

__all__ = ["BuildRequest", "BuildResult", "JobSpec", "SlurmEnv"]
