"""Plain records passed from resolution to the scenarios and workflows.

They hold resolved values only (no file access, no defaults logic), so the
drop-in CLI and the resolution engine can both fill them in.
"""

from __future__ import annotations

from dataclasses import dataclass

from scriptbuilder.script_tree import Statement

#: Variable prefixes stripped inside single-node steps that run without MPI,
#: so a single process does not try to join an MPI world it is not part of.
MPI_ENV_PREFIXES = ("OMPI_", "ORTE_", "OPAL_", "PMI", "PMIX_", "MPI_", "SLURM_")
#: Kept so the workload can still tell its rank.
MPI_ENV_KEEP = ("SLURM_PROCID", "SLURM_LOCALID")


@dataclass(frozen=True)
class TaskShape:
    """Nodes and tasks of a job or a step, and the srun ``--mpi`` plugin of its workload."""

    nodes: int = 1
    ntasks: int = 1
    ntasks_per_node: int = 1
    mpi: str | None = None


@dataclass(frozen=True)
class Step:
    """One unit of work run inside the container.

    ``body`` is the shell code of the step; user values never appear in it:
    they travel in ``args`` and the body refers to them as ``"$1"``...
    """

    label: str
    body: tuple[Statement, ...]
    shape: TaskShape
    args: tuple[str, ...] = ()
    clear_mpi_env: bool = False


@dataclass(frozen=True)
class Container:
    image: str
    name: str
    mounts: str
    workdir: str


@dataclass(frozen=True)
class SlurmAllocation:
    """What goes into the ``#SBATCH`` lines."""

    job_name: str
    partition: str
    account: str
    time_limit: str
    nodes: int
    ntasks: int
    ntasks_per_node: int
    gres: str | None
    log_dir: str


@dataclass(frozen=True)
class WorkflowPlan:
    """What a workflow asks the scenario to run: exports, then steps in order."""

    env: tuple[tuple[str, str], ...]
    steps: tuple[Step, ...]
