"""Plain values passed from resolution to the scenarios and workflows.

They hold resolved values only (no file access, no defaults logic), so the
drop-in CLI and the resolution engine can both fill them in.
"""

from __future__ import annotations

from dataclasses import dataclass

from scriptbuilder.script.tree import Statement


@dataclass(frozen=True, slots=True)
class TaskShape:
    """Nodes and tasks of a job or a step, and the srun ``--mpi`` plugin of its workload."""

    nodes: int = 1
    ntasks: int = 1
    ntasks_per_node: int = 1
    mpi: str | None = None


@dataclass(frozen=True, slots=True)
class Step:
    """One unit of work run inside the container.

    ``body`` is the shell code of the step; user values never appear in it:
    they travel in ``args`` and the body refers to them as ``"$1"``...
    ``command`` is the shell text of what the step runs, for the line the step
    prints first (default: the body with its arguments in place).
    """

    label: str
    body: tuple[Statement, ...]
    shape: TaskShape
    args: tuple[str, ...] = ()
    clear_mpi_env: bool = False
    command: str | None = None


@dataclass(frozen=True, slots=True)
class Container:
    image: str
    name: str
    mounts: str
    workdir: str


@dataclass(frozen=True, slots=True)
class SlurmAllocation:
    """What goes into the ``#SBATCH`` lines (``tasks`` without its ``mpi``).

    The log files are ``<log_dir>/<log_name>_%j.out|.err``; ``log_name`` defaults
    to ``job_name``."""

    job_name: str
    partition: str
    account: str
    time_limit: str
    tasks: TaskShape
    gres: str | None
    log_dir: str
    log_name: str | None = None


@dataclass(frozen=True, slots=True)
class WorkflowPlan:
    """What a workflow asks the scenario to run: exports, then steps in order."""

    env: tuple[tuple[str, str], ...]
    steps: tuple[Step, ...]
