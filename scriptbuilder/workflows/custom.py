"""Custom: a user command run once per task through a run script."""

from __future__ import annotations

import math
import posixpath
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from scriptbuilder.errors import BuildError
from scriptbuilder.inputs.command_check import check_custom_command, check_custom_env
from scriptbuilder.resolution import workloads
from scriptbuilder.resolution.context import Context
from scriptbuilder.resolution.mounts import covered
from scriptbuilder.resolution.mpi import MpiRule, clears_mpi_env
from scriptbuilder.resolution.secrets import script_custom_env
from scriptbuilder.resolution.workloads import Placement
from scriptbuilder.script.plan import Step, TaskShape
from scriptbuilder.script.render import quote_literal
from scriptbuilder.script.tree import Command, Run, Var
from scriptbuilder.workflows.base import Workflow, Workload

if TYPE_CHECKING:
    from scriptbuilder.models.request import BuildRequest

RUN_SCRIPT_NAME = "slurm_run_custom.sh"
PACKAGED_RUN_SCRIPT = Path(__file__).resolve().parent.parent / "data" / RUN_SCRIPT_NAME


@dataclass(frozen=True)
class CustomWorkflow(Workflow):
    """The run script applies ``CUSTOM_ENV``, changes to ``CUSTOM_WORKDIR`` and runs
    ``CUSTOM_COMMAND`` once; with ``run_script`` None it travels inside the batch
    script, otherwise ``bash <run_script>`` runs a copy written to work_dir."""

    kind = "custom"
    job_suffix = "custom"
    command_fields = ("custom_cmd",)
    #: One node (see resolve); the drop-in's --mpi is taken as asked.
    mpi_rule = MpiRule("never", "custom: no --mpi (a single node)")
    success_patterns = ()
    failure_patterns = ("Error", "Traceback")

    custom_cmd: str
    _: KW_ONLY
    custom_env: str = ""
    custom_workdir: str
    project_path: str
    run_script: str | None = None

    @classmethod
    def check_request(cls, req: BuildRequest) -> None:
        """custom_cmd travels in ``CUSTOM_COMMAND`` (unless custom_script replaces it),
        and custom_env must be ``NAME=VALUE`` words."""
        if req.custom_cmd and not req.custom_script:
            check_custom_command("custom_cmd", req.custom_cmd)
        check_custom_env("custom_env", req.custom_env or "")

    @classmethod
    def resolve(cls, ctx: Context, place: Placement) -> Workload:
        req, trace = ctx.request, ctx.trace
        run_script = None
        if place.files_dir is not None:
            # The executor copies the run script (an extra file) there from work_dir.
            remote = posixpath.join(place.files_dir, RUN_SCRIPT_NAME)
            if not covered(remote, place.mounts.host_sources()):
                raise BuildError(
                    f"remote_work_dir {place.files_dir} is not inside a container mount, "
                    "so the custom run script copied there would be invisible in the "
                    "container; use a remote_work_dir under remote_repo_path"
                )
            run_script = trace.chose(
                "run script", remote, "packaged run script, copied to remote_work_dir"
            )
        if req.custom_script:
            command = trace.chose(
                "custom command", f"bash {quote_literal(req.custom_script)}", "bash <custom_script>"
            )
        else:
            command = workloads.require(req.custom_cmd, "custom_cmd (or custom_script)", "custom")
        rule = "required_devices input" if req.required_devices else "default"
        devices = trace.chose("required_devices", req.required_devices or 1, rule)
        workloads.check_limit(devices, "custom commands")
        gpn = workloads.gpus_per_node(ctx, place)
        rule = f"ceil({devices} / gpus_per_node {gpn})"
        nodes = trace.chose("node_count", math.ceil(devices / gpn), rule)
        if nodes > 1:
            raise BuildError(
                f"required_devices = {devices} requires {nodes} nodes (gpus_per_node = {gpn}), but "
                f"custom commands are limited to 1 node; reduce required_devices to at most {gpn}"
            )
        name = workloads.model_name(ctx, None, "")
        project = place.mounts.project
        workflow = cls(
            command,
            custom_env=script_custom_env(req)[0],
            custom_workdir=project,
            project_path=project,
            run_script=run_script,
        )
        shape = workloads.workload_shape(ctx, place, cls.mpi_rule, nodes, devices)
        return Workload(workflow, name, devices, nodes, shape)

    def extra_files(self) -> tuple[tuple[str, str], ...]:
        if self.run_script is None:
            return ()
        return ((RUN_SCRIPT_NAME, PACKAGED_RUN_SCRIPT.read_text(encoding="utf-8")),)

    def env(self) -> tuple[tuple[str, str], ...]:
        return (
            ("CUSTOM_COMMAND", self.custom_cmd),
            ("CUSTOM_ENV", self.custom_env),
            ("CUSTOM_WORKDIR", self.custom_workdir),
            ("llmSrcNode", self.project_path),
        )

    def workload_steps(self, shape: TaskShape) -> tuple[Step, ...]:
        if self.run_script is None:
            run = Command.of("bash", "-c", Var("1"), RUN_SCRIPT_NAME)
            args = (PACKAGED_RUN_SCRIPT.read_text(encoding="utf-8"),)
        else:
            run, args = Command.of("bash", Var("1")), (self.run_script,)
        label, mpi = "run the custom command", clears_mpi_env(shape)
        return (Step(label, (Run(run),), shape, args, mpi, command=self.custom_cmd),)
