"""Slurm scenarios: an sbatch script with one srun step per workflow step.

Every step after the first runs only when the ones before it succeeded; the
script always prints its closing line and exits with the first failing step's
exit code. Each step prints ``==> <label>: <command>`` first, then runs in the
background while the script waits for it, so the time-limit warning
(:mod:`scriptbuilder.scenarios.time_limit`) is handled at once.
"""

from __future__ import annotations

import posixpath
from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar

from scriptbuilder.errors import BuildError
from scriptbuilder.inputs.command_check import check_counts
from scriptbuilder.inputs.image_ref import enroot_problem
from scriptbuilder.models.job_spec import JobSpec
from scriptbuilder.resolution.context import Context
from scriptbuilder.resolution.image import chose_arch, chosen_image, image_in_form, partition_arch
from scriptbuilder.resolution.mounts import Mounts, cluster_home, cluster_project, local_home
from scriptbuilder.resolution.mpi import MPI_ENV_KEEP, MPI_ENV_PREFIXES
from scriptbuilder.resolution.secrets import request_secrets
from scriptbuilder.resolution.slurm_params import (
    DEFAULT_TIME_LIMIT,
    SlurmTarget,
    gres_flag,
    resolve_slurm_target,
)
from scriptbuilder.resolution.workloads import Placement
from scriptbuilder.scenarios import recording, time_limit
from scriptbuilder.scenarios.base import (
    PRINT_LINE,
    BackendKind,
    Scenario,
    ScriptJob,
    SlurmEnvReader,
    check_local_custom_script,
    step_banner,
)
from scriptbuilder.script import tree
from scriptbuilder.script.plan import (
    Container,
    JobSetup,
    SlurmAllocation,
    Step,
    TaskShape,
    WorkflowPlan,
)
from scriptbuilder.workflows.base import Workload
from scriptbuilder.workflows.perf_sanity import SubmitLogin

if TYPE_CHECKING:
    from scriptbuilder.models.request import BuildRequest

STATUS = "rc"


def check_log_name_part(field: str, value: str) -> None:
    """A backslash in an --output/--error path turns off every %-pattern in sbatch."""
    if "\\" in value:
        raise BuildError(
            f"{field} {value!r} contains a backslash, which makes Slurm stop replacing %j in "
            "log file names; remove the backslash"
        )


def log_path(log_dir: str, job_name: str, ext: str) -> str:
    """``<log_dir>/<job_name>_%j.<ext>``; a literal ``%`` is doubled for sbatch."""
    return f"{log_dir.rstrip('/')}/{job_name}_".replace("%", "%%") + f"%j.{ext}"


def _directives(alloc: SlurmAllocation, warning: int | None) -> tuple[tree.Directive, ...]:
    tasks, log_name = alloc.tasks, alloc.log_name or alloc.job_name
    return (
        tree.Directive("job-name", alloc.job_name),
        tree.Directive("partition", alloc.partition),
        tree.Directive("account", alloc.account),
        tree.Directive("time", alloc.time_limit),
        *([tree.Directive("signal", f"B:{time_limit.SIGNAL}@{warning}")] if warning else []),
        tree.Directive("nodes", str(tasks.nodes)),
        tree.Directive("ntasks", str(tasks.ntasks)),
        tree.Directive("ntasks-per-node", str(tasks.ntasks_per_node)),
        *([tree.Directive("gres", alloc.gres)] if alloc.gres else []),
        tree.Directive("output", log_path(alloc.log_dir, log_name, "out")),
        tree.Directive("error", log_path(alloc.log_dir, log_name, "err")),
    )


def _option(name: str, value: str) -> tree.SrunOption:
    return tree.SrunOption(name, tree.Word.literal(value))


def _srun(step: Step, container: Container, lead: tuple[tree.Statement, ...]) -> tree.Srun:
    """The step's srun; ``lead`` runs first in the step (before the MPI variables are
    cleared: it may read ``SLURM_JOB_ID``)."""
    shape = step.shape
    workdir = container.project if step.in_project and container.project else container.workdir
    options = (
        tree.SrunOption("-l"),
        _option("--nodes", str(shape.nodes)),
        _option("--ntasks", str(shape.ntasks)),
        _option("--ntasks-per-node", str(shape.ntasks_per_node)),
        *([_option("--mpi", shape.mpi)] if shape.mpi else []),
        _option("--container-image", container.image),
        _option("--container-name", container.name),
        _option("--container-mounts", container.joined_mounts),
        _option("--container-workdir", workdir),
        _option("--kill-on-bad-exit", "1"),
    )
    clear = (tree.ClearEnv(MPI_ENV_PREFIXES, MPI_ENV_KEEP),) if step.clear_mpi_env else ()
    script = tree.ScriptText((*lead, *clear, *step.body))
    args = [tree.to_word(a) for a in step.args]
    return tree.Srun(
        options, tree.Command.of("bash", "-c", tree.Word((script,)), "step", *args), background=True
    )


