"""Composes a scenario and a workflow into a script tree."""

from __future__ import annotations

from scriptbuilder.script.render import render

TYPE_CHECKING = False
if TYPE_CHECKING:
    from scriptbuilder.job.plan import TaskShape, WorkflowPlan
    from scriptbuilder.scenarios.base import Scenario
    from scriptbuilder.script.tree import SbatchScript, ShellScript
    from scriptbuilder.workflows.base import Workflow


class JobBuilder:
    """``workflow`` says what runs, with the workload ``shape``; ``scenario`` says how."""

    def __init__(self, scenario: Scenario, workflow: Workflow, shape: TaskShape) -> None:
        self.scenario = scenario
        self.workflow = workflow
        self.shape = shape

    def plan(self) -> WorkflowPlan:
        return self.workflow.plan(self.shape)

    def build(self) -> SbatchScript | ShellScript:
        """The script tree."""
        return self.scenario.assemble(self.plan())

    def render(self) -> str:
        """The script text (the tree through the one renderer)."""
        return render(self.build())
