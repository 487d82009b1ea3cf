"""scriptbuilder: TensorRT-LLM test requests to Slurm batch scripts and job_spec.json.

``scriptbuilder.build(request)`` and ``scriptbuilder.build_many(requests)`` are
the Python API (see :mod:`scriptbuilder.api`); it is imported on first use, so
the drop-in CLI does not load pydantic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from scriptbuilder.api import BuildResult, BuiltJob, build, build_many
    from scriptbuilder.lifecycle import submit

__all__ = ["BuildResult", "BuiltJob", "__version__", "build", "build_many", "submit"]


def __getattr__(name: str) -> Any:
    if name in ("build", "build_many", "BuiltJob", "BuildResult"):
        from scriptbuilder import api

        return getattr(api, name)
    if name == "submit":  # the job's life after the build (scriptbuilder.lifecycle)
        from scriptbuilder.lifecycle import submit

        return submit
    raise AttributeError(f"module 'scriptbuilder' has no attribute {name!r}")
