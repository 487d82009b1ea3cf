"""The srun ``--mpi`` plugin of a workload step (procedure Step 3, "MPI mode"): each
workflow names its :class:`MpiRule`, one rule for the build and the drop-in CLI alike."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from scriptbuilder.script.plan import TaskShape

BARE_PMIX = "pmix"
#: Variable prefixes stripped inside single-node steps that run without MPI,
#: so a single process does not try to join an MPI world it is not part of.
MPI_ENV_PREFIXES = ("OMPI_", "ORTE_", "OPAL_", "PMI", "MPI_", "SLURM_")  # PMI covers PMIX_
#: Kept so the workload can still tell its rank.
MPI_ENV_KEEP = ("SLURM_PROCID", "SLURM_LOCALID")


def names_pmix(plugin: str | None) -> bool:
    """True for ``pmix`` and ``pmix_v<digits>``."""
    return plugin is not None and re.fullmatch(r"pmix(_v\d+)?", plugin) is not None


@dataclass(frozen=True)
class MpiRule:
    """When a workflow's workload step needs a pmix plugin: ``always``, ``parallel``
    (more than one task) or ``never``; ``why`` says so for ``--explain``."""

    pmix: Literal["always", "parallel", "never"]
    why: str

    def plugin(
        self, *, ntasks: int, cluster: str | None = None, requested: str | None = None
    ) -> str | None:
        """The ``--mpi`` given the cluster's plugin when known (from slurm_env) and one
        named on the drop-in's command line. Where a pmix plugin is needed, a requested
        one that names pmix wins over the cluster's, then bare ``pmix``; where none is,
        a requested plugin is taken as is."""
        pmix = requested if names_pmix(requested) else cluster or BARE_PMIX
        if self.pmix == "always" or (self.pmix == "parallel" and ntasks > 1):
            return pmix
        return requested if self.pmix == "never" else None


def clears_mpi_env(shape: TaskShape) -> bool:
    """A single-node step without ``--mpi`` runs without the MPI/PMI/Slurm variables."""
    return shape.nodes == 1 and shape.mpi is None
