"""slurm_env.json: what the orchestrator's one-pass probe found on the cluster."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from scriptbuilder.errors import BuildError

CLIENT_TOOLS_MISSING = "SLURM client tools not found"


class Partition(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: str
    state: str | None = None
    time_limit: str | None = None
    nodes: str | int | None = None
    arch: str | None = None
    gres: str | None = None
    gpus_per_node: int | None = None
    requires_gres: bool = False

    def gres_gpus(self) -> int | None:
        """The GPU count written in ``gres`` (``gpu:8``, ``gpu:a100:8(S:0-1)``)."""
        if not self.uses_gpu_gres():
            return None
        match = re.match(r"gpu(?::[^:(]+)*?:(\d+)", self.gres or "")
        return int(match.group(1)) if match else None

    def uses_gpu_gres(self) -> bool:
        return bool(self.gres and self.gres.startswith("gpu:"))


class Pmix(BaseModel):
    model_config = ConfigDict(extra="allow")

    available: list[str] = []
    preferred: str | None = None


class SlurmEnv(BaseModel):
    """The probe's output. Unknown keys are kept; ``raw`` is embedded verbatim in job_spec."""

    model_config = ConfigDict(extra="allow")

    user: str | None = None
    default_account: str | None = None
    accounts: list[str] = []
    default_partition: str | None = None
    partitions: list[Partition] = []
    pmix: Pmix = Pmix()
    errors: list[str] = []
    cluster_name: str | None = None
    mounts: list[str] = []
    ssh_host: str | None = None
    slurm_user: str | None = None
    remote_cwd: str | None = None

    def partition(self, name: str) -> Partition | None:
        return next((p for p in self.partitions if p.name == name), None)

    def client_tools_missing(self) -> bool:
        return any(CLIENT_TOOLS_MISSING.lower() in e.lower() for e in self.errors)


def load_slurm_env(path: Path) -> tuple[SlurmEnv, dict[str, Any]]:
    """The parsed model and the raw JSON object, or a BuildError saying why not."""
    why = (
        "trtllm-case-executor did not run Step 2.5 (the Slurm probe) before invoking "
        "the script builder; run it, or pass slurm_env_file"
    )
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BuildError(f"slurm_env_file {path} is missing: {why}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BuildError(f"slurm_env_file {path} is unreadable ({exc}): {why}") from None
    except json.JSONDecodeError as exc:
        raise BuildError(f"slurm_env_file {path} is not valid JSON ({exc}): {why}") from None
    if not isinstance(raw, dict):
        raise BuildError(f"slurm_env_file {path} must hold a JSON object: {why}")
    try:
        return SlurmEnv.model_validate(raw), raw
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise BuildError(
            f"slurm_env_file {path}: {where}: {first['msg']}; fix the probe output"
        ) from None
