"""Eval: trtllm-eval on a single node, under the launcher when multi-task."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from pathlib import Path

from scriptbuilder.inputs.command_args import (
    EvalArgs,
    FlagValue,
    is_hf_model_id,
    model_name_from,
    parse_eval_cmd,
    replace_flag_value,
)
from scriptbuilder.inputs.model_lookup import find_model_dir
from scriptbuilder.resolution import workloads
from scriptbuilder.resolution.context import Context
from scriptbuilder.resolution.mounts import Mounts
from scriptbuilder.resolution.mpi import MpiRule
from scriptbuilder.resolution.workloads import Placement
from scriptbuilder.script.plan import Step, TaskShape
from scriptbuilder.script.render import quote_literal
from scriptbuilder.script.tree import Command, If, Run, Statement
from scriptbuilder.workflows.base import Overflow, Workflow, Workload, user_command_step

EVAL_REQUIREMENTS = "examples/trtllm-eval/requirements.txt"


def _rewrite_model(ctx: Context, cmd: str, model: FlagValue, mounts: Mounts) -> str:
    """Point a Hugging Face id at its folder under the models mount, when found."""
    value = model.value
    name = value.rstrip("/").rsplit("/", 1)[-1]
    host = mounts.models_host
    found = find_model_dir(Path(host), name) if host and Path(host).is_dir() else None
    if found is None:
        ctx.trace.warn(
            f"model {value!r} was not found under the models mount ({host or 'host unknown'}, "
            "depth 3); trtllm-eval will try to download it from Hugging Face"
        )
        return cmd
    rel = found.relative_to(host).as_posix()  # type: ignore[arg-type]
    target = posixpath.join(mounts.models_root, rel)
    ctx.trace.chose("--model", target, f"Hugging Face id {value} found at {found}")
    return replace_flag_value(cmd, model, quote_literal(target))


def _args(ctx: Context) -> tuple[str, EvalArgs]:
    cmd = workloads.require(ctx.request.eval_cmd, "eval_cmd", "eval")
    return cmd, workloads.parsed(cmd, parse_eval_cmd)


@dataclass(frozen=True)
class EvalWorkflow(Workflow):
    kind = "eval"
    job_suffix = "eval"
    command_fields = ("eval_cmd",)
    mpi_rule = MpiRule("always", "eval: always the pmix plugin (trtllm-eval inits MPI)")
    success_patterns = ("accuracy:", "score:")

    eval_cmd: str

    @classmethod
    def overflow(cls, ctx: Context, place: Placement) -> Overflow | None:
        """A world wider than one node runs as an accuracy benchmark through submit.py."""
        args = _args(ctx)[1]
        world, gpn = args.tp_size * args.pp_size, args.gpus_per_node or place.gpus_per_node
        if gpn is None or world <= gpn:
            return None
        return Overflow(
            refusal=f"eval_cmd: world size {world} exceeds the {gpn} GPUs "
            "of this machine, and a wider eval runs as an accuracy benchmark through "
            "submit.py, which needs Slurm; use execution_scenario local_slurm or "
            f"remote_slurm, or lower --tp_size x --pp_size to at most {gpn}",
            warning=f"eval world size {world} exceeds gpus_per_node {gpn}: "
            "running it as an accuracy benchmark through submit.py",
            model_name=lambda: cls.sized(ctx)[3],
        )

    @staticmethod
    def sized(ctx: Context) -> tuple[str, EvalArgs, int, str]:
        """The command, its arguments, the world size and the model name."""
        cmd, args = _args(ctx)
        rule = f"--tp_size {args.tp_size} x --pp_size {args.pp_size}"
        world = ctx.trace.chose("required_devices", args.tp_size * args.pp_size, rule)
        derived = model_name_from(args.model.value) if args.model else None
        return cmd, args, world, workloads.model_name(ctx, derived, "last component of --model")

    @classmethod
    def resolve(cls, ctx: Context, place: Placement) -> Workload:
        cmd, args, world, name = cls.sized(ctx)
        workloads.gpus_per_node(ctx, place, args.gpus_per_node, "--gpus_per_node")
        model = args.model
        if model and model.literal and is_hf_model_id(model.value):
            cmd = _rewrite_model(ctx, cmd, model, place.mounts)
        shape = workloads.workload_shape(ctx, place, cls.mpi_rule, 1, world)
        return Workload(cls(cmd), name, world, 1, shape)

    def install_body(self) -> tuple[Statement, ...]:
        """The project, then trtllm-eval's own requirements when the checkout has them."""
        requirements = Run(Command.of("pip", "install", "-r", EVAL_REQUIREMENTS))
        present = Command.of("[", "-f", EVAL_REQUIREMENTS, "]")
        return (*super().install_body(), If(present, (requirements,)))

    def workload_steps(self, shape: TaskShape) -> tuple[Step, ...]:
        return (user_command_step("run the evaluation", self.eval_cmd, shape, launcher=True),)
