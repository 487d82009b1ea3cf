"""The route of a request, chosen once: a ``docker run``, a Slurm batch script
of workflow steps, or the checkout's submit.py (perf-sanity, benchmark, and an
eval wider than one node run as an accuracy benchmark)."""

from __future__ import annotations

from typing import NamedTuple

from scriptbuilder.errors import BuildError
from scriptbuilder.resolution.context import Context
from scriptbuilder.resolution.mounts import Mounts
from scriptbuilder.resolution.slurm_params import SlurmTarget
from scriptbuilder.resolution.workloads import Placement
from scriptbuilder.workflows.base import Workflow, Workload
from scriptbuilder.workflows.bench import BenchWorkflow
from scriptbuilder.workflows.custom import CustomWorkflow
from scriptbuilder.workflows.eval import EvalWorkflow
from scriptbuilder.workflows.perf_sanity import PerfSanityWorkflow
from scriptbuilder.workflows.pytest_workflow import PytestWorkflow

#: The Slurm workflows (perf-sanity requests: :meth:`PerfSanityWorkflow.wanted`).
WORKFLOWS: dict[str, type[Workflow]] = {
    w.kind: w for w in (PytestWorkflow, EvalWorkflow, BenchWorkflow, CustomWorkflow)
}


class Route(NamedTuple):
    """The resolved workload and where it runs (``place.target`` is None under Docker)."""

    place: Placement
    workload: Workload


def choose_route(ctx: Context, image: str, mounts: Mounts, target: SlurmTarget | None) -> Route:
    """``target`` is None under Docker."""
    req = ctx.request
    place = Placement.of(ctx, image, mounts, target)
    workflow = (
        PerfSanityWorkflow if PerfSanityWorkflow.wanted(ctx) else WORKFLOWS[req.workflow_type]
    )
    if workflow is PerfSanityWorkflow and target is None:
        kind = req.workflow_type
        what = f"workflow_type {kind}" if kind != "pytest" else "a perf-sanity test_cmd"
        raise BuildError(
            f"{what} needs Slurm (submit.py writes a Slurm launch script); use "
            "execution_scenario local_slurm or remote_slurm"
        )
    wide = EvalWorkflow.wider_than_a_node(ctx, place) if workflow is EvalWorkflow else None
    if wide is None:
        return Route(place, workflow.resolve(ctx, place))
    world, gpn = wide
    if target is None:
        raise BuildError(
            f"eval_cmd: world size {world} exceeds the {gpn} GPUs "
            "of this machine, and a wider eval runs as an accuracy benchmark through "
            "submit.py, which needs Slurm; use execution_scenario local_slurm or "
            f"remote_slurm, or lower --tp_size x --pp_size to at most {gpn}"
        )
    ctx.trace.warn(
        f"eval world size {world} exceeds gpus_per_node {gpn}: "
        "running it as an accuracy benchmark through submit.py"
    )
    return Route(place, PerfSanityWorkflow.resolve(ctx, place, EvalWorkflow.sized(ctx)[3]))
