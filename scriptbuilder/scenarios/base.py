"""The abstract scenario: where and how a workflow's steps are launched."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scriptbuilder.job.plan import TaskShape, WorkflowPlan
    from scriptbuilder.script.tree import SbatchScript, ShellScript


class Scenario(ABC):
    """``name`` is the ``execution_scenario`` value; ``assemble`` builds the tree."""

    name: str

    def step_shape(self, shape: TaskShape) -> TaskShape:
        """The task layout the workflow plans its steps for, given the workload's."""
        return shape

    @abstractmethod
    def assemble(self, plan: WorkflowPlan) -> SbatchScript | ShellScript:
        """The script tree that runs ``plan``."""
