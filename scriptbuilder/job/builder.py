"""The one place a scenario meets a workflow: the script tree of a job."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from scriptbuilder.script.render import render

if TYPE_CHECKING:
    from scriptbuilder.job.plan import TaskShape, WorkflowPlan
    from scriptbuilder.scenarios.base import Scenario
    from scriptbuilder.script.tree import SbatchScript, ShellScript
    from scriptbuilder.workflows.base import Workflow


@dataclass(frozen=True)
class JobBuilder:
    """``workflow`` says what runs, with the workload ``shape``; ``scenario`` says how
    (and which task layout the steps get: one process under Docker). ``install``
    False leaves out the workflow's install step."""

    scenario: Scenario
    workflow: Workflow
    shape: TaskShape
    install: bool = True

    def plan(self) -> WorkflowPlan:
        return self.workflow.plan(self.scenario.step_shape(self.shape), install=self.install)

    def build(self) -> SbatchScript | ShellScript:
        """The script tree."""
        return self.scenario.assemble(self.plan())

    def render(self) -> str:
        """The script text (the tree through the one renderer)."""
        return render(self.build())
