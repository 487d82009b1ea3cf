"""Pytest: one step running the test command (always a single node)."""

from __future__ import annotations

from scriptbuilder.job.plan import Step, TaskShape
from scriptbuilder.workflows.base import Workflow, user_command_step


class PytestWorkflow(Workflow):
    kind = "pytest"
    job_suffix = "auto_test"

    def __init__(self, test_cmd: str) -> None:
        self.test_cmd = test_cmd

    def workload_steps(self, shape: TaskShape) -> tuple[Step, ...]:
        return (user_command_step("run the tests", self.test_cmd, shape),)
