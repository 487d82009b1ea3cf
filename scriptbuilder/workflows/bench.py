"""Bench: an optional prepare-dataset step, then the trtllm-bench run."""

from __future__ import annotations

from scriptbuilder.job.plan import Step, TaskShape
from scriptbuilder.workflows.base import (
    Workflow,
    run_user_command,
    run_user_command_under_launcher,
    single_node_without_mpi,
    starts_with_launcher,
)


class BenchWorkflow(Workflow):
    """``prep_cmd`` and ``run_cmd`` are the two halves of ``bench_cmd`` split at
    its top-level ``&&`` (``prep_cmd`` empty when there is none)."""

    kind = "bench"
    job_suffix = "bench"
    success_patterns = ("Throughput", "Request Throughput")

    def __init__(self, prep_cmd: str, run_cmd: str) -> None:
        self.prep_cmd = prep_cmd
        self.run_cmd = run_cmd

    def workload_steps(self, shape: TaskShape) -> tuple[Step, ...]:
        steps = []
        if self.prep_cmd:
            one = TaskShape()
            steps.append(
                Step(
                    label="prepare the dataset",
                    body=run_user_command(),
                    shape=one,
                    args=(self.prep_cmd,),
                    clear_mpi_env=True,
                )
            )
        multi = shape.ntasks > 1 and not starts_with_launcher(self.run_cmd)
        steps.append(
            Step(
                label="run the benchmark",
                body=run_user_command_under_launcher() if multi else run_user_command(),
                shape=shape,
                args=(self.run_cmd,),
                clear_mpi_env=single_node_without_mpi(shape),
            )
        )
        return tuple(steps)
