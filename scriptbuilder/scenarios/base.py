"""The abstract scenario: where and how a workflow's steps are launched."""

from __future__ import annotations

from abc import ABC, abstractmethod

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import ClassVar

    from scriptbuilder.job.plan import WorkflowPlan
    from scriptbuilder.script.tree import SbatchScript, ShellScript


class Scenario(ABC):
    """``name`` is the ``execution_scenario`` value; ``assemble`` builds the tree."""

    name: ClassVar[str]

    @abstractmethod
    def assemble(self, plan: WorkflowPlan) -> SbatchScript | ShellScript:
        """The script tree that runs ``plan``."""
