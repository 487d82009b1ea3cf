"""Eval: trtllm-eval on a single node, under the launcher when multi-task."""

from __future__ import annotations

from scriptbuilder.job.plan import Step, TaskShape
from scriptbuilder.script.tree import Statement
from scriptbuilder.workflows.base import (
    INSTALL_BODY,
    Workflow,
    optional_requirements,
    run_user_command,
    run_user_command_under_launcher,
    single_node_without_mpi,
    starts_with_launcher,
)

EVAL_REQUIREMENTS = "examples/trtllm-eval/requirements.txt"
_EVAL_INSTALL_BODY: tuple[Statement, ...] = (
    *INSTALL_BODY,
    optional_requirements(EVAL_REQUIREMENTS),
)


class EvalWorkflow(Workflow):
    kind = "eval"
    job_suffix = "eval"
    success_patterns = ("accuracy:",)

    def __init__(self, eval_cmd: str) -> None:
        self.eval_cmd = eval_cmd

    def install_body(self) -> tuple[Statement, ...]:
        return _EVAL_INSTALL_BODY

    def workload_steps(self, shape: TaskShape) -> tuple[Step, ...]:
        multi = shape.ntasks > 1 and not starts_with_launcher(self.eval_cmd)
        return (
            Step(
                label="run the evaluation",
                body=run_user_command_under_launcher() if multi else run_user_command(),
                shape=shape,
                args=(self.eval_cmd,),
                clear_mpi_env=single_node_without_mpi(shape),
            ),
        )
