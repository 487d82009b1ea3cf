"""Procedure Step 3 per workflow: devices, nodes, tasks, MPI and the workflow object."""

from __future__ import annotations

import math
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from scriptbuilder.errors import BuildError
from scriptbuilder.job.plan import TaskShape
from scriptbuilder.resolution.context import Context
from scriptbuilder.resolution.mounts import Mounts
from scriptbuilder.resolution.mpi import RULES, step_mpi
from scriptbuilder.resolution.secrets import script_custom_env
from scriptbuilder.script.render import quote_literal
from scriptbuilder.workflows.base import Workflow

if TYPE_CHECKING:
    from scriptbuilder.inputs.command_args import FlagValue
    from scriptbuilder.inputs.tests import InspectResult

T = TypeVar("T")

MAX_DEVICES = 8
#: Letters, digits (``str.isalnum``), ``_``, ``.`` and ``-``.
_MODEL_NAME = re.compile(r"[\w.-]*")


@dataclass(frozen=True)
class Workload:
    workflow: Workflow
    model_name: str
    required_devices: int
    node_count: int
    shape: TaskShape
    #: The tests run only with exactly ``required_devices`` GPUs visible.
    exact_devices: bool = False
    #: Where ``required_devices`` came from (pytest: the deciding evidence).
    devices_source: str | None = None


@dataclass(frozen=True)
class Capacity:
    """GPUs per node of the target, and GPUs available (local_docker)."""

    gpus_per_node: int | None
    available: int | None
    mpi_plugin: str
    #: The scheduler gives each job only the GPUs it asks for (Slurm GPU GRES).
    allocates_gpus: bool = False


class EvalNeedsPerfSanity(Exception):
    """Eval's world size exceeds one node: take the perf-sanity path instead."""

    def __init__(self, world_size: int, gpus_per_node: int, model_name: str) -> None:
        super().__init__(f"eval world size {world_size} exceeds gpus_per_node {gpus_per_node}")
        self.world_size = world_size
        self.gpus_per_node = gpus_per_node
        self.model_name = model_name


