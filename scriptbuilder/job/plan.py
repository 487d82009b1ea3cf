"""Plain records passed from resolution to the scenarios and workflows.

They hold resolved values only (no file access, no defaults logic), so the
drop-in CLI and the resolution engine can both fill them in.

Immutable values like frozen dataclasses (equal and hashable by their fields),
written as slotted classes because the drop-in CLI imports this module on
every call: defining dataclasses costs milliseconds (and imports
:mod:`inspect`). Fields are ``Final`` (mypy refuses assignments).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import ClassVar, Final

    from scriptbuilder.script.tree import Statement

#: Variable prefixes stripped inside single-node steps that run without MPI,
#: so a single process does not try to join an MPI world it is not part of.
MPI_ENV_PREFIXES = ("OMPI_", "ORTE_", "OPAL_", "PMI", "MPI_", "SLURM_")  # PMI covers PMIX_
#: Kept so the workload can still tell its rank.
MPI_ENV_KEEP = ("SLURM_PROCID", "SLURM_LOCALID")


class _Record:
    """Equality, hash and repr from ``_fields``, as a frozen dataclass has them."""

    __slots__ = ()
    _fields: ClassVar[tuple[str, ...]] = ()

    def _values(self) -> tuple[object, ...]:
        return tuple([getattr(self, name) for name in self._fields])

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self is other or self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{self.__class__.__name__}({fields})"


class TaskShape(_Record):
    """Nodes and tasks of a job or a step, and the srun ``--mpi`` plugin of its workload."""

    __slots__ = ("mpi", "nodes", "ntasks", "ntasks_per_node")
    _fields = ("nodes", "ntasks", "ntasks_per_node", "mpi")

    def __init__(
        self, nodes: int = 1, ntasks: int = 1, ntasks_per_node: int = 1, mpi: str | None = None
    ) -> None:
        self.nodes: Final = nodes
        self.ntasks: Final = ntasks
        self.ntasks_per_node: Final = ntasks_per_node
        self.mpi: Final = mpi


class Step(_Record):
    """One unit of work run inside the container.

    ``body`` is the shell code of the step; user values never appear in it:
    they travel in ``args`` and the body refers to them as ``"$1"``...
    """

    __slots__ = ("args", "body", "clear_mpi_env", "label", "shape")
    _fields = ("label", "body", "shape", "args", "clear_mpi_env")

    def __init__(
        self,
        label: str,
        body: tuple[Statement, ...],
        shape: TaskShape,
        args: tuple[str, ...] = (),
        clear_mpi_env: bool = False,
    ) -> None:
        self.label: Final = label
        self.body: Final = body
        self.shape: Final = shape
        self.args: Final = args
        self.clear_mpi_env: Final = clear_mpi_env


class Container(_Record):
    __slots__ = ("image", "mounts", "name", "workdir")
    _fields = ("image", "name", "mounts", "workdir")

    def __init__(self, image: str, name: str, mounts: str, workdir: str) -> None:
        self.image: Final = image
        self.name: Final = name
        self.mounts: Final = mounts
        self.workdir: Final = workdir


class SlurmAllocation(_Record):
    """What goes into the ``#SBATCH`` lines."""

    __slots__ = (
        "account",
        "gres",
        "job_name",
        "log_dir",
        "nodes",
        "ntasks",
        "ntasks_per_node",
        "partition",
        "time_limit",
    )
    _fields = (
        "job_name",
        "partition",
        "account",
        "time_limit",
        "nodes",
        "ntasks",
        "ntasks_per_node",
        "gres",
        "log_dir",
    )

    def __init__(
        self,
        job_name: str,
        partition: str,
        account: str,
        time_limit: str,
        nodes: int,
        ntasks: int,
        ntasks_per_node: int,
        gres: str | None,
        log_dir: str,
    ) -> None:
        self.job_name: Final = job_name
        self.partition: Final = partition
        self.account: Final = account
        self.time_limit: Final = time_limit
        self.nodes: Final = nodes
        self.ntasks: Final = ntasks
        self.ntasks_per_node: Final = ntasks_per_node
        self.gres: Final = gres
        self.log_dir: Final = log_dir


class WorkflowPlan(_Record):
    """What a workflow asks the scenario to run: exports, then steps in order."""

    __slots__ = ("env", "steps")
    _fields = ("env", "steps")

    def __init__(self, env: tuple[tuple[str, str], ...], steps: tuple[Step, ...]) -> None:
        self.env: Final = env
        self.steps: Final = steps
