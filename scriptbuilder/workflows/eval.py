"""Eval: trtllm-eval on a single node, under the launcher when multi-task."""

from __future__ import annotations

from scriptbuilder.job.plan import Step, TaskShape
from scriptbuilder.script.tree import Statement
from scriptbuilder.workflows.base import (
    INSTALL_BODY,
    Workflow,
    optional_requirements,
    user_command_step,
)

EVAL_REQUIREMENTS = "examples/trtllm-eval/requirements.txt"
_EVAL_INSTALL_BODY: tuple[Statement, ...] = (
    *INSTALL_BODY,
    optional_requirements(EVAL_REQUIREMENTS),
)


class EvalWorkflow(Workflow):
    kind = "eval"
    job_suffix = "eval"
    success_patterns = ("accuracy:", "score:")

    def __init__(self, eval_cmd: str) -> None:
        self.eval_cmd = eval_cmd

    def install_body(self) -> tuple[Statement, ...]:
        return _EVAL_INSTALL_BODY

    def workload_steps(self, shape: TaskShape) -> tuple[Step, ...]:
        return (user_command_step("run the evaluation", self.eval_cmd, shape, launcher=True),)