def _workload_shape(ctx: Context, cap: Capacity, kind: str, nodes: int, ntasks: int) -> TaskShape:
    """The workload's tasks over ``nodes`` and its ``--mpi`` (none outside Slurm)."""
    mpi = step_mpi(kind, ntasks=ntasks, nodes=nodes, cluster=cap.mpi_plugin)
    if ctx.is_slurm:
        ctx.trace.chose("workload mpi", mpi, RULES[kind])
    return TaskShape(nodes, ntasks, ntasks // nodes, mpi if ctx.is_slurm else None)


def _require(value: str | None, name: str, workflow: str) -> str:
    if not value or not value.strip():
        raise BuildError(f"{name} is required for workflow_type {workflow}; pass {name}")
    return value


def _parsed(command: str, parse: Callable[[str], T]) -> T:
    """``parse(command)``, its errors as one-line :class:`BuildError` messages."""
    from scriptbuilder.inputs.command_args import CommandArgError

    try:
        return parse(command)
    except (CommandArgError, ValueError) as exc:
        raise BuildError(str(exc)) from None


def _model_name(ctx: Context, derived: str | None, rule: str) -> str:
    req = ctx.request
    if req.model_name:
        name = req.model_name
        ctx.trace.chose("model_name", name, "model_name input")
    elif derived:
        name = ctx.trace.chose("model_name", derived, rule)
    else:
        raise BuildError(
            f"model_name is required for workflow_type {req.workflow_type} (it names the job "
            "and the script); pass model_name"
        )
    if _MODEL_NAME.fullmatch(name) is None:
        raise BuildError(
            f"model_name {name!r} may hold only letters, digits, '.', '_' and '-' (it names "
            "files and the job); pass a simpler model_name"
        )
    return name


def _check_limit(devices: int, what: str) -> None:
    if devices > MAX_DEVICES:
        raise BuildError(
            f"required_devices = {devices} exceeds the maximum of {MAX_DEVICES} GPUs for {what}; "
            f"reduce required_devices to at most {MAX_DEVICES}"
        )


def _pytest_devices(ctx: Context, found: InspectResult) -> tuple[int, bool, str]:
    req, trace = ctx.request, ctx.trace
    if found.requirement is not None:
        need = found.requirement
        for devices, piece in need.evidence:
            trace.chose(
                "GPU evidence", devices, piece + (" (decides)" if piece == need.source else "")
            )
        devices = trace.chose("required_devices", need.devices, need.source)
        if need.exact:
            trace.chose("exact GPUs", devices, f"the test skips unless it sees exactly {devices}")
        return devices, need.exact, need.source
    if req.required_devices:
        given = trace.chose("required_devices", req.required_devices, "required_devices input")
        return given, False, "required_devices input"
    return trace.chose("required_devices", 1, "default"), False, "default"


def resolve_pytest(ctx: Context, cap: Capacity, mounts: Mounts) -> Workload:
    from scriptbuilder.inputs.tests import inspect_tests
    from scriptbuilder.workflows.pytest_workflow import PytestWorkflow

    req, trace = ctx.request, ctx.trace
    test_cmd = _require(req.test_cmd, "test_cmd", "pytest")
    found = inspect_tests(test_cmd, req.repo_root, mounts.project)
    for warning in found.warnings:
        trace.warn(warning)
    for missing in found.missing:
        if not req.allow_missing_tests:
            raise BuildError(
                f"test_cmd: {missing}, so pytest would exit with 'file or directory not found' "
                "after the queue wait; fix the test id (or pass allow_missing_tests: true)"
            )
        trace.warn(f"{missing} (allow_missing_tests)")
    workdir = None
    if found.workdir is not None:
        workdir = trace.chose(
            "test_workdir",
            posixpath.join(mounts.project, found.workdir),
            found.workdir_reason,
        )
    devices, exact, source = _pytest_devices(ctx, found)
    limit = cap.gpus_per_node if ctx.is_slurm else cap.available
    if limit is not None and devices > limit:
        where = f"partition {req.partition}" if ctx.is_slurm else "this machine"
        raise BuildError(
            f"required_devices = {devices} exceeds the {limit} GPUs per node of {where}, and "
            "pytest does not support multi-node execution; choose a partition with more GPUs "
            "per node or a test that needs fewer"
        )
    _check_limit(devices, "pytest")
    if req.node_count is not None and req.node_count > 1:
        raise BuildError(
            f"node_count = {req.node_count}, but pytest is always single-node; pass node_count 1"
        )
    visible = None
    if exact and not cap.allocates_gpus:
        visible = trace.chose(
            "visible GPUs",
            ",".join(str(i) for i in range(devices)),
            f"exactly {devices} GPUs, and the scheduler does not hand them out: "
            "the test step sees only these",
        )
    name = _model_name(ctx, None, "")
    trace.chose("nodes/ntasks", "1/1", "pytest: single node, one task")
    shape = _workload_shape(ctx, cap, "pytest", 1, 1)
    workflow = PytestWorkflow(test_cmd, workdir=workdir, visible_devices=visible)
    return Workload(workflow, name, devices, 1, shape, exact, source)


def _gpus_per_node(ctx: Context, cap: Capacity, override: int | None, flag: str) -> int:
    if override is not None:
        return ctx.trace.chose("gpus_per_node", override, f"{flag} in the command")
    if cap.gpus_per_node is None:
        where = (
            f"slurm_env partition {ctx.request.partition} has no gpus_per_node"
            if ctx.is_slurm
            else "env_check.gpus_per_node is not set"
        )
        raise BuildError(
            f"gpus_per_node is unknown ({where}); pass env_check.gpus_per_node "
            "or fix the Slurm probe output"
        )
    return cap.gpus_per_node


def _rewrite_model(ctx: Context, cmd: str, model: FlagValue, mounts: Mounts) -> str:
    """Point a Hugging Face id at its folder under the models mount, when found."""
    from scriptbuilder.inputs.command_args import replace_flag_value
    from scriptbuilder.inputs.model_lookup import find_model_dir

    value = model.value
    name = value.rstrip("/").rsplit("/", 1)[-1]
    host = mounts.models_host
    found = find_model_dir(Path(host), name) if host and Path(host).is_dir() else None
    if found is None:
        ctx.trace.warn(
            f"model {value!r} was not found under the models mount "
            f"({host or 'host folder unknown'}, depth 3); trtllm-eval will try to download it "
            "from Hugging Face"
        )
        return cmd
    rel = found.relative_to(host).as_posix()  # type: ignore[arg-type]
    target = posixpath.join(mounts.models_root, rel)
    ctx.trace.chose("--model", target, f"Hugging Face id {value} found at {found}")
    return replace_flag_value(cmd, model, quote_literal(target))


def resolve_eval(ctx: Context, cap: Capacity, mounts: Mounts) -> Workload:
    from scriptbuilder.inputs.command_args import is_hf_model_id, model_name_from, parse_eval_cmd
    from scriptbuilder.workflows.eval import EvalWorkflow

    req, trace = ctx.request, ctx.trace
    cmd = _require(req.eval_cmd, "eval_cmd", "eval")
    args = _parsed(cmd, parse_eval_cmd)
    world = trace.chose(
        "required_devices",
        args.tp_size * args.pp_size,
        f"--tp_size {args.tp_size} x --pp_size {args.pp_size}",
    )
    model = args.model
    derived = model_name_from(model.value) if model else None
    name = _model_name(ctx, derived, "last component of --model")
    gpn = _gpus_per_node(ctx, cap, args.gpus_per_node, "--gpus_per_node")
    if world > gpn:
        raise EvalNeedsPerfSanity(world, gpn, name)
    if model and model.literal and is_hf_model_id(model.value):
        cmd = _rewrite_model(ctx, cmd, model, mounts)
    shape = _workload_shape(ctx, cap, "eval", 1, world)
    return Workload(EvalWorkflow(cmd), name, world, 1, shape)


def resolve_bench(ctx: Context, cap: Capacity) -> Workload:
    from scriptbuilder.inputs.command_args import model_name_from, parse_bench_cmd
    from scriptbuilder.workflows.bench import BenchWorkflow

    req, trace = ctx.request, ctx.trace
    cmd = _require(req.bench_cmd, "bench_cmd", "bench")
    args = _parsed(cmd, parse_bench_cmd)
    world = trace.chose("required_devices", args.tp * args.pp, f"--tp {args.tp} x --pp {args.pp}")
    source = args.model or args.model_path
    derived = model_name_from(source.value) if source else None
    name = _model_name(ctx, derived, "--model/--model_path of trtllm-bench")
    gpn = _gpus_per_node(ctx, cap, None, "")
    if world > gpn:
        raise BuildError(
            f"bench world size {world} (tp {args.tp} x pp {args.pp}) exceeds gpus_per_node "
            f"{gpn}: multi-node trtllm-bench is not supported; lower --tp/--pp"
        )
    shape = _workload_shape(ctx, cap, "bench", 1, world)
    return Workload(BenchWorkflow(args.prep_cmd, args.run_cmd), name, world, 1, shape)


def resolve_custom(ctx: Context, cap: Capacity, mounts: Mounts, run_script: str | None) -> Workload:
    from scriptbuilder.workflows.custom import CustomWorkflow

    req, trace = ctx.request, ctx.trace
    if req.custom_script:
        command = trace.chose(
            "custom command", f"bash {quote_literal(req.custom_script)}", "bash <custom_script>"
        )
    else:
        command = _require(req.custom_cmd, "custom_cmd (or custom_script)", "custom")
    devices = trace.chose(
        "required_devices",
        req.required_devices or 1,
        "required_devices input" if req.required_devices else "default",
    )
    _check_limit(devices, "custom commands")
    gpn = _gpus_per_node(ctx, cap, None, "")
    nodes = trace.chose(
        "node_count", math.ceil(devices / gpn), f"ceil({devices} / gpus_per_node {gpn})"
    )
    if nodes > 1:
        raise BuildError(
            f"required_devices = {devices} requires {nodes} nodes (gpus_per_node = {gpn}), but "
            f"custom commands are limited to 1 node; reduce required_devices to at most {gpn}"
        )
    name = _model_name(ctx, None, "")
    workflow = CustomWorkflow(
        command,
        custom_env=script_custom_env(req)[0],
        custom_workdir=mounts.project,
        project_path=mounts.project,
        run_script=run_script,
    )
    return Workload(
        workflow, name, devices, nodes, _workload_shape(ctx, cap, "custom", nodes, devices)
    )
