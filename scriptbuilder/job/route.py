"""The route of a request, chosen once: a script of a workflow's steps laid out by
the scenario (:class:`ScriptRoute`), or the checkout's submit.py writing the launch
script (:class:`SubmitRoute`: perf-sanity, benchmark, and an eval wider than one
node run as an accuracy benchmark). :mod:`scriptbuilder.job.assemble` matches it."""

from __future__ import annotations

from dataclasses import dataclass

from scriptbuilder.resolution.context import Context
from scriptbuilder.resolution.mounts import Mounts
from scriptbuilder.resolution.slurm_params import SlurmTarget
from scriptbuilder.resolution.workloads import Placement
from scriptbuilder.scenarios.base import Scenario
from scriptbuilder.workflows.base import Workload
from scriptbuilder.workflows.perf_sanity import PerfSanityJob
from scriptbuilder.workflows.registry import WORKFLOWS


@dataclass(frozen=True)
class ScriptRoute:
    """``workload``'s steps in a script ``scenario`` lays out at ``place``."""

    scenario: Scenario
    place: Placement
    workload: Workload


@dataclass(frozen=True)
class SubmitRoute:
    """submit.py run for ``job``, its launch script on the partition ``target``."""

    scenario: Scenario
    place: Placement
    target: SlurmTarget
    job: PerfSanityJob


Route = ScriptRoute | SubmitRoute


def choose_route(ctx: Context, scenario: Scenario, image: str, mounts: Mounts) -> Route:
    """The route of ``ctx.request`` under ``scenario``."""
    req = ctx.request
    place = scenario.placement(ctx, image, mounts)
    if PerfSanityJob.wanted(ctx):
        kind = req.workflow_type
        what = f"workflow_type {kind}" if kind != "pytest" else "a perf-sanity test_cmd"
        refusal = (
            f"{what} needs Slurm (submit.py writes a Slurm launch script); use "
            "execution_scenario local_slurm or remote_slurm"
        )
        target = scenario.submit_target(place, refusal)
        job = PerfSanityJob.resolve(ctx, place, scenario.submit_login)
        return SubmitRoute(scenario, place, target, job)
    workflow = WORKFLOWS[req.workflow_type]
    overflow = workflow.overflow(ctx, place)
    if overflow is None:
        return ScriptRoute(scenario, place, workflow.resolve(ctx, place))
    target = scenario.submit_target(place, overflow.refusal)
    ctx.trace.warn(overflow.warning)
    job = PerfSanityJob.resolve(ctx, place, scenario.submit_login, overflow.model_name())
    return SubmitRoute(scenario, place, target, job)