def _echo(*parts: str | tree.Var | tree.Subst) -> tree.Run:
    return tree.Run(tree.Command.of("echo", tree.Word.of(*parts)))


def _started() -> tree.Run:
    date, host = (tree.Subst(tree.Command.of(name)) for name in ("date", "hostname"))
    return _echo("Job ", tree.Var("SLURM_JOB_ID", ""), " started at ", date, " on ", host)


def _finished() -> tree.Run:
    date, status = tree.Subst(tree.Command.of("date")), tree.Var(STATUS)
    return _echo(
        "Job ", tree.Var("SLURM_JOB_ID", ""), " finished at ", date, " with exit code ", status
    )


def _step_block(
    step: Step, container: Container, banner: str, lead: tuple[tree.Statement, ...]
) -> tree.If:
    """Runs when every step before succeeded: names the step, prints its banner,
    runs it (``lead`` first), waits for it, keeps its exit code and forgets its pid."""
    status = tree.Word.of(tree.Var(STATUS))
    return tree.If(
        tree.Command.of("[", status, "-eq", "0", "]"),
        (
            tree.Comment(step.label),
            tree.Assign(time_limit.STEP, tree.Word.literal(step.label)),
            tree.Run(tree.Command.of("printf", PRINT_LINE, banner)),
            _srun(step, container, lead),
            tree.Assign(time_limit.STEP_PID, tree.Word.of(tree.Var("!"))),
            tree.Run(tree.Command.of("wait", tree.Word.of(tree.Var(time_limit.STEP_PID)))),
            tree.Assign(STATUS, tree.Word.of(tree.Var("?"))),
            tree.Assign(time_limit.STEP_PID, tree.Word.literal("")),
        ),
    )


def check_counts_fit(ctx: Context, target: SlurmTarget, nodes: int, ntasks: int) -> None:
    """Node and task counts the partitions of slurm_env.json can give."""
    partitions = ctx.slurm_env.partitions if ctx.slurm_env is not None else []
    check_counts(
        nodes,
        ntasks,
        ntasks_field="required_devices",
        partition=target.partition,
        partitions=[(p.name, p.nodes) for p in partitions],
    )


def slurm_params(
    target: SlurmTarget, shape: TaskShape, gpus_per_node: int | None, gres: str | None
) -> dict[str, Any]:
    """job_spec.json's ``slurm_params``."""
    return dict(
        partition=target.partition,
        account=target.account,
        time_limit=target.time_limit,
        nodes=shape.nodes,
        ntasks=shape.ntasks,
        ntasks_per_node=shape.ntasks_per_node,
        gpus_per_node=gpus_per_node,
        gres=gres,
        mpi_plugin=target.mpi_plugin,
    )


def _target(place: Placement) -> SlurmTarget:
    assert place.target is not None  # every Slurm placement has one
    return place.target


