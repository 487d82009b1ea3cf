"""scriptbuilder: TensorRT-LLM test requests to Slurm batch scripts and job_spec.json.

``scriptbuilder.build(request)``, ``scriptbuilder.build_many(requests)`` and
``scriptbuilder.submit(work_dir)`` (the job after the build) are
the Python API (see :mod:`scriptbuilder.api`).

The API's modules load when one of these names is first used (PEP 562), so that
each command line loads only what it runs: ``build_slurm_script`` renders a script
from its flags and never needs the request models or the job's life after the build.
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


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
