"""The abstract scenario: where and how a workflow's steps are launched."""

from __future__ import annotations

from abc import ABC, abstractmethod

from scriptbuilder.resolution.secrets import mask
from scriptbuilder.script.plan import Step, TaskShape, WorkflowPlan
from scriptbuilder.script.render import one_line_command, render_inline
from scriptbuilder.script.tree import SbatchScript, ShellScript

BANNER_PREFIX = "==> "
PRINT_LINE = "%s\\n"


def step_banner(step: Step, secrets: tuple[str, ...] = ()) -> str:
    """``==> <label>: <command>``, the command as shell text that runs the same
    argv when pasted into bash; secret values shown as ``***``."""
    command = step.command if step.command is not None else render_inline(step.body)
    return mask(f"{BANNER_PREFIX}{step.label}: {one_line_command(command)}", secrets)


class Scenario(ABC):
    """``name`` is the ``execution_scenario`` value; ``assemble`` builds the tree."""

    name: str

    def step_shape(self, shape: TaskShape) -> TaskShape:
        """The task layout the workflow plans its steps for, given the workload's."""
        return shape

    @abstractmethod
    def assemble(self, plan: WorkflowPlan) -> SbatchScript | ShellScript: ...