class SlurmScenario(Scenario):
    """A Slurm cluster: the partition's architecture (with the scenario's fallback),
    pyxis's image form, an sbatch script whose logs go to ``log_dir_field``, and
    ``LLM_MODELS_ROOT`` exported before the workflow's own variables."""

    #: The request field naming the folder of the job's logs on the cluster.
    log_dir_field: ClassVar[str]

    def check_request(self, ctx: Context) -> None:
        check_log_name_part(self.log_dir_field, self.log_dir(ctx))

    def log_dir(self, ctx: Context) -> str:
        return str(getattr(ctx.request, self.log_dir_field) or "")

    def load_inputs(self, ctx: Context, read_slurm_env: SlurmEnvReader) -> None:
        req = ctx.request
        path = req.slurm_env_file or posixpath.join(req.work_dir, "slurm_env.json")
        ctx.slurm_env, ctx.slurm_env_raw = read_slurm_env(path)
        rule = "slurm_env_file" if req.slurm_env_file else "<work_dir>/slurm_env.json"
        ctx.trace.chose("slurm_env", path, rule)

    @abstractmethod
    def unknown_arch(self, ctx: Context) -> tuple[str, str]:
        """The architecture, and its rule, when slurm_env and device_type do not say."""

    def arch(self, ctx: Context) -> str:
        return chose_arch(ctx, *(partition_arch(ctx) or self.unknown_arch(ctx)))

    def image(self, ctx: Context) -> str:
        chosen = chosen_image(ctx, lambda: self.arch(ctx))
        problem = enroot_problem(chosen[1])
        fault = f"cannot be pulled by pyxis: {problem}; fix the image name" if problem else ""
        rule = "enroot form for pyxis --container-image (REGISTRY#IMAGE)"
        return image_in_form(ctx, chosen, chosen[1].enroot, rule, fault)

    def placement(self, ctx: Context, image: str, mounts: Mounts) -> Placement:
        target = resolve_slurm_target(ctx, self.name)
        gpn, partition = target.gpus_per_node, ctx.request.partition
        return Placement(
            image,
            mounts,
            target,
            gpn,
            node_gpus=gpn,
            where=f"partition {partition}",
            # the partition's own count or gres, as the probe records them
            gpus_per_node_fix=f"slurm_env partition {partition} has no gpus_per_node or gres; "
            "rerun the Slurm probe or set the partition's gpus_per_node in slurm_env.json",
            mpi_plugin=target.mpi_plugin,
            job_dir=self.log_dir(ctx),
            allocates_gpus=target.gpu_gres,
        )

    def submit_target(self, place: Placement, refusal: str) -> SlurmTarget:
        return _target(place)

    def backend(self, spec: JobSpec) -> BackendKind:
        return "sbatch"

    def campaign_room(
        self, req: BuildRequest, read_slurm_env: SlurmEnvReader
    ) -> tuple[int, int | None, str]:
        path = req.slurm_env_file or posixpath.join(req.work_dir, "slurm_env.json")
        env, _ = read_slurm_env(path)
        entry = env.partition(req.partition or "")
        if entry is None:
            return 1, None, f"partition {req.partition}"
        nodes = entry.nodes if isinstance(entry.nodes, int) else None
        if isinstance(entry.nodes, str) and entry.nodes.isdecimal():
            nodes = int(entry.nodes)
        return nodes or 1, entry.gpus_per_node or entry.gres_gpus, f"partition {entry.name}"

    def campaign_time_limit(self, req: BuildRequest) -> str | None:
        return req.time_limit or DEFAULT_TIME_LIMIT

    def campaign_fields(self, req: BuildRequest, slurm_env: str) -> dict[str, Any]:
        return {"slurm_env_file": slurm_env}

    def setup(self, ctx: Context, place: Placement, workload: Workload) -> JobSetup:
        req, mounts, target = ctx.request, place.mounts, _target(place)
        workflow, shape = workload.workflow, workload.shape
        check_counts_fit(ctx, target, shape.nodes, shape.ntasks)
        devices = workload.required_devices
        share = devices if req.share_node else None
        gres = gres_flag(ctx, target, devices if workload.exact_devices else None, share)
        # The logs, the script and the container are named after the model, the job as asked.
        log_name = workflow.job_name(workload.model_name)
        rule = "job_name input" if req.job_name else f"<model_name>_{workflow.job_suffix}"
        job_name = ctx.trace.chose("job_name", req.job_name or log_name, rule)
        where = (target.partition, target.account, target.time_limit)
        allocation = SlurmAllocation(job_name, *where, shape, gres, place.job_dir, log_name)
        return JobSetup(
            job_name,
            Container(place.image, log_name, mounts.entries, mounts.project),
            mounts.models_root,
            allocation,
            header=self.header(workflow.kind),
            secrets=request_secrets(req),
            timeout_warning=req.timeout_warning_seconds,
        )

    def script_name(self, setup: JobSetup) -> str:
        return f"{setup.container.name}.slurm"

    def spec_fields(self, ctx: Context, job: ScriptJob) -> dict[str, Any]:
        target, alloc = _target(job.place), job.setup.allocation
        assert alloc is not None  # setup gives every Slurm job one
        path, shape = self.script_path(ctx, job.setup), job.workload.shape
        return dict(
            script_path=path,
            script_name=posixpath.basename(path),
            log_file_pattern=f"{job.setup.container.name}_%j.out",
            timeout_patterns=[time_limit.TIMEOUT_PATTERN],
            slurm_params=slurm_params(target, shape, target.gpus_per_node, alloc.gres),
        )

    def test_records(self, setup: JobSetup) -> str:
        alloc = setup.allocation
        if alloc is None:
            raise ValueError("a Slurm job needs an allocation")
        return recording.records_pattern(alloc.log_dir, alloc.log_name or alloc.job_name, True)

    def assemble(self, setup: JobSetup, plan: WorkflowPlan) -> tree.SbatchScript:
        alloc = setup.allocation
        if alloc is None:
            raise ValueError("a Slurm job needs an allocation")
        container, folder = setup.container, alloc.log_dir
        head, _, tail = self.test_records(setup).partition("%j")
        records = tree.Word.of(head, tree.Var("SLURM_JOB_ID"), tail)
        if any(step.records for step in plan.steps):
            container = replace(container, mounts=recording.with_folder(container.mounts, folder))
        wanted = setup.timeout_warning or time_limit.DEFAULT_WARNING_SECONDS
        warning = time_limit.warning_seconds(alloc.time_limit, wanted)
        blank, finished = tree.Blank(), _finished()
        body: list[tree.Statement] = [blank]
        for name, value in (("LLM_MODELS_ROOT", setup.models_root), *plan.env):
            body.append(tree.Export(name, tree.Word.literal(value)))
        if warning is not None:
            body += [blank, *time_limit.setup(alloc.time_limit, warning, finished)]
        body += [blank, _started(), tree.Assign(STATUS, tree.Word.literal("0"))]
        for step in plan.steps:
            banner = step_banner(step, setup.secrets)
            lead = recording.exports(step, folder, records)
            body += [blank, _step_block(step, container, banner, lead)]
        body.append(blank)
        if warning is not None:
            body += time_limit.teardown()
        body += [finished, tree.Exit(tree.Word.of(tree.Var(STATUS)))]
        return tree.SbatchScript(
            directives=_directives(alloc, warning),
            header=tuple(tree.Comment(line) for line in setup.header),
            body=tuple(body),
        )


