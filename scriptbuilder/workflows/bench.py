"""Bench: an optional prepare-dataset step, then the trtllm-bench run."""

from __future__ import annotations

from scriptbuilder.job.plan import Step, TaskShape
from scriptbuilder.workflows.base import Workflow, user_command_step


class BenchWorkflow(Workflow):
    """``prep_cmd`` and ``run_cmd`` are the two halves of ``bench_cmd`` split at
    its top-level ``&&`` (``prep_cmd`` empty when there is none)."""

    kind = "bench"
    job_suffix = "bench"
    success_patterns = ("token/s", "throughput")

    def __init__(self, prep_cmd: str, run_cmd: str) -> None:
        self.prep_cmd = prep_cmd
        self.run_cmd = run_cmd

    def workload_steps(self, shape: TaskShape) -> tuple[Step, ...]:
        run = user_command_step("run the benchmark", self.run_cmd, shape, launcher=True)
        if not self.prep_cmd:
            return (run,)
        # One task on one node, without MPI.
        return (user_command_step("prepare the dataset", self.prep_cmd, TaskShape()), run)
