"""Local Docker: one ``docker run`` that installs the project and runs the steps
(no ``-t``: the executor pipes its output to a log, where docker refuses a TTY)."""

from __future__ import annotations

import posixpath
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from scriptbuilder.inputs.command_check import MAX_ARG_BYTES
from scriptbuilder.models.job_spec import JobSpec
from scriptbuilder.resolution.context import Context
from scriptbuilder.resolution.image import chose_arch, chosen_image, image_in_form
from scriptbuilder.resolution.mounts import Mounts, local_home
from scriptbuilder.resolution.secrets import request_secrets, script_custom_env
from scriptbuilder.resolution.workloads import Placement
from scriptbuilder.scenarios import recording
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
from scriptbuilder.script.plan import Container, JobSetup, TaskShape, WorkflowPlan
from scriptbuilder.script.render import render_one_line
from scriptbuilder.script.tree import DockerRun
from scriptbuilder.workflows.base import Workload

if TYPE_CHECKING:
    from scriptbuilder.models.request import BuildRequest

CAPABILITIES = ("SYS_PTRACE", "SYS_ADMIN", "DAC_READ_SEARCH")
SCRIPT_NAME = "docker_cmd.sh"


def _option(name: str, value: str | None = None) -> tree.SrunOption:
    return tree.SrunOption(name, None if value is None else tree.Word.of(value))


def _payload(
    plan: WorkflowPlan, secrets: tuple[str, ...], folder: str, records: str
) -> tree.Command:
    """``bash -c`` running each step in a subshell of its own, in turn, with the
    step's arguments as its positional parameters, after printing its banner;
    the first failure ends the run (``set -e`` is off inside a step, as at a prompt)."""
    errexit_on, errexit_off = (tree.Run(tree.Command.of("set", flag)) for flag in ("-e", "+e"))
    body: list[tree.Statement] = [errexit_on]
    args: list[str] = []

    def ref(value: str) -> tree.Word:
        args.append(value)
        return tree.Word.of(tree.Var(str(len(args))))

    for step in plan.steps:  # a banner is one argument: cut to what one can hold
        banner = step_banner(step, secrets).encode()[:MAX_ARG_BYTES].decode(errors="ignore")
        body.append(tree.Run(tree.Command.of("printf", PRINT_LINE, ref(banner))))
        refs = tuple(ref(value) for value in step.args)
        own = step.body[:1] == (errexit_on,)  # a step that sets -e itself (the install)
        lead = recording.exports(step, folder, tree.Word.literal(records))
        steps = (*lead, *step.body)
        body.append(tree.Subshell(steps if own else (errexit_off, *steps), refs or None))
    return tree.Command.of("bash", "-c", tree.ScriptText(tuple(body)), "job", *args)


class Docker(Scenario):
    """Local Docker: this machine's GPUs, its architecture, the Docker image form,
    and the script ``docker_cmd.sh`` started by the lifecycle's docker backend."""

    name = "local_docker"

    def check_request(self, ctx: Context) -> None:
        check_local_custom_script(ctx)

    def load_inputs(self, ctx: Context, read_slurm_env: SlurmEnvReader) -> None:
        """Nothing besides the request: this machine's GPUs are in env_check."""
        return None

    def arch(self, ctx: Context) -> str:
        return chose_arch(ctx, ctx.machine(), "uname -m (local_docker)")

    def image(self, ctx: Context) -> str:
        chosen = chosen_image(ctx, lambda: self.arch(ctx))
        ref, form = chosen[1], chosen[1].docker
        fault = "is a squashfs file, which docker run cannot use; pass a registry image"
        fault = fault if ref.file else ""
        if form.startswith("-"):
            fault = "would be read by docker run as an option; pass [REGISTRY/]IMAGE[:TAG]"
        return image_in_form(
            ctx, chosen, form, "Docker form for docker run (REGISTRY/IMAGE)", fault
        )

    def home(self, ctx: Context) -> str:
        return local_home(ctx)

    def placement(self, ctx: Context, image: str, mounts: Mounts) -> Placement:
        check = ctx.request.env_check
        return Placement(
            image,
            mounts,
            None,
            check.gpus_per_node,
            node_gpus=check.available_gpus,
            where="this machine",
            gpus_per_node_fix="env_check.gpus_per_node is not set; pass it",
            mpi_plugin=None,
            job_dir=ctx.request.work_dir,
        )

    def backend(self, spec: JobSpec) -> BackendKind:
        return "docker"

    def campaign_room(
        self, req: BuildRequest, read_slurm_env: SlurmEnvReader
    ) -> tuple[int, int | None, str]:
        check = req.env_check
        return 1, check.gpus_per_node or check.available_gpus, "this machine"

    def campaign_time_limit(self, req: BuildRequest) -> str | None:
        return None

    def campaign_fields(self, req: BuildRequest, slurm_env: str) -> dict[str, Any]:
        return {}

    def setup(self, ctx: Context, place: Placement, workload: Workload) -> JobSetup:
        req, mounts = ctx.request, place.mounts
        name = workload.workflow.job_name(workload.model_name)
        return JobSetup(
            name,
            Container(place.image, name, mounts.entries, mounts.project),
            mounts.models_root,
            header=self.header(workload.workflow.kind),
            secrets=request_secrets(req),
            passthrough_env=script_custom_env(req)[1],
            job_dir=place.job_dir,
        )

    def script_name(self, setup: JobSetup) -> str:
        return SCRIPT_NAME

    def spec_fields(self, ctx: Context, job: ScriptJob) -> dict[str, Any]:
        (docker_run,) = [node for node in job.tree.body if isinstance(node, DockerRun)]
        log = posixpath.join(ctx.request.work_dir, f"{job.workload.model_name}_local.log")
        return {"docker_cmd": render_one_line(docker_run), "log_file": log}

    def step_shape(self, shape: TaskShape) -> TaskShape:
        return TaskShape()  # one process in the container: no MPI, no per-task steps

    def test_records(self, setup: JobSetup) -> str:
        return recording.records_pattern(setup.job_dir, setup.container.name, False)

    def assemble(self, setup: JobSetup, plan: WorkflowPlan) -> tree.ShellScript:
        c = setup.container
        if any(step.records for step in plan.steps):
            c = replace(c, mounts=recording.with_folder(c.mounts, setup.job_dir))
        options = [
            _option("--rm"),
            _option("--network", "host"),
            _option("--ipc", "host"),
            _option("--runtime", "nvidia"),
            _option("--gpus", "all"),
            *(_option("--cap-add", cap) for cap in CAPABILITIES),
            _option("--security-opt", "seccomp=unconfined"),
            _option("--env", f"LLM_MODELS_ROOT={setup.models_root}"),
            *(_option("--env", f"{name}={value}") for name, value in plan.env),
            *(_option("--env", name) for name in setup.passthrough_env),
            *(_option("--volume", volume) for volume in c.mounts),
            _option("--name", c.name),
            _option("--workdir", c.workdir),
        ]
        payload = _payload(plan, setup.secrets, setup.job_dir, self.test_records(setup))
        run = tree.DockerRun(tuple(options), tree.Word.of(c.image), payload)
        return tree.ShellScript(body=(*(tree.Comment(line) for line in setup.header), run))
