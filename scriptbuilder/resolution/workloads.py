"""Procedure Step 3, the parts every workflow shares: where the workload runs,
its model name, its GPU limits and its task layout."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from scriptbuilder.errors import BuildError
from scriptbuilder.inputs.command_args import CommandArgError
from scriptbuilder.inputs.command_check import short
from scriptbuilder.resolution.context import Context
from scriptbuilder.resolution.mounts import Mounts
from scriptbuilder.resolution.mpi import RULES, step_mpi
from scriptbuilder.resolution.slurm_params import SlurmTarget
from scriptbuilder.script.plan import TaskShape

T = TypeVar("T")

MAX_DEVICES = 8
MAX_MODEL_NAME_BYTES = 200  # with "_auto_test.slurm", within a file name's 255
#: Letters, digits, ``_``, ``.`` and ``-``; a letter or digit first (as docker names containers).
_MODEL_NAME = re.compile(r"[^\W_][\w.-]*")


@dataclass(frozen=True)
class Placement:
    """What a workflow resolves against: the image, the mounts, and the GPUs of the Slurm partition
    ``target`` or, under Docker (``target`` None), of this machine (``available``: GPUs visible)."""

    image: str
    mounts: Mounts
    target: SlurmTarget | None
    gpus_per_node: int | None
    available: int | None
    mpi_plugin: str
    #: The scheduler gives each job only the GPUs it asks for (Slurm GPU GRES).
    allocates_gpus: bool = False

    @classmethod
    def of(cls, ctx: Context, image: str, mounts: Mounts, target: SlurmTarget | None) -> Placement:
        if target is None:
            check = ctx.request.env_check
            return cls(image, mounts, None, check.gpus_per_node, check.available_gpus, "pmix")
        gpn, plugin = target.gpus_per_node, target.mpi_plugin
        return cls(image, mounts, target, gpn, None, plugin, target.gpu_gres)


def workload_shape(ctx: Context, place: Placement, kind: str, nodes: int, ntasks: int) -> TaskShape:
    """The workload's tasks over ``nodes`` and its ``--mpi`` (none outside Slurm)."""
    mpi = step_mpi(kind, ntasks=ntasks, nodes=nodes, cluster=place.mpi_plugin)
    if ctx.is_slurm:
        ctx.trace.chose("workload mpi", mpi, RULES[kind])
    return TaskShape(nodes, ntasks, ntasks // nodes, mpi if ctx.is_slurm else None)


def require(value: str | None, name: str, workflow: str) -> str:
    if not value or not value.strip():
        raise BuildError(f"{name} is required for workflow_type {workflow}; pass {name}")
    return value


def parsed(command: str, parse: Callable[[str], T]) -> T:
    """``parse(command)``, its errors as one-line :class:`BuildError` messages."""
    try:
        return parse(command)
    except (CommandArgError, ValueError) as exc:
        raise BuildError(str(exc)) from None


def model_name(ctx: Context, derived: str | None, rule: str) -> str:
    req = ctx.request
    name = req.model_name or derived
    if not name:
        raise BuildError(
            f"model_name is required for workflow_type {req.workflow_type} (it names the job "
            "and the script); pass model_name"
        )
    ctx.trace.chose("model_name", name, "model_name input" if req.model_name else rule)
    if _MODEL_NAME.fullmatch(name) is None or len(name.encode()) > MAX_MODEL_NAME_BYTES:
        raise BuildError(
            f"model_name {short(name)} must start with a letter or digit, then hold only letters,"
            f" digits, '.', '_' and '-', at most {MAX_MODEL_NAME_BYTES} bytes (it names files, "
            "the job and the container); pass a simpler model_name"
        )
    return name


def check_limit(devices: int, what: str) -> None:
    if devices > MAX_DEVICES:
        raise BuildError(
            f"required_devices = {devices} exceeds the maximum of {MAX_DEVICES} GPUs for {what}; "
            f"reduce required_devices to at most {MAX_DEVICES}"
        )


def gpus_per_node(
    ctx: Context, place: Placement, override: int | None = None, flag: str = ""
) -> int:
    if override is not None:
        return ctx.trace.chose("gpus_per_node", override, f"{flag} in the command")
    if place.gpus_per_node is None:
        fix = "env_check.gpus_per_node is not set; pass it"
        if ctx.is_slurm:  # the partition's own count or gres, as the probe records them
            fix = f"slurm_env partition {ctx.request.partition} has no gpus_per_node or gres; "
            fix += "rerun the Slurm probe or set the partition's gpus_per_node in slurm_env.json"
        raise BuildError(f"gpus_per_node is unknown: {fix}")
    return place.gpus_per_node
