"""scriptbuilder: TensorRT-LLM test requests to Slurm batch scripts and job_spec.json.

The Python API: ``build(request)`` and ``build_many(requests)`` (:mod:`scriptbuilder.api`),
``submit(work_dir)`` and ``open_run(work_dir)`` (the job after the build,
:mod:`scriptbuilder.lifecycle`), and the types they take and return: the request,
slurm_env.json, job_spec.json and build-result models (:mod:`scriptbuilder.models`),
the built job, a sweep's result, the run and its verdict.
"""

from __future__ import annotations

from scriptbuilder.api import BuiltJob, SweepResult, build, build_many
from scriptbuilder.errors import BuildError
from scriptbuilder.lifecycle import LifecycleError, Run, Verdict, open_run, submit
from scriptbuilder.models import BuildRequest, BuildResult, JobSpec, SlurmEnv
from scriptbuilder.version import __version__

__all__ = [
    "BuildError",
    "BuildRequest",
    "BuildResult",
    "BuiltJob",
    "JobSpec",
    "LifecycleError",
    "Run",
    "SlurmEnv",
    "SweepResult",
    "Verdict",
    "__version__",
    "build",
    "build_many",
    "open_run",
    "submit",
]
