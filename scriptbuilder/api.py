"""The Python API: ``build(request) -> BuiltJob``, pure until ``BuiltJob.write()``.

Resolution follows the procedure in order: the Slurm environment, Step 1
(image), Step 2 (mounts), Step 3 (parallelism and Slurm parameters); then
:mod:`scriptbuilder.job.assembly` renders the script tree, ``job_spec.json``
(Step 5) and the report (Step 6).
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from scriptbuilder.errors import BuildError
from scriptbuilder.inputs.command_check import check_counts, check_request
from scriptbuilder.inputs.earlier_job_spec import JOB_SPEC, read_earlier_job_spec
from scriptbuilder.inputs.remote_home import Runner
from scriptbuilder.inputs.slurm_env import load_slurm_env
from scriptbuilder.job.assembly import docker_job, perf_job, slurm_job
from scriptbuilder.models import BuildRequest
from scriptbuilder.models.messages import validated
from scriptbuilder.outputs.built_job import BuiltJob, OutputFile, SubmitRun
from scriptbuilder.resolution.context import Context, EnvInfo
from scriptbuilder.resolution.image import resolve_image
from scriptbuilder.resolution.mounts import Mounts, covered, resolve_mounts
from scriptbuilder.resolution.perf import SubmitPlan, resolve_perf, topology_of, wants_perf_path
from scriptbuilder.resolution.slurm_params import SlurmTarget, gres_flag, resolve_slurm_target
from scriptbuilder.resolution.workloads import (
    Capacity,
    EvalNeedsPerfSanity,
    Workload,
    resolve_bench,
    resolve_custom,
    resolve_eval,
    resolve_pytest,
)
from scriptbuilder.scenarios.slurm import check_log_name_part
from scriptbuilder.workflows.custom import RUN_SCRIPT_NAME

__all__ = [
    "BuildResult",
    "BuiltJob",
    "OutputFile",
    "SubmitRun",
    "build",
    "build_many",
    "load_request",
]


def load_request(data: Mapping[str, Any] | BuildRequest) -> BuildRequest:
    """``data`` checked by the request model; problems become one-line
    :class:`BuildError` messages naming the field."""
    if type(data) is not dict:  # the model reads a plain dict (and never changes it)
        if isinstance(data, BuildRequest):
            return data
        if not isinstance(data, Mapping):
            raise BuildError(
                f"a request must be a mapping of field names to values, got {type(data).__name__}"
            )
        data = dict(data)
    return validated(BuildRequest, data, "request field", "fix its value")


def _load_env(ctx: Context) -> None:
    req = ctx.request
    if not ctx.is_slurm:
        return
    path = req.slurm_env_file or posixpath.join(req.work_dir, "slurm_env.json")
    ctx.slurm_env, ctx.slurm_env_raw = load_slurm_env(path)
    ctx.trace.chose(
        "slurm_env",
        path,
        "slurm_env_file" if req.slurm_env_file else "<work_dir>/slurm_env.json",
    )


def _check_work_dir(req: BuildRequest) -> None:
    if not req.work_dir.startswith("/"):
        raise BuildError(
            f"work_dir must be an absolute path, got {req.work_dir!r}; pass an absolute path"
        )


def _read_earlier_job_spec(ctx: Context) -> None:
    """An existing <work_dir>/job_spec.json is an input: remote paths come from it
    when the request has none (the request wins), and its other keys are kept."""
    found = read_earlier_job_spec(ctx.request.work_dir)
    if found is None:
        return
    earlier, ctx.earlier_job_spec = found
    if not ctx.is_remote:
        return
    update: dict[str, str] = {}
    for name in ("remote_repo_path", "remote_work_dir"):
        given, stored = getattr(ctx.request, name), getattr(earlier, name)
        if given and stored:
            ctx.trace.chose(name, given, f"{name} input (wins over {JOB_SPEC} {stored})")
        elif stored:
            update[name] = ctx.trace.chose(name, stored, f"<work_dir>/{JOB_SPEC}")
    if update:
        ctx.request = ctx.request.model_copy(update=update)


def _check_inputs(req: BuildRequest) -> None:
    if req.execution_scenario != "local_docker":
        log_dir = "remote_work_dir" if req.execution_scenario == "remote_slurm" else "work_dir"
        check_log_name_part(log_dir, getattr(req, log_dir) or "")
    if req.execution_scenario == "remote_slurm":
        for name in ("remote_repo_path", "remote_work_dir"):
            value = getattr(req, name)
            if not value:
                raise BuildError(
                    f"{name} is required for remote_slurm and is neither in the request nor "
                    f"in <work_dir>/{JOB_SPEC}; pass the value trtllm-case-executor resolved "
                    "(it is never derived here)"
                )
            if not value.startswith("/"):
                raise BuildError(f"{name} must be an absolute path, got {value!r}")
    local_script = req.custom_script and req.execution_scenario != "remote_slurm"
    if local_script and not Path(req.custom_script or "").is_file():
        raise BuildError(
            f"custom_script {req.custom_script} does not exist; pass an existing script"
        )
    check_request(req)


def _resolve_workload(
    ctx: Context, cap: Capacity, mounts: Mounts, run_script: str | None
) -> Workload:
    kind = ctx.request.workflow_type
    if kind == "pytest":
        return resolve_pytest(ctx, cap, mounts)
    if kind == "eval":
        return resolve_eval(ctx, cap, mounts)
    if kind == "bench":
        return resolve_bench(ctx, cap)
    if kind == "custom":
        return resolve_custom(ctx, cap, mounts, run_script)
    raise BuildError(f"workflow_type {kind} needs a perf config; pass perf_config_yaml")


def build(
    request: Mapping[str, Any] | BuildRequest,
    *,
    environ: Mapping[str, str] | None = None,
    machine: Callable[[], str] | None = None,
    env_info: EnvInfo | None = None,
    clock: Callable[[], datetime] | None = None,
    ssh: Runner | None = None,
) -> BuiltJob:
    """Resolve ``request`` into a script, a job spec and a report. Reads input
    files (slurm_env, an earlier job_spec.json, test files, properties) but writes
    nothing. ``ssh`` runs ``ssh HOST 'echo $HOME'`` when the remote home must be
    asked (see :mod:`scriptbuilder.inputs.remote_home`)."""
    ctx = Context(
        request=load_request(request),
        env_info=env_info,
        environ=os.environ if environ is None else environ,
    )
    if machine is not None:
        ctx.machine = machine
    if clock is not None:
        ctx.clock = clock
    if ssh is not None:
        ctx.ssh = ssh
    _check_work_dir(ctx.request)
    _read_earlier_job_spec(ctx)
    req = ctx.request
    _check_inputs(req)
    _load_env(ctx)
    image = resolve_image(ctx)
    custom_dir = posixpath.dirname(req.custom_script) if req.custom_script else None
    mounts = resolve_mounts(ctx, custom_dir)
    if not ctx.is_slurm:
        if wants_perf_path(ctx):
            what = (
                f"workflow_type {req.workflow_type}"
                if req.workflow_type != "pytest"
                else "a perf-sanity test_cmd"
            )
            raise BuildError(
                f"{what} needs Slurm (submit.py writes a Slurm launch script); use "
                "execution_scenario local_slurm or remote_slurm"
            )
        env_check = req.env_check
        cap = Capacity(env_check.gpus_per_node, env_check.available_gpus, "pmix")
        try:
            workload = _resolve_workload(ctx, cap, mounts, None)
        except EvalNeedsPerfSanity as exc:
            raise BuildError(
                f"eval_cmd: world size {exc.world_size} exceeds the {exc.gpus_per_node} GPUs "
                "of this machine, and a wider eval runs as an accuracy benchmark through "
                "submit.py, which needs Slurm; use execution_scenario local_slurm or "
                f"remote_slurm, or lower --tp_size x --pp_size to at most {exc.gpus_per_node}"
            ) from None
        return docker_job(ctx, image, mounts, workload)
    target = resolve_slurm_target(ctx)
    if wants_perf_path(ctx):
        return _perf_job(ctx, target, resolve_perf(ctx, image, mounts, target))
    cap = Capacity(target.gpus_per_node, None, target.mpi_plugin, target.gpu_gres)
    run_script = _remote_run_script(ctx, mounts) if ctx.is_remote else None
    try:
        workload = _resolve_workload(ctx, cap, mounts, run_script)
    except EvalNeedsPerfSanity as exc:
        ctx.trace.warn(
            f"eval world size {exc.world_size} exceeds gpus_per_node {exc.gpus_per_node}: "
            "running it as an accuracy benchmark through submit.py"
        )
        plan = resolve_perf(
            ctx, image, mounts, target, eval_fallback=True, model_name=exc.model_name
        )
        return _perf_job(ctx, target, plan)
    _check_counts(ctx, target, workload.shape.nodes, workload.shape.ntasks)
    exact = workload.required_devices if workload.exact_devices else None
    return slurm_job(ctx, image, mounts, target, gres_flag(ctx, target, exact), workload)


def _check_counts(ctx: Context, target: SlurmTarget, nodes: int, ntasks: int) -> None:
    """Nodes and tasks the partition in use (from slurm_env.json) can hold."""
    partitions = ctx.slurm_env.partitions if ctx.slurm_env is not None else []
    check_counts(
        nodes,
        ntasks,
        ntasks_field="required_devices",
        partition=target.partition,
        partitions=[(p.name, p.nodes) for p in partitions],
    )


def _perf_job(ctx: Context, target: SlurmTarget, plan: SubmitPlan) -> BuiltJob:
    devices, nodes, _ = topology_of(plan)
    _check_counts(ctx, target, nodes, devices)
    return perf_job(ctx, target, plan)


def _remote_run_script(ctx: Context, mounts: Mounts) -> str | None:
    """For remote custom jobs: the run script's path on the cluster (it is copied
    there from work_dir by the remote executor, listed in ``extra_files``)."""
    if ctx.request.workflow_type != "custom":
        return None
    remote = posixpath.join(ctx.request.remote_work_dir or "", RUN_SCRIPT_NAME)
    if not covered(remote, mounts.host_sources()):
        raise BuildError(
            f"remote_work_dir {ctx.request.remote_work_dir} is not inside a container mount, so "
            "the custom run script copied there would be invisible in the container; use a "
            "remote_work_dir under remote_repo_path"
        )
    return ctx.trace.chose("run script", remote, "packaged run script, copied to remote_work_dir")


@dataclass(frozen=True)
class BuildResult:
    """One request of :func:`build_many`: its job, or the error that refused it."""

    #: The request's position in the input (from 0).
    index: int
    job: BuiltJob | None = None
    error: BuildError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def build_many(
    requests: Iterable[Mapping[str, Any] | BuildRequest],
    *,
    environ: Mapping[str, str] | None = None,
    machine: Callable[[], str] | None = None,
    env_info: EnvInfo | None = None,
    clock: Callable[[], datetime] | None = None,
) -> list[BuildResult]:
    """:func:`build` for every request, in order, in this process: a sweep of
    thousands of jobs pays the start-up once. A refused request becomes a result
    carrying its :class:`BuildError` and the next one is still built. Writes
    nothing; call ``result.job.write()`` for the jobs to keep."""
    results = []
    for index, request in enumerate(requests):
        try:
            job = build(request, environ=environ, machine=machine, env_info=env_info, clock=clock)
        except BuildError as exc:
            results.append(BuildResult(index, error=exc))
        else:
            results.append(BuildResult(index, job=job))
    return results
