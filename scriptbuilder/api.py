"""The Python API: ``build(request) -> BuiltJob``, pure until ``BuiltJob.write()``.

Resolution follows the procedure in order: the Slurm environment, Step 1
(image), Step 2 (mounts), Step 3 (parallelism and Slurm parameters), then the
script tree, ``job_spec.json`` (Step 5) and the report (Step 6).
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from scriptbuilder import __version__
from scriptbuilder.errors import BuildError
from scriptbuilder.job import Container, SlurmAllocation, TaskShape
from scriptbuilder.job_builder import JobBuilder
from scriptbuilder.job_spec import JobSpec, SlurmParams
from scriptbuilder.output import write_atomic
from scriptbuilder.render import render, render_one_line
from scriptbuilder.request import BuildRequest
from scriptbuilder.resolution.context import Context, EnvInfo
from scriptbuilder.resolution.image import resolve_image
from scriptbuilder.resolution.mounts import Mounts, covered, resolve_mounts
from scriptbuilder.resolution.perf import (
    SUBMIT_TIMEOUT,
    PerfPlan,
    resolve_perf,
    topology_of,
    wants_perf_path,
)
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
from scriptbuilder.scenarios.docker import Docker, DockerContainer
from scriptbuilder.scenarios.slurm import LocalSlurm, RemoteSlurm, SlurmScenario
from scriptbuilder.slurm_env import load_slurm_env
from scriptbuilder.workflows.custom import RUN_SCRIPT_NAME, packaged_run_script

GENERATOR = f"scriptbuilder {__version__}"
DOCKER_SCRIPT = "docker_cmd.sh"


@dataclass(frozen=True)
class OutputFile:
    path: Path
    text: str
    mode: int


@dataclass(frozen=True)
class SubmitRun:
    """A submit.py run that writes the launch script (the perf-sanity path)."""

    argv: tuple[str, ...]
    cwd: Path
    output_log: Path
    timeout: float
    #: Files submit.py reads, written before it runs (a derived config).
    inputs: tuple[OutputFile, ...] = ()

    def display(self) -> str:
        from scriptbuilder.render import quote_literal

        return " ".join(quote_literal(a) for a in self.argv)


@dataclass(frozen=True)
class BuiltJob:
    """Everything a build produced. Nothing is on disk until :meth:`write`."""

    request: BuildRequest
    job_spec: JobSpec
    script_name: str
    script_text: str
    report: str
    warnings: tuple[str, ...]
    explanation: tuple[str, ...]
    files: tuple[OutputFile, ...] = field(default=())
    #: Set on the perf-sanity path: submit.py writes the script during :meth:`write`.
    submit: SubmitRun | None = None

    @property
    def job_spec_json(self) -> str:
        return self.job_spec.to_json()

    def write(self) -> list[Path]:
        """Create ``work_dir`` and write every file atomically; returns the paths.

        On the perf-sanity path submit.py runs first (its full output is kept in
        ``work_dir``); if it fails, job_spec.json is not written."""
        work_dir = Path(self.request.work_dir)
        work_dir.mkdir(parents=True, exist_ok=True)
        written: list[Path] = []
        if self.submit is not None:
            from scriptbuilder.workflows.perf_sanity import run_submit

            for out in self.submit.inputs:
                write_atomic(out.path, out.text, out.mode)
                written.append(out.path)
            run_submit(
                list(self.submit.argv),
                cwd=self.submit.cwd,
                timeout=self.submit.timeout,
                output_log=self.submit.output_log,
            )
            written.append(Path(self.job_spec.script_path or ""))
        for out in self.files:
            write_atomic(out.path, out.text, out.mode)
            written.append(out.path)
        return written


def load_request(data: Mapping[str, Any] | BuildRequest) -> BuildRequest:
    """Validate a request mapping; errors become one-line :class:`BuildError`s."""
    if isinstance(data, BuildRequest):
        return data
    from pydantic import ValidationError

    try:
        return BuildRequest.model_validate(dict(data))
    except ValidationError as exc:
        raise BuildError(describe_validation_error(exc)) from None


def describe_validation_error(exc: Any) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "request"
    if first["type"] == "extra_forbidden":
        model = BuildRequest if len(first["loc"]) == 1 else None
        known = (
            ", ".join(model.model_fields)
            if model
            else "gpus_per_node, available_gpus, default_models_repo"
        )
        return f"request field {where!r} is unknown; known fields: {known}"
    if first["type"] == "missing":
        return f"request field {where!r} is required; add it"
    return f"request field {where!r}: {first['msg']}; fix its value"


def _load_env(ctx: Context) -> None:
    req = ctx.request
    if not ctx.is_slurm:
        return
    path = Path(req.slurm_env_file or posixpath.join(req.work_dir, "slurm_env.json"))
    ctx.slurm_env, ctx.slurm_env_raw = load_slurm_env(path)
    ctx.trace.chose(
        "slurm_env",
        str(path),
        "slurm_env_file" if req.slurm_env_file else "<work_dir>/slurm_env.json",
    )


def _check_inputs(req: BuildRequest) -> None:
    if not req.work_dir.startswith("/"):
        raise BuildError(
            f"work_dir must be an absolute path, got {req.work_dir!r}; pass an absolute path"
        )
    if req.execution_scenario == "remote_slurm":
        for name in ("remote_repo_path", "remote_work_dir"):
            value = getattr(req, name)
            if not value:
                raise BuildError(
                    f"{name} is required for remote_slurm; pass the value trtllm-case-executor "
                    "resolved (it is never derived here)"
                )
            if not value.startswith("/"):
                raise BuildError(f"{name} must be an absolute path, got {value!r}")
    local_script = req.custom_script and req.execution_scenario != "remote_slurm"
    if local_script and not Path(req.custom_script or "").is_file():
        raise BuildError(
            f"custom_script {req.custom_script} does not exist; pass an existing script"
        )


def _resolve_workload(
    ctx: Context, cap: Capacity, mounts: Mounts, run_script: str | None
) -> Workload:
    kind = ctx.request.workflow_type
    if kind == "pytest":
        return resolve_pytest(ctx, cap)
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
) -> BuiltJob:
    """Resolve ``request`` into a script, a job spec and a report. Reads input
    files (slurm_env, test files, properties) but writes nothing."""
    req = load_request(request)
    ctx = Context(request=req, env_info=env_info)
    if environ is not None:
        ctx.environ = environ
    if machine is not None:
        ctx.machine = machine
    if clock is not None:
        ctx.clock = clock
    _check_inputs(req)
    _load_env(ctx)
    image = resolve_image(ctx)
    custom_dir = posixpath.dirname(req.custom_script) if req.custom_script else None
    mounts = resolve_mounts(ctx, custom_dir)
    if not ctx.is_slurm:
        if req.workflow_type in ("perf_sanity", "benchmark"):
            raise BuildError(
                f"workflow_type {req.workflow_type} needs Slurm (submit.py writes a Slurm "
                "launch script); use execution_scenario local_slurm or remote_slurm"
            )
        env_check = req.env_check
        cap = Capacity(env_check.gpus_per_node, env_check.available_gpus, "pmix")
        return _docker_job(ctx, image, mounts, _resolve_workload(ctx, cap, mounts, None))
    target = resolve_slurm_target(ctx)
    if wants_perf_path(ctx):
        return _perf_job(ctx, target, resolve_perf(ctx, image, mounts, target))
    cap = Capacity(target.gpus_per_node, None, target.mpi_plugin)
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
    return _slurm_job(ctx, image, mounts, target, gres_flag(ctx, target), workload)


def _perf_job(ctx: Context, target: SlurmTarget, plan: PerfPlan) -> BuiltJob:
    req, trace = ctx.request, ctx.trace
    devices, nodes, gpus_per_node = topology_of(plan)
    trace.chose("devices/nodes", f"{devices}/{nodes}", "config YAML hardware and parallelism")
    image = plan.argv[plan.argv.index("--image") + 1]
    gres = f"gpu:{gpus_per_node}" if target.gpu_gres else None
    spec = JobSpec(
        generator=GENERATOR,
        workflow_type=req.workflow_type,
        model_name=plan.model_name,
        execution_scenario=req.execution_scenario,
        docker_image=image,
        required_devices=devices,
        node_count=nodes,
        script_path=str(plan.launch_sh),
        script_name=plan.launch_sh.name,
        log_file_pattern=plan.workflow.log_file_pattern,
        success_patterns=list(plan.workflow.success_patterns),
        failure_patterns=list(plan.workflow.failure_patterns),
        extra_files=[],
        slurm_params=SlurmParams(
            partition=target.partition,
            account=target.account,
            time_limit=target.time_limit,
            nodes=nodes,
            ntasks=nodes * gpus_per_node,
            ntasks_per_node=gpus_per_node,
            gpus_per_node=gpus_per_node,
            gres=gres,
            mpi_plugin=ctx.slurm_env.pmix.preferred if ctx.slurm_env else None,
        ),
        slurm_env=ctx.slurm_env_raw,
        remote_repo_path=req.remote_repo_path if ctx.is_remote else None,
        remote_work_dir=req.remote_work_dir if ctx.is_remote else None,
        warnings=list(trace.warnings),
    )
    spec_path = Path(req.work_dir) / "job_spec.json"
    inputs = (
        (OutputFile(plan.derived_config[0], plan.derived_config[1], 0o644),)
        if plan.derived_config
        else ()
    )
    submit = SubmitRun(
        tuple(plan.argv), Path(req.work_dir), plan.output_log, SUBMIT_TIMEOUT, inputs
    )
    report = render_report(spec, spec_path, str(plan.launch_sh))
    return BuiltJob(
        req,
        spec,
        plan.launch_sh.name,
        "",
        report,
        tuple(trace.warnings),
        tuple(trace.lines()),
        (OutputFile(spec_path, spec.to_json(), 0o644),),
        submit,
    )


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


def _docker_job(ctx: Context, image: str, mounts: Mounts, workload: Workload) -> BuiltJob:
    req, trace = ctx.request, ctx.trace
    workflow, model = workload.workflow, workload.model_name
    name = workflow.job_name(model)
    container = DockerContainer(image, name, mounts.entries, mounts.project, mounts.models_root)
    header = (f"Generated by {GENERATOR}: {workflow.kind} job, local_docker.",)
    scenario = Docker(container, header=header)
    # One process in the container: MPI launchers and per-task steps do not apply.
    plan = workflow.plan(TaskShape())
    text = render(scenario.assemble(plan))
    script_path = posixpath.join(req.work_dir, DOCKER_SCRIPT)
    spec = JobSpec(
        generator=GENERATOR,
        workflow_type=workflow.kind,
        model_name=model,
        execution_scenario=req.execution_scenario,
        docker_image=image,
        required_devices=workload.required_devices,
        node_count=workload.node_count,
        success_patterns=list(workflow.success_patterns),
        failure_patterns=list(workflow.failure_patterns),
        extra_files=[],
        docker_cmd=render_one_line(scenario.docker_run(plan)),
        log_file=posixpath.join(req.work_dir, f"{model}_local.log"),
        warnings=list(trace.warnings),
    )
    spec_path = Path(req.work_dir) / "job_spec.json"
    files = (
        OutputFile(Path(script_path), text, 0o755),
        OutputFile(spec_path, spec.to_json(), 0o644),
    )
    report = render_report(spec, spec_path, script_path)
    return BuiltJob(
        req, spec, DOCKER_SCRIPT, text, report, tuple(trace.warnings), tuple(trace.lines()), files
    )


def _slurm_job(
    ctx: Context, image: str, mounts: Mounts, target: Any, gres: str | None, workload: Workload
) -> BuiltJob:
    req, trace = ctx.request, ctx.trace
    workflow, model = workload.workflow, workload.model_name
    shape = workload.shape
    log_dir = req.remote_work_dir if ctx.is_remote else req.work_dir
    assert log_dir is not None
    job_name = workflow.job_name(model)
    allocation = SlurmAllocation(
        job_name=job_name,
        partition=target.partition,
        account=target.account,
        time_limit=target.time_limit,
        nodes=shape.nodes,
        ntasks=shape.ntasks,
        ntasks_per_node=shape.ntasks_per_node,
        gres=gres,
        log_dir=log_dir,
    )
    container = Container(image=image, name=job_name, mounts=mounts.joined, workdir=mounts.project)
    scenario_cls: type[SlurmScenario] = RemoteSlurm if ctx.is_remote else LocalSlurm
    scenario = scenario_cls(
        allocation,
        container,
        exports=(("LLM_MODELS_ROOT", mounts.models_root),),
        header=(f"Generated by {GENERATOR}: {workflow.kind} job, {req.execution_scenario}.",),
    )
    text = render(JobBuilder(scenario, workflow, shape).build())
    script_name = workflow.script_name(model)
    extra: tuple[OutputFile, ...] = ()
    if ctx.is_remote and workflow.kind == "custom":
        local_copy = Path(req.work_dir) / RUN_SCRIPT_NAME
        extra = (OutputFile(local_copy, packaged_run_script(), 0o755),)
    script_path = posixpath.join(req.work_dir, script_name)
    persistent = req.execution_scenario == "local_slurm" and req.persistent_mode is not False
    spec = JobSpec(
        generator=GENERATOR,
        workflow_type=workflow.kind,
        model_name=model,
        execution_scenario=req.execution_scenario,
        docker_image=image,
        required_devices=workload.required_devices,
        node_count=workload.node_count,
        script_path=script_path,
        script_name=script_name,
        log_file_pattern=f"{job_name}_%j.out",
        success_patterns=list(workflow.success_patterns),
        failure_patterns=list(workflow.failure_patterns),
        extra_files=[str(f.path) for f in extra],
        slurm_params=SlurmParams(
            partition=target.partition,
            account=target.account,
            time_limit=target.time_limit,
            nodes=shape.nodes,
            ntasks=shape.ntasks,
            ntasks_per_node=shape.ntasks_per_node,
            gpus_per_node=target.gpus_per_node,
            gres=gres,
            mpi_plugin=shape.mpi,
        ),
        slurm_env=ctx.slurm_env_raw,
        remote_repo_path=req.remote_repo_path if ctx.is_remote else None,
        remote_work_dir=req.remote_work_dir if ctx.is_remote else None,
        persistent_mode=True if persistent else None,
        container_name=container.name if persistent else None,
        container_mounts=container.mounts if persistent else None,
        warnings=list(trace.warnings),
    )
    spec_path = Path(req.work_dir) / "job_spec.json"
    report = render_report(spec, spec_path, script_path)
    files = (
        OutputFile(Path(script_path), text, 0o755),
        OutputFile(spec_path, spec.to_json(), 0o644),
        *extra,
    )
    return BuiltJob(
        req, spec, script_name, text, report, tuple(trace.warnings), tuple(trace.lines()), files
    )


def render_report(spec: JobSpec, spec_path: Path, script: str) -> str:
    """Procedure Step 6."""
    lines = [
        f"Generated: {spec_path}",
        f"Script: {script}",
        f"Workflow: {spec.workflow_type}",
        f"Model: {spec.model_name}",
        f"Docker image: {spec.docker_image}",
        f"Devices: {spec.required_devices} GPUs across {spec.node_count} nodes",
    ]
    lines += [f"Warning: {w}" for w in spec.warnings]
    return "\n".join(lines) + "\n"
