"""Bench: an optional prepare-dataset step, then the trtllm-bench run."""

from __future__ import annotations

from dataclasses import dataclass

from scriptbuilder.errors import BuildError
from scriptbuilder.inputs.command_args import model_name_from, parse_bench_cmd
from scriptbuilder.resolution import workloads
from scriptbuilder.resolution.context import Context
from scriptbuilder.resolution.mpi import MpiRule
from scriptbuilder.resolution.workloads import Placement
from scriptbuilder.script.plan import Step, TaskShape
from scriptbuilder.workflows.base import Workflow, Workload, user_command_step


@dataclass(frozen=True)
class BenchWorkflow(Workflow):
    """``bench_cmd`` split at its top-level ``&&`` (``prep_cmd`` empty without one)."""

    kind = "bench"
    job_suffix = "bench"
    command_fields = ("bench_cmd",)
    mpi_rule = MpiRule("parallel", "bench: the pmix plugin when world size > 1")
    success_patterns = ("token/s", "throughput")

    prep_cmd: str
    run_cmd: str

    @classmethod
    def resolve(cls, ctx: Context, place: Placement) -> Workload:
        cmd = workloads.require(ctx.request.bench_cmd, "bench_cmd", "bench")
        args = workloads.parsed(cmd, parse_bench_cmd)
        rule = f"--tp {args.tp} x --pp {args.pp}"
        world = ctx.trace.chose("required_devices", args.tp * args.pp, rule)
        source = args.model or args.model_path
        derived = model_name_from(source.value) if source else None
        name = workloads.model_name(ctx, derived, "--model/--model_path of trtllm-bench")
        gpn = workloads.gpus_per_node(ctx, place)
        if world > gpn:
            raise BuildError(
                f"bench world size {world} (tp {args.tp} x pp {args.pp}) exceeds gpus_per_node "
                f"{gpn}: multi-node trtllm-bench is not supported; lower --tp/--pp"
            )
        shape = workloads.workload_shape(ctx, place, cls.mpi_rule, 1, world)
        return Workload(cls(args.prep_cmd, args.run_cmd), name, world, 1, shape)

    def workload_steps(self, shape: TaskShape) -> tuple[Step, ...]:
        run = user_command_step("run the benchmark", self.run_cmd, shape, launcher=True)
        if not self.prep_cmd:
            return (run,)
        # One task on one node, without MPI.
        return (user_command_step("prepare the dataset", self.prep_cmd, TaskShape()), run)
