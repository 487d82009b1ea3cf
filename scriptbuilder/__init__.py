"""scriptbuilder: TensorRT-LLM test requests to Slurm batch scripts and job_spec.json.

``scriptbuilder.build(request)``, ``scriptbuilder.build_many(requests)`` and
``scriptbuilder.submit(work_dir)`` (the job after the build) are
the Python API (see :mod:`scriptbuilder.api`).
"""

from __future__ import annotations

from scriptbuilder.api import BuildResult, BuiltJob, build, build_many
from scriptbuilder.lifecycle import submit
from scriptbuilder.version import __version__

__all__ = ["BuildResult", "BuiltJob", "__version__", "build", "build_many", "submit"]
