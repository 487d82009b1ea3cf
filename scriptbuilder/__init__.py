"""scriptbuilder: TensorRT-LLM test requests to Slurm batch scripts and job_spec.json.

``scriptbuilder.build(request)`` is the Python API (see :mod:`scriptbuilder.api`);
it is imported on first use so the drop-in CLI stays cheap to start.
"""

from __future__ import annotations

__version__ = "0.1.0"

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

    from scriptbuilder.api import BuiltJob, build

__all__ = ["BuiltJob", "__version__", "build"]


def __getattr__(name: str) -> Any:
    if name in ("build", "BuiltJob"):
        from scriptbuilder import api

        return getattr(api, name)
    raise AttributeError(f"module 'scriptbuilder' has no attribute {name!r}")
