"""slurm_env.json: what the orchestrator's one-pass probe found on the cluster.

Loaded into a :class:`~scriptbuilder.schema_check.Record` checked against the
``SlurmEnv`` schema (unknown keys kept); the raw object is embedded verbatim in
job_spec.json.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from scriptbuilder.errors import BuildError

if TYPE_CHECKING:
    from scriptbuilder.models import Partition, SlurmEnv

CLIENT_TOOLS_MISSING = "SLURM client tools not found"
_WHY = (
    "trtllm-case-executor did not run Step 2.5 (the Slurm probe) before invoking "
    "the script builder; run it, or pass slurm_env_file"
)


def find_partition(env: SlurmEnv, name: str) -> Partition | None:
    return next((p for p in env.partitions if p.name == name), None)


def client_tools_missing(env: SlurmEnv) -> bool:
    return any(CLIENT_TOOLS_MISSING.lower() in e.lower() for e in env.errors)


def uses_gpu_gres(part: Partition) -> bool:
    """``gres`` starts with ``gpu:`` (``gpu:8``, ``gpu:4(IDX:0-3)``, ``gpu:a100:8``)."""
    return bool(part.gres and part.gres.startswith("gpu:"))


def gres_gpus(part: Partition) -> int | None:
    """The GPU count written in ``gres``: the last ``:``-field before any ``(``."""
    if not uses_gpu_gres(part):
        return None
    count = (part.gres or "").split("(", 1)[0].rsplit(":", 1)[-1]
    return int(count) if count.isdecimal() else None


def load_slurm_env(path: str | Path) -> tuple[SlurmEnv, dict[str, Any]]:
    """The checked environment and the raw JSON object, or a BuildError saying why not."""
    from scriptbuilder.inputs.file_cache import load

    return load(path, _load)


def _load(name: str) -> tuple[SlurmEnv, dict[str, Any]]:
    path = Path(name)
    from scriptbuilder.schema_check import SchemaError, validate
    from scriptbuilder.schemas import schema

    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BuildError(f"slurm_env_file {path} is missing: {_WHY}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BuildError(f"slurm_env_file {path} is unreadable ({exc}): {_WHY}") from None
    except json.JSONDecodeError as exc:
        raise BuildError(f"slurm_env_file {path} is not valid JSON ({exc}): {_WHY}") from None
    if not isinstance(raw, dict):
        raise BuildError(f"slurm_env_file {path} must hold a JSON object: {_WHY}")
    try:
        env = validate(raw, schema("slurm-env"))
    except SchemaError as exc:
        raise BuildError(f"slurm_env_file {path}: {exc}; fix the probe output") from None
    return cast("SlurmEnv", env), raw
