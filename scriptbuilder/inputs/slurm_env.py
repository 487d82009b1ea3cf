"""slurm_env.json, the orchestrator's probe of the cluster, read with the
:class:`~scriptbuilder.models.SlurmEnv` model; the raw object goes into job_spec.json.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scriptbuilder.errors import BuildError
from scriptbuilder.inputs.request_file import read_json_object
from scriptbuilder.models import Partition, SlurmEnv
from scriptbuilder.models.messages import validated

CLIENT_TOOLS_MISSING = "SLURM client tools not found"
_WHY = (
    "trtllm-case-executor did not run Step 2.5 (the Slurm probe) before invoking "
    "the script builder; run it, or pass slurm_env_file"
)
#: Largest slurm_env.json read (a probe of thousands of partitions is far below).
MAX_SLURM_ENV_BYTES = 16 * 1024 * 1024


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
    name = str(path)
    label = f"slurm_env_file {name}"
    if not Path(name).exists():
        raise BuildError(f"{label} is missing: {_WHY}")
    raw = read_json_object(name, label, _WHY, MAX_SLURM_ENV_BYTES)
    env = validated(SlurmEnv, raw, f"{label}: field", "fix the probe output")
    return env, raw
