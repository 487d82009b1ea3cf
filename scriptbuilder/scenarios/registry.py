"""The scenarios, one per ``execution_scenario`` value (a new one is its module, one
entry here and its value in the request model's ``ExecutionScenario``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scriptbuilder.models.job_spec import JobSpec
from scriptbuilder.scenarios.base import Scenario
from scriptbuilder.scenarios.docker import Docker
from scriptbuilder.scenarios.slurm import LocalSlurm, RemoteSlurm

if TYPE_CHECKING:
    from scriptbuilder.models.request import BuildRequest

SCENARIOS: dict[str, Scenario] = {s.name: s for s in (LocalSlurm(), RemoteSlurm(), Docker())}


def request_scenario(req: BuildRequest) -> Scenario:
    """The scenario ``req`` runs under (the request model allows no other name)."""
    return SCENARIOS[req.execution_scenario]


def spec_scenario(spec: JobSpec) -> Scenario | None:
    """The scenario a job_spec.json names (None: none known)."""
    return SCENARIOS.get(spec.scenario)
