"""scriptbuilder: TensorRT-LLM test requests to Slurm batch scripts and job_spec.json.

The Python API: ``build(request)``, ``build_many(requests)`` (:mod:`scriptbuilder.api`)
and ``submit(work_dir)`` (the job after the build). Their modules load when a name is
first used (PEP 562), so a command line loads only what it runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scriptbuilder.version import __version__

if TYPE_CHECKING:
    from scriptbuilder.api import BuildResult, BuiltJob, build, build_many
    from scriptbuilder.lifecycle import submit

__all__ = ["BuildResult", "BuiltJob", "__version__", "build", "build_many", "submit"]


def __getattr__(name: str) -> object:
    if name in ("BuildResult", "BuiltJob", "build", "build_many"):
        from scriptbuilder import api  # on first use: see the module docstring

        return getattr(api, name)
    if name == "submit":
        from scriptbuilder.lifecycle import submit  # on first use: see the module docstring

        return submit
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
