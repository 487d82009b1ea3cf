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
from scriptbuilder.resolution.mpi import MpiRule
from scriptbuilder.resolution.slurm_params import SlurmTarget
from scriptbuilder.script.plan import TaskShape

T = TypeVar("T")

MAX_DEVICES = 8
MAX_MODEL_NAME_BYTES = 200  # with "_auto_test.slurm", within a file name's 255
#: Letters, digits, ``_``, ``.`` and ``-``; a letter or digit first (as docker names containers).
_MODEL_NAME = re.compile(r"[^\W_][\w.-]*")


@dataclass(frozen=True)
class Placement:
    """What a workflow resolves against, as the scenario (:mod:`scriptbuilder.scenarios`)
    places it: the image, the mounts, the Slurm partition ``target`` (None where no
    Slurm runs the job) and the GPUs there."""

    image: str
    mounts: Mounts
    target: SlurmTarget | None
    gpus_per_node: int | None
    #: The GPUs a single-node workload can have, and where that is (for messages).
    node_gpus: int | None
    where: str
    #: What to do when ``gpus_per_node`` is None.
    gpus_per_node_fix: str
    #: The plugin the workflow's MPI rule picks from; None: no MPI launcher runs the steps.
    mpi_plugin: str | None
    #: The job's work folder on the host it runs on (its logs, submit.py's work dir).
    job_dir: str
    #: Where the job's extra files are copied before it starts; None: none are copied,
    #: so the script carries what it needs.
    files_dir: str | None = None
    #: The scheduler gives each job only the GPUs it asks for (Slurm GPU GRES).
    allocates_gpus: bool = False


def workload_shape(
    ctx: Context, place: Placement, rule: MpiRule, nodes: int, ntasks: int
) -> TaskShape:
    """The workload's tasks over ``nodes`` and its ``--mpi`` (by the workflow's ``rule``)."""
    if place.mpi_plugin is None:
        return TaskShape(nodes, ntasks, ntasks // nodes)
    mpi = rule.plugin(ntasks=ntasks, cluster=place.mpi_plugin)
    return TaskShape(nodes, ntasks, ntasks // nodes, ctx.trace.chose("workload mpi", mpi, rule.why))


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
        raise BuildError(f"gpus_per_node is unknown: {place.gpus_per_node_fix}")
    return place.gpus_per_node
