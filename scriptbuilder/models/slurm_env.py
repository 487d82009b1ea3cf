"""slurm_env.json, the probe's output: every field but a partition's ``name`` may be null
("not known"); unknown keys are kept.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

T = TypeVar("T")
#: The probe's error when sinfo/squeue are not installed (its other fields are then unknown).
CLIENT_TOOLS_MISSING = "SLURM client tools not found"


def _null_is_empty(value: Any) -> Any:
    return [] if value is None else value


#: A list that may be written as null ("not known"), read as empty.
NullableList = Annotated[
    list[T], BeforeValidator(_null_is_empty, json_schema_input_type=list[T] | None)
]


class Partition(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True, frozen=True)

    name: str
    state: str | None = None
    time_limit: str | None = None
    nodes: str | int | None = None
    arch: str | None = None
    gres: str | None = None
    gpus_per_node: int | None = None
    requires_gres: bool | None = Field(False, description="null: not known (read as false).")

    @property
    def gpu_gres(self) -> bool:
        """``gres`` starts with ``gpu:`` (``gpu:8``, ``gpu:4(IDX:0-3)``, ``gpu:a100:8``)."""
        return bool(self.gres and self.gres.startswith("gpu:"))

    @property
    def gres_gpus(self) -> int | None:
        """The GPU count written in ``gres``: the last ``:``-field before any ``(``."""
        if not self.gpu_gres:
            return None
        count = (self.gres or "").split("(", 1)[0].rsplit(":", 1)[-1]
        return int(count) if count.isdecimal() else None


class Pmix(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True, frozen=True)

    available: NullableList[str] = []
    preferred: str | None = None


class SlurmEnv(BaseModel):
    """The probe's output. Unknown keys are kept (the raw object is embedded in job_spec)."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True)

    user: str | None = None
    default_account: str | None = None
    accounts: NullableList[str] = []
    default_partition: str | None = None
    partitions: NullableList[Partition] = []
    pmix: Annotated[
        Pmix, BeforeValidator(lambda v: {} if v is None else v, json_schema_input_type=Pmix | None)
    ] = Pmix()
    errors: NullableList[str] = []
    cluster_name: str | None = None
    mounts: NullableList[str] = Field(
        [], description="Container mounts configured for the cluster; null: none configured."
    )
    ssh_host: str | None = None
    slurm_user: str | None = None
    remote_cwd: str | None = None
    mfa_style: bool | None = None

    def partition(self, name: str) -> Partition | None:
        return next((p for p in self.partitions if p.name == name), None)

    @property
    def client_tools_missing(self) -> bool:
        return any(CLIENT_TOOLS_MISSING.lower() in e.lower() for e in self.errors)
