"""Pytest: one step running the test command (always a single node)."""

from __future__ import annotations

from dataclasses import replace

from scriptbuilder.job.plan import Step, TaskShape
from scriptbuilder.script.render import render_inline
from scriptbuilder.script.tree import Command, Export, Run, Statement, Word
from scriptbuilder.workflows.base import Workflow, user_command_step


class PytestWorkflow(Workflow):
    """``workdir``: where the step runs when that is not the container's working
    directory (``cd`` first); ``visible_devices``: the ``CUDA_VISIBLE_DEVICES`` the
    step exports when the tests need an exact GPU count nobody else enforces."""

    kind = "pytest"
    job_suffix = "auto_test"

    def __init__(
        self, test_cmd: str, *, workdir: str | None = None, visible_devices: str | None = None
    ) -> None:
        self.test_cmd = test_cmd
        self.workdir = workdir
        self.visible_devices = visible_devices

    def workload_steps(self, shape: TaskShape) -> tuple[Step, ...]:
        step = user_command_step("run the tests", self.test_cmd, shape)
        before: list[Statement] = []
        if self.visible_devices is not None:
            before.append(Export("CUDA_VISIBLE_DEVICES", Word.of(self.visible_devices)))
        if self.workdir is not None:
            before.append(Run(Command.of("cd", self.workdir)))
        if before:
            shown = f"{render_inline(tuple(before))}; {step.command}"
            step = replace(step, body=(*before, *step.body), command=shown)
        return (step,)
