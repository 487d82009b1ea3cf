"""slurm_env.json, the orchestrator's probe of the cluster, read with the
:class:`~scriptbuilder.models.slurm_env.SlurmEnv` model; the raw object goes into job_spec.json.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scriptbuilder.errors import BuildError
from scriptbuilder.inputs.request_file import read_json_object
from scriptbuilder.models.messages import validated
from scriptbuilder.models.slurm_env import SlurmEnv

_WHY = (
    "trtllm-case-executor did not run Step 2.5 (the Slurm probe) before invoking "
    "the script builder; run it, or pass slurm_env_file"
)
#: Largest slurm_env.json read (a probe of thousands of partitions is far below).
MAX_SLURM_ENV_BYTES = 16 * 1024 * 1024


def load_slurm_env(path: str | Path) -> tuple[SlurmEnv, dict[str, Any]]:
    """The checked environment and the raw JSON object, or a BuildError saying why not."""
    name = str(path)
    label = f"slurm_env_file {name}"
    if not Path(name).exists():
        raise BuildError(f"{label} is missing: {_WHY}")
    raw = read_json_object(name, label, _WHY, MAX_SLURM_ENV_BYTES)
    env = validated(SlurmEnv, raw, f"{label}: field", "fix the probe output")
    return env, raw
