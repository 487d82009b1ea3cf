"""The abstract scenario: where a job runs (one per ``execution_scenario``, in
:mod:`scriptbuilder.scenarios.registry`).

A scenario holds no job of its own: it says, for a request, what to check first, the
home and project folders on the execution host, the architecture and the image form,
where the workload is placed and its logs go, its job_spec.json fields and which
lifecycle backend starts the job; and it lays a workflow's plan into a script tree.
"""

from __future__ import annotations

import posixpath
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from scriptbuilder.errors import BuildError
from scriptbuilder.models.job_spec import JobSpec
from scriptbuilder.models.slurm_env import SlurmEnv
from scriptbuilder.resolution.context import Context
from scriptbuilder.resolution.mounts import Mounts, local_project
from scriptbuilder.resolution.secrets import mask
from scriptbuilder.resolution.slurm_params import SlurmTarget
from scriptbuilder.resolution.workloads import Placement
from scriptbuilder.script.plan import JobSetup, Step, TaskShape, WorkflowPlan
from scriptbuilder.script.render import one_line_command, render_inline
from scriptbuilder.script.tree import SbatchScript, ShellScript
from scriptbuilder.version import __version__
from scriptbuilder.workflows.base import Workload
from scriptbuilder.workflows.perf_sanity import SubmitLogin

if TYPE_CHECKING:
    from scriptbuilder.models.request import BuildRequest

BANNER_PREFIX = "==> "
PRINT_LINE = "%s\\n"
GENERATOR = f"scriptbuilder {__version__}"
#: The lifecycle backends (:mod:`scriptbuilder.lifecycle.backends`) that start a job.
BackendKind = Literal["sbatch", "persistent", "docker"]
#: Reads slurm_env.json: the model and the raw document.
SlurmEnvReader = Callable[[str], tuple[SlurmEnv, dict[str, Any]]]


def step_banner(step: Step, secrets: tuple[str, ...] = ()) -> str:
    """``==> <label>: <command>``, the command as shell text that runs the same
    argv when pasted into bash; secret values shown as ``***``."""
    command = step.command if step.command is not None else render_inline(step.body)
    return mask(f"{BANNER_PREFIX}{step.label}: {one_line_command(command)}", secrets)


def check_local_custom_script(ctx: Context) -> None:
    """custom_script names a file on this machine, which must exist."""
    script = ctx.request.custom_script
    if script and not Path(script).is_file():
        raise BuildError(f"custom_script {script} does not exist; pass an existing script")


@dataclass(frozen=True)
class ScriptJob:
    """A script job as its scenario set it up: ``workload`` at ``place`` in ``setup``,
    laid out as ``tree``."""

    place: Placement
    workload: Workload
    setup: JobSetup
    tree: SbatchScript | ShellScript


class Scenario(ABC):
    """``name`` is the ``execution_scenario`` value. Instances hold nothing: the
    registry keeps one of each."""

    name: ClassVar[str]
    #: Request fields taken from an earlier job_spec.json when the request has none.
    from_earlier: ClassVar[tuple[str, ...]] = ()
    #: How the lifecycle reaches the scheduler: ``local`` (this machine) or ``ssh``
    #: (a login node).
    transport: ClassVar[str] = "local"

    # ---------------------------------------------------------------- the request

    @abstractmethod
    def check_request(self, ctx: Context) -> None:
        """Refuse what this scenario cannot run, before anything is resolved."""

    @abstractmethod
    def load_inputs(self, ctx: Context, read_slurm_env: SlurmEnvReader) -> None:
        """Read what the scenario resolves against into ``ctx`` (slurm_env.json)."""

    @abstractmethod
    def arch(self, ctx: Context) -> str:
        """The architecture that selects the image of the properties file."""

    @abstractmethod
    def image(self, ctx: Context) -> str:
        """The image in the form this scenario's container runtime takes (Step 1)."""

    @abstractmethod
    def home(self, ctx: Context) -> str:
        """The home folder on the execution host (mounted as itself)."""

    def project(self, ctx: Context) -> str:
        """The checkout on the execution host."""
        return local_project(ctx)

    @abstractmethod
    def placement(self, ctx: Context, image: str, mounts: Mounts) -> Placement:
        """Where the workload runs: the partition or the machine, and its GPUs."""

    def submit_target(self, place: Placement, refusal: str) -> SlurmTarget:
        """The partition submit.py writes its launch script for; a scenario without
        Slurm refuses with the message ``refusal``."""
        raise BuildError(refusal)

    def submit_login(self, ctx: Context) -> SubmitLogin | None:
        """The login node submit.py runs on (None: this machine)."""
        return None

    def job_spec_fields(self, ctx: Context) -> dict[str, Any]:
        """The job_spec.json fields that say where the job runs."""
        return {"execution_scenario": self.name, "scenario": self.name}

    def connection_fallback(self, ctx: Context) -> Mapping[str, Any]:
        """Connection fields (ssh_host, ...) for job_spec.json when neither the request
        nor an earlier job_spec.json has them."""
        return {}

    @abstractmethod
    def backend(self, spec: JobSpec) -> BackendKind:
        """The lifecycle backend that starts a job built here (``spec``: its
        job_spec.json): ``sbatch``, ``persistent`` or ``docker``."""

    # --------------------------------------------------------------- a campaign

    @abstractmethod
    def campaign_room(
        self, req: BuildRequest, read_slurm_env: SlurmEnvReader
    ) -> tuple[int, int | None, str]:
        """The nodes and GPUs per node (None: not known) a campaign's jobs can have
        here, and where that is (for messages)."""

    @abstractmethod
    def campaign_time_limit(self, req: BuildRequest) -> str | None:
        """The time limit each job of a campaign must fit (None: no limit)."""

    @abstractmethod
    def campaign_fields(self, req: BuildRequest, slurm_env: str) -> dict[str, Any]:
        """Request fields every job of a campaign shares (``slurm_env``: the
        campaign's slurm_env.json)."""

    # ------------------------------------------------------------ the script job

    def header(self, kind: str) -> tuple[str, ...]:
        return (f"Generated by {GENERATOR}: {kind} job, {self.name}.",)

    @abstractmethod
    def setup(self, ctx: Context, place: Placement, workload: Workload) -> JobSetup:
        """The container, allocation and names of ``workload``'s script job."""

    @abstractmethod
    def script_name(self, setup: JobSetup) -> str:
        """The file name of the script in work_dir."""

    def script_path(self, ctx: Context, setup: JobSetup) -> str:
        return posixpath.join(ctx.request.work_dir, self.script_name(setup))

    @abstractmethod
    def spec_fields(self, ctx: Context, job: ScriptJob) -> dict[str, Any]:
        """The job_spec.json fields of the script job (besides those every job has)."""

    @abstractmethod
    def test_records(self, setup: JobSetup) -> str:
        """Where a recording step's records go (job_spec.json ``test_records``, ``%j``
        the job id): the job's log folder (:mod:`scriptbuilder.scenarios.recording`)."""

    def step_shape(self, shape: TaskShape) -> TaskShape:
        """The task layout the workflow plans its steps for, given the workload's."""
        return shape

    @abstractmethod
    def assemble(self, setup: JobSetup, plan: WorkflowPlan) -> SbatchScript | ShellScript:
        """The script tree of ``plan`` in ``setup``."""
