"""Plain resolved values passed from resolution to the scenarios and workflows."""

from __future__ import annotations

from dataclasses import dataclass

from scriptbuilder.script.tree import Statement


@dataclass(frozen=True)
class TaskShape:
    """Nodes and tasks of a job or a step, and the srun ``--mpi`` plugin of its workload."""

    nodes: int = 1
    ntasks: int = 1
    ntasks_per_node: int = 1
    mpi: str | None = None


@dataclass(frozen=True)
class Step:
    """One unit of work run inside the container: ``body`` refers to the user values in
    ``args`` as ``"$1"``...; ``command`` is the text the step prints first."""

    label: str
    body: tuple[Statement, ...]
    shape: TaskShape
    args: tuple[str, ...] = ()
    clear_mpi_env: bool = False
    command: str | None = None
    in_project: bool = False  # runs in the checkout (Container.project), as the install does
    records: bool = False  # runs pytest, whose tests are recorded (scenarios.recording)


@dataclass(frozen=True)
class Container:
    image: str
    name: str
    #: ``SRC:DST[:FLAGS]`` entries.
    mounts: tuple[str, ...]
    workdir: str
    project: str | None = None  # the checkout, when ``workdir`` is another folder

    @property
    def joined_mounts(self) -> str:
        return ",".join(self.mounts)


@dataclass(frozen=True)
class SlurmAllocation:
    """What goes into the ``#SBATCH`` lines; logs are ``<log_dir>/<log_name or job_name>_%j``."""

    job_name: str
    partition: str
    account: str
    time_limit: str
    tasks: TaskShape
    gres: str | None
    log_dir: str
    log_name: str | None = None


@dataclass(frozen=True)
class JobSetup:
    """What a scenario lays a workflow's plan into: the container, the folder exported
    as ``LLM_MODELS_ROOT``, the Slurm allocation (None where no Slurm runs the job),
    the script's header comments, values shown as ``***`` in the step banners,
    variables passed from the host's environment (docker's ``--env NAME``) and the
    seconds of time-limit warning wanted (None: the scenario's default)."""

    job_name: str
    container: Container
    models_root: str
    allocation: SlurmAllocation | None = None
    header: tuple[str, ...] = ()
    secrets: tuple[str, ...] = ()
    passthrough_env: tuple[str, ...] = ()
    timeout_warning: int | None = None
    #: The job's folder where no allocation names one (docker: work_dir): its log, and
    #: a recording step's plugin and records.
    job_dir: str = ""


@dataclass(frozen=True)
class WorkflowPlan:
    """What a workflow asks the scenario to run: exports, then steps in order."""

    env: tuple[tuple[str, str], ...]
    steps: tuple[Step, ...]
