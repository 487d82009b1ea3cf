"""Common Slurm parameters of procedure Step 3: partition, account, time, GRES, MPI plugin."""

from __future__ import annotations

from dataclasses import dataclass

from scriptbuilder.errors import BuildError
from scriptbuilder.inputs.slurm_env import find_partition, gres_gpus, uses_gpu_gres
from scriptbuilder.inputs.slurm_time import checked_minutes, time_limit_minutes
from scriptbuilder.models import Partition
from scriptbuilder.resolution.context import Context
from scriptbuilder.resolution.mpi import BARE_PMIX, preferred_plugin

DEFAULT_TIME_LIMIT = "02:00:00"
STEP_25 = "trtllm-case-executor did not run Step 2.5 before invoking the script builder"


@dataclass(frozen=True)
class SlurmTarget:
    partition: str
    account: str
    time_limit: str
    #: GPUs per node of the partition, when known.
    gpus_per_node: int | None
    #: True when the partition schedules GPUs as GRES (``gres`` starts with ``gpu:``).
    gpu_gres: bool
    #: ``pmix.preferred``, or bare ``pmix`` when unset or the fallback path was taken.
    mpi_plugin: str


def _partition_entry(ctx: Context, name: str) -> Partition | None:
    env = ctx.slurm_env
    if env is None or not env.partitions:
        return None
    entry = find_partition(env, name)
    if entry is None:
        known = ", ".join(p.name for p in env.partitions)
        raise BuildError(
            f"partition {name!r} is not in slurm_env.partitions (known: {known}); pass one of those"
        )
    return entry


def _check_account(ctx: Context, account: str) -> None:
    env = ctx.slurm_env
    if env is not None and env.accounts and account not in env.accounts:
        known = ", ".join(env.accounts)
        raise BuildError(
            f"account {account!r} is not in slurm_env.accounts (known: {known}); pass one of those"
        )


def _check_state(entry: Partition) -> None:
    """``up`` (sinfo may mark it ``up*``) or null (not known); anything else pends forever."""
    state = entry.state
    if state is not None and state.strip().rstrip("*").lower() != "up":
        raise BuildError(
            f"partition {entry.name!r} is {state!r} in slurm_env.partitions, not up, so the "
            "job would stay pending; pass a partition that is up"
        )


def _check_time_limit(value: str, given: bool, entry: Partition | None) -> None:
    field = "time_limit" if given else "time_limit (default)"
    wanted = checked_minutes(field, value)
    if entry is None or entry.time_limit is None:
        return
    try:
        cap = time_limit_minutes(entry.time_limit)
    except ValueError:
        return  # a partition limit the probe wrote in no known form: not known
    if cap is None:
        return
    if wanted is None or wanted > cap:
        raise BuildError(
            f"{field} {value} exceeds the time limit {entry.time_limit} of partition "
            f"{entry.name!r} (slurm_env.partitions), so Slurm would refuse it or leave it "
            f"pending; pass time_limit at most {entry.time_limit}"
        )


def resolve_slurm_target(ctx: Context) -> SlurmTarget:
    req, trace = ctx.request, ctx.trace
    if not req.partition:
        raise BuildError(
            f"partition is required for {req.execution_scenario}: {STEP_25}; pass partition"
        )
    if not req.account:
        raise BuildError(
            f"account is required for {req.execution_scenario}: {STEP_25}; pass account"
        )
    trace.chose("partition", req.partition, "partition input")
    trace.chose("account", req.account, "account input")
    time_limit = trace.chose(
        "time_limit",
        req.time_limit or DEFAULT_TIME_LIMIT,
        "time_limit input" if req.time_limit else "default",
    )
    entry = _partition_entry(ctx, req.partition)
    _check_account(ctx, req.account)
    if entry is not None:
        _check_state(entry)
    _check_time_limit(time_limit, bool(req.time_limit), entry)
    gpn = entry.gpus_per_node if entry else None
    if entry and gpn is None and gres_gpus(entry):
        gpn = trace.chose("gpus_per_node", gres_gpus(entry), f"gres {entry.gres} of {entry.name}")
    elif gpn is not None:
        trace.chose("gpus_per_node", gpn, f"slurm_env partition {req.partition}")
    preferred = preferred_plugin(ctx.slurm_env, entry)
    plugin = trace.chose(
        "mpi_plugin",
        preferred or BARE_PMIX,
        "slurm_env pmix.preferred" if preferred else "bare pmix (pmix.preferred unset)",
    )
    return SlurmTarget(
        partition=req.partition,
        account=req.account,
        time_limit=time_limit,
        gpus_per_node=gpn,
        gpu_gres=bool(entry and uses_gpu_gres(entry)),
        mpi_plugin=plugin,
    )


def gres_flag(ctx: Context, target: SlurmTarget, exact: int | None = None) -> str | None:
    """``gpu:<gpus_per_node>`` when the partition uses GPU GRES, else None (no line);
    ``gpu:<exact>`` when the workload needs exactly that many GPUs."""
    if target.gpu_gres and exact:
        return ctx.trace.chose(
            "gres", f"gpu:{exact}", f"the tests need exactly {exact} GPUs (partition GPU GRES)"
        )
    if target.gpu_gres and target.gpus_per_node:
        return ctx.trace.chose(
            "gres", f"gpu:{target.gpus_per_node}", "partition gres starts with gpu:"
        )
    ctx.trace.chose("gres", None, "partition gres is (null) or unknown: no --gres line")
    return None
