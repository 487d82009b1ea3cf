"""Where a scenario meets a workflow: the script tree of a workflow's steps laid out
by a scenario in a job setup (container, allocation, names), and its text. The one
way a build's script is made: the request path (:mod:`scriptbuilder.job.assemble`,
with the setup the scenario resolves) and the drop-in (with the setup its flags
give) both compose it here."""

from __future__ import annotations

from dataclasses import dataclass

from scriptbuilder.scenarios.base import Scenario
from scriptbuilder.script.plan import JobSetup, TaskShape, WorkflowPlan
from scriptbuilder.script.render import render
from scriptbuilder.script.tree import SbatchScript, ShellScript
from scriptbuilder.workflows.base import Workflow


@dataclass(frozen=True)
class JobBuilder:
    """``workflow`` says what runs on ``shape``; ``scenario`` says how (and which task
    layout the steps get: one process under Docker), in ``setup``."""

    scenario: Scenario
    workflow: Workflow
    shape: TaskShape
    setup: JobSetup
    install: bool = True

    def plan(self) -> WorkflowPlan:
        return self.workflow.plan(self.scenario.step_shape(self.shape), install=self.install)

    def build(self) -> SbatchScript | ShellScript:
        return self.scenario.assemble(self.setup, self.plan())

    def render(self) -> str:
        return render(self.build())