class LocalSlurm(SlurmScenario):
    """Slurm on this machine: this home and checkout, logs in work_dir, and by
    default persistent mode (the script run inside a held allocation)."""

    name = "local_slurm"
    log_dir_field = "work_dir"

    def check_request(self, ctx: Context) -> None:
        super().check_request(ctx)
        check_local_custom_script(ctx)

    def unknown_arch(self, ctx: Context) -> tuple[str, str]:
        return ctx.machine(), "uname -m (partition arch unknown)"

    def home(self, ctx: Context) -> str:
        return local_home(ctx)

    def backend(self, spec: JobSpec) -> BackendKind:
        return "persistent" if spec.persistent_mode else "sbatch"

    def spec_fields(self, ctx: Context, job: ScriptJob) -> dict[str, Any]:
        fields = super().spec_fields(ctx, job)
        if ctx.request.persistent_mode is not False:
            c = job.setup.container
            fields |= dict(persistent_mode=True, container_name=c.name)
            fields["container_mounts"] = c.joined_mounts
        return fields


class RemoteSlurm(SlurmScenario):
    """Slurm reached over ssh: the cluster's home and checkout (remote_repo_path),
    logs in remote_work_dir, the connection fields slurm_env.json knows."""

    name = "remote_slurm"
    log_dir_field = "remote_work_dir"
    from_earlier = ("remote_repo_path", "remote_work_dir")
    transport = "ssh"

    def check_request(self, ctx: Context) -> None:
        super().check_request(ctx)
        for name in self.from_earlier:
            value = getattr(ctx.request, name)
            if not value:
                raise BuildError(
                    f"{name} is required for {self.name} and is neither in the request nor "
                    "in <work_dir>/job_spec.json; pass the value trtllm-case-executor resolved "
                    "(it is never derived here)"
                )
            if not value.startswith("/"):
                raise BuildError(f"{name} must be an absolute path, got {value!r}")

    def unknown_arch(self, ctx: Context) -> tuple[str, str]:
        req = ctx.request
        if device := (req.device_type or "").strip():
            return (
                "x86_64",
                f"default for {self.name} (partition arch unknown; device_type {device})",
            )
        ctx.trace.warn(
            f"architecture of partition {req.partition} is unknown (slurm_env arch is null, "
            "no device_type, no internal-env-info): using the x86_64 image; pass device_type "
            "or container_image if the nodes are Arm"
        )
        return "x86_64", f"default for {self.name} (partition arch unknown)"

    def home(self, ctx: Context) -> str:
        return cluster_home(ctx)

    def project(self, ctx: Context) -> str:
        return cluster_project(ctx)

    def placement(self, ctx: Context, image: str, mounts: Mounts) -> Placement:
        # The remote executor copies the extra files there from work_dir.
        place = super().placement(ctx, image, mounts)
        return replace(place, files_dir=place.job_dir)

    def submit_login(self, ctx: Context) -> SubmitLogin:
        """submit.py runs on the login node (ssh_host, slurm_user: the request's, else
        slurm_env's), where the checkout, remote_work_dir and Slurm are."""
        req, env = ctx.request, ctx.slurm_env
        host = req.ssh_host or (env.ssh_host if env else None)
        if not host:
            raise BuildError(
                "ssh_host is required for a remote_slurm perf-sanity build: submit.py runs on "
                "the cluster's login node; pass ssh_host (or record it in slurm_env.json)"
            )
        return SubmitLogin(host, req.slurm_user or (env.slurm_user if env else None))

    def job_spec_fields(self, ctx: Context) -> dict[str, Any]:
        req = ctx.request
        paths = {"remote_repo_path": req.remote_repo_path, "remote_work_dir": req.remote_work_dir}
        return super().job_spec_fields(ctx) | paths

    def connection_fallback(self, ctx: Context) -> Mapping[str, Any]:
        return ctx.slurm_env_raw or {}
