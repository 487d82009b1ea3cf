"""The srun ``--mpi`` plugin of a workload step (procedure Step 3, "MPI mode").

One rule for the build and the drop-in CLI alike:

* the cluster's plugin is ``pmix.preferred`` of slurm_env, or bare ``pmix`` when
  it is unset or the probe's fallback path was taken;
* pytest: no ``--mpi`` (unless one is named on the command line);
* eval: always a pmix plugin, even for one task (trtllm-eval inits MPI at import);
* bench: a pmix plugin when the world size is above one, else none;
* custom: the cluster's plugin when it spans several nodes, else none
  (unless one is named on the command line);
* a step without ``--mpi`` on a single node clears the MPI/PMI/Slurm variables.
"""

from __future__ import annotations

from scriptbuilder.inputs.slurm_env import client_tools_missing
from scriptbuilder.models import Partition, SlurmEnv
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


def preferred_plugin(env: SlurmEnv | None, entry: Partition | None) -> str | None:
    """``pmix.preferred``, left unset on the fallback path (no probe, no client tools,
    partition or its arch unknown)."""
    if env is None or client_tools_missing(env) or entry is None or entry.arch is None:
        return None
    return env.pmix.preferred or None


def names_pmix(plugin: str | None) -> bool:
    """True for ``pmix`` and ``pmix_v<digits>``."""
    if plugin is None:
        return False
    return plugin == BARE_PMIX or (plugin[:6] == "pmix_v" and plugin[6:].isdecimal())


def step_mpi(
    kind: str,
    *,
    ntasks: int,
    nodes: int,
    cluster: str | None = None,
    requested: str | None = None,
) -> str | None:
    """The ``--mpi`` of ``kind``'s workload step.

    ``cluster`` is the cluster's plugin when the build knows it (from slurm_env);
    ``requested`` a plugin named on the command line (the drop-in's ``--mpi``).
    Where a pmix plugin is needed, a requested one that names pmix wins over the
    cluster's, then bare ``pmix``; pytest and custom take a requested plugin as is.
    """
    pmix = requested if names_pmix(requested) else cluster or BARE_PMIX
    if kind == "eval":
        # Without a known cluster (the drop-in) a single task keeps no --mpi, as
        # build_slurm_script.py did.
        return pmix if ntasks > 1 or cluster is not None else None
    if kind == "bench":
        return pmix if ntasks > 1 else None
    if requested is not None:
        return requested
    if kind == "custom" and nodes > 1:
        return cluster
    return None


def clears_mpi_env(shape: TaskShape) -> bool:
    """A single-node step without ``--mpi`` runs without the MPI/PMI/Slurm variables."""
    return shape.nodes == 1 and shape.mpi is None
