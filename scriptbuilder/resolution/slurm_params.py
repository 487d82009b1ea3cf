"""Common Slurm parameters of procedure Step 3: partition, account, time, GRES, MPI plugin."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scriptbuilder.errors import BuildError
from scriptbuilder.inputs.slurm_time import checked_minutes, time_limit_minutes
from scriptbuilder.resolution.context import Context
from scriptbuilder.resolution.mpi import BARE_PMIX

if TYPE_CHECKING:
    from scriptbuilder.models.slurm_env import Partition

DEFAULT_TIME_LIMIT = "02:00:00"
STEP_25 = "trtllm-case-executor did not run Step 2.5 before invoking the script builder"


@dataclass(frozen=True)
class SlurmTarget:
    partition: str
    account: str
    time_limit: str
    #: GPUs per node of the partition, when known.
    gpus_per_node: int | None
    #: The partition schedules GPUs as GRES (``gres`` starts with ``gpu:``).
    gpu_gres: bool
    #: ``pmix.preferred``, or bare ``pmix`` when unset or the fallback path was taken.
    mpi_plugin: str


def _partition_entry(ctx: Context, name: str, account: str) -> Partition | None:
    """The partition's slurm_env entry (None: not known); partition and account
    must be ones slurm_env lists, and the partition up (or of unknown state)."""
    env = ctx.slurm_env
    if env is None:
        return None
    entry = env.partition(name) if env.partitions else None
    if env.partitions and entry is None:
        known = ", ".join(p.name for p in env.partitions)
        raise BuildError(
            f"partition {name!r} is not in slurm_env.partitions (known: {known}); pass one of those"
        )
    if env.accounts and account not in env.accounts:
        known = ", ".join(env.accounts)
        raise BuildError(
            f"account {account!r} is not in slurm_env.accounts (known: {known}); pass one of those"
        )
    # sinfo may mark it ``up*``; anything but up pends forever
    if entry and entry.state is not None and entry.state.strip().rstrip("*").lower() != "up":
        raise BuildError(
            f"partition {entry.name!r} is {entry.state!r} in slurm_env.partitions, not up, so "
            "the job would stay pending; pass a partition that is up"
        )
    return entry


def resolve_slurm_target(ctx: Context, scenario: str) -> SlurmTarget:
    """The partition and its limits for the Slurm ``scenario`` (named in messages)."""
    req, trace, env = ctx.request, ctx.trace, ctx.slurm_env
    for name, value in (("partition", req.partition), ("account", req.account)):
        if not value:
            raise BuildError(f"{name} is required for {scenario}: {STEP_25}; pass {name}")
        trace.chose(name, value, f"{name} input")
    assert req.partition and req.account
    rule = "time_limit input" if req.time_limit else "default"
    time_limit = trace.chose("time_limit", req.time_limit or DEFAULT_TIME_LIMIT, rule)
    entry = _partition_entry(ctx, req.partition, req.account)
    field = "time_limit" if req.time_limit else "time_limit (default)"
    wanted, cap = checked_minutes(field, time_limit), None
    if entry is not None and entry.time_limit is not None:
        with contextlib.suppress(ValueError):  # a partition limit in no known form
            cap = time_limit_minutes(entry.time_limit)
    if entry is not None and cap is not None and (wanted is None or wanted > cap):
        raise BuildError(
            f"{field} {time_limit} exceeds the time limit {entry.time_limit} of partition "
            f"{entry.name!r} (slurm_env.partitions), so Slurm would refuse it or leave it "
            f"pending; pass time_limit at most {entry.time_limit}"
        )
    gpn = entry.gpus_per_node if entry else None
    if entry and gpn is None and entry.gres_gpus:
        gpn = trace.chose("gpus_per_node", entry.gres_gpus, f"gres {entry.gres} of {entry.name}")
    elif gpn is not None:
        trace.chose("gpus_per_node", gpn, f"slurm_env partition {req.partition}")
    # pmix.preferred is not used on the fallback path (no probe, no client tools,
    # partition or its arch unknown)
    preferred = None
    if env is not None and not env.client_tools_missing and entry and entry.arch:
        preferred = env.pmix.preferred
    rule = "slurm_env pmix.preferred" if preferred else "bare pmix (pmix.preferred unset)"
    plugin = trace.chose("mpi_plugin", preferred or BARE_PMIX, rule)
    gpu_gres = bool(entry and entry.gpu_gres)
    return SlurmTarget(req.partition, req.account, time_limit, gpn, gpu_gres, plugin)


def gres_flag(
    ctx: Context, target: SlurmTarget, exact: int | None = None, share: int | None = None
) -> str | None:
    """``gpu:<exact>`` when the workload needs exactly that many GPUs (or asks for just
    the ``share`` it needs, ``share_node``), else ``gpu:<gpus_per_node>``, when the
    partition uses GPU GRES; else None (no line)."""
    if target.gpu_gres and exact:
        return ctx.trace.chose(
            "gres", f"gpu:{exact}", f"the tests need exactly {exact} GPUs (partition GPU GRES)"
        )
    if target.gpu_gres and share:
        return ctx.trace.chose(
            "gres", f"gpu:{share}", "share_node: the GPUs the tests need (partition GPU GRES)"
        )
    if target.gpu_gres and target.gpus_per_node:
        return ctx.trace.chose(
            "gres", f"gpu:{target.gpus_per_node}", "partition gres starts with gpu:"
        )
    ctx.trace.chose("gres", None, "partition gres is (null) or unknown: no --gres line")
    return None
