"""Pytest: one step running the test command (always a single node)."""

from __future__ import annotations

from scriptbuilder.job.plan import Step, TaskShape
from scriptbuilder.workflows.base import Workflow, run_user_command, single_node_without_mpi


class PytestWorkflow(Workflow):
    kind = "pytest"
    job_suffix = "auto_test"

    def __init__(self, test_cmd: str) -> None:
        self.test_cmd = test_cmd

    def workload_steps(self, shape: TaskShape) -> tuple[Step, ...]:
        return (
            Step(
                label="run the tests",
                body=run_user_command(),
                shape=shape,
                args=(self.test_cmd,),
                clear_mpi_env=single_node_without_mpi(shape),
            ),
        )
