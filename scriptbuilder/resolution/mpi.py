"""The srun ``--mpi`` plugin of a workload step (procedure Step 3, "MPI mode"),
one rule for the build and the drop-in CLI alike."""

from __future__ import annotations

import re

from scriptbuilder.script.plan import TaskShape

BARE_PMIX = "pmix"
#: Variable prefixes stripped inside single-node steps that run without MPI,
#: so a single process does not try to join an MPI world it is not part of.
MPI_ENV_PREFIXES = ("OMPI_", "ORTE_", "OPAL_", "PMI", "MPI_", "SLURM_")  # PMI covers PMIX_
#: Kept so the workload can still tell its rank.
MPI_ENV_KEEP = ("SLURM_PROCID", "SLURM_LOCALID")
#: Why a workflow's step gets the plugin it gets (for ``--explain``).
RULES = {
    "pytest": "pytest: no --mpi (always single-node)",
    "eval": "eval: always the pmix plugin (trtllm-eval inits MPI)",
    "bench": "bench: the pmix plugin when world size > 1",
    "custom": "custom: the pmix plugin when multi-node",
}


def names_pmix(plugin: str | None) -> bool:
    """True for ``pmix`` and ``pmix_v<digits>``."""
    return plugin is not None and re.fullmatch(r"pmix(_v\d+)?", plugin) is not None


def step_mpi(
    kind: str, *, ntasks: int, nodes: int, cluster: str | None = None, requested: str | None = None
) -> str | None:
    """The ``--mpi`` of ``kind``'s workload step, given the cluster's plugin when
    known (from slurm_env) and one named on the drop-in's command line. Where a
    pmix plugin is needed, a requested one that names pmix wins over the
    cluster's, then bare ``pmix``; pytest and custom take a requested plugin as is."""
    pmix = requested if names_pmix(requested) else cluster or BARE_PMIX
    if kind == "eval":  # trtllm-eval initialises MPI when it loads, even for one task
        return pmix
    if kind == "bench":
        return pmix if ntasks > 1 else None
    if requested is not None:
        return requested
    return cluster if kind == "custom" and nodes > 1 else None


def clears_mpi_env(shape: TaskShape) -> bool:
    """A single-node step without ``--mpi`` runs without the MPI/PMI/Slurm variables."""
    return shape.nodes == 1 and shape.mpi is None
