"""Slurm scenarios: an sbatch script with one srun step per workflow step.

Every step after the first runs only when the ones before it succeeded; the
script always prints its closing line and exits with the first failing
step's exit code.
"""

from __future__ import annotations

from typing import ClassVar

from scriptbuilder.errors import BuildError
from scriptbuilder.job import (
    MPI_ENV_KEEP,
    MPI_ENV_PREFIXES,
    Container,
    SlurmAllocation,
    Step,
    WorkflowPlan,
)
from scriptbuilder.scenarios.base import Scenario
from scriptbuilder.script_tree import (
    Assign,
    Blank,
    ClearEnv,
    Command,
    Comment,
    Directive,
    Exit,
    Export,
    If,
    Run,
    SbatchScript,
    Srun,
    SrunOption,
    Statement,
    Subst,
    Var,
    Word,
    inline_bash,
)

STATUS = "rc"


def check_log_name_part(field: str, value: str) -> None:
    """Refuse text sbatch would misread in an --output/--error path: a backslash
    there turns off every %-pattern (so %j would stay literal)."""
    if "\\" in value:
        raise BuildError(
            f"{field} {value!r} contains a backslash, which makes Slurm stop replacing %j in "
            "log file names; remove the backslash"
        )


def log_path(log_dir: str, job_name: str, ext: str) -> str:
    """``<log_dir>/<job_name>_%j.<ext>``; a literal ``%`` is doubled for sbatch."""
    return f"{_escape_pattern(log_dir.rstrip('/'))}/{_escape_pattern(job_name)}_%j.{ext}"


def _escape_pattern(text: str) -> str:
    return text.replace("%", "%%")


def directives(alloc: SlurmAllocation) -> tuple[Directive, ...]:
    lines = [
        Directive("job-name", alloc.job_name),
        Directive("partition", alloc.partition),
        Directive("account", alloc.account),
        Directive("time", alloc.time_limit),
        Directive("nodes", str(alloc.nodes)),
        Directive("ntasks", str(alloc.ntasks)),
        Directive("ntasks-per-node", str(alloc.ntasks_per_node)),
    ]
    if alloc.gres:
        lines.append(Directive("gres", alloc.gres))
    lines += [
        Directive("output", log_path(alloc.log_dir, alloc.job_name, "out")),
        Directive("error", log_path(alloc.log_dir, alloc.job_name, "err")),
    ]
    return tuple(lines)


def srun_step(step: Step, container: Container) -> Srun:
    shape = step.shape
    options = [
        SrunOption("-l"),
        SrunOption("--nodes", Word.of(str(shape.nodes))),
        SrunOption("--ntasks", Word.of(str(shape.ntasks))),
        SrunOption("--ntasks-per-node", Word.of(str(shape.ntasks_per_node))),
    ]
    if shape.mpi:
        options.append(SrunOption("--mpi", Word.of(shape.mpi)))
    options += [
        SrunOption("--container-image", Word.of(container.image)),
        SrunOption("--container-name", Word.of(container.name)),
        SrunOption("--container-mounts", Word.of(container.mounts)),
        SrunOption("--container-workdir", Word.of(container.workdir)),
        SrunOption("--kill-on-bad-exit", Word.of("1")),
    ]
    body: tuple[Statement, ...] = step.body
    if step.clear_mpi_env:
        body = (ClearEnv(MPI_ENV_PREFIXES, MPI_ENV_KEEP), *body)
    return Srun(tuple(options), inline_bash(body, "step", step.args))


def _status_ok() -> Command:
    return Command.of("[", Word.of(Var(STATUS)), "-eq", "0", "]")


def _echo(*parts: str | Var | Subst) -> Run:
    return Run(Command.of("echo", Word.of(*parts)))


def job_body(
    plan: WorkflowPlan, container: Container, exports: tuple[tuple[str, str], ...]
) -> tuple[Statement, ...]:
    job_id = Var("SLURM_JOB_ID", "")
    body: list[Statement] = [Blank()]
    for name, value in (*exports, *plan.env):
        body.append(Export(name, Word.of(value)))
    body += [
        Blank(),
        _echo(
            "Job ",
            job_id,
            " started at ",
            Subst(Command.of("date")),
            " on ",
            Subst(Command.of("hostname")),
        ),
        Assign(STATUS, Word.of("0")),
    ]
    for step in plan.steps:
        run = (Comment(step.label), srun_step(step, container), Assign(STATUS, Word.of(Var("?"))))
        body += [Blank(), If(_status_ok(), run)]
    body += [
        Blank(),
        _echo(
            "Job ",
            job_id,
            " finished at ",
            Subst(Command.of("date")),
            " with exit code ",
            Var(STATUS),
        ),
        Exit(Word.of(Var(STATUS))),
    ]
    return tuple(body)


class SlurmScenario(Scenario):
    """Shared by local and remote Slurm: paths differ, the script shape does not."""

    name: ClassVar[str] = "slurm"

    def __init__(
        self,
        allocation: SlurmAllocation,
        container: Container,
        *,
        exports: tuple[tuple[str, str], ...] = (),
        header: tuple[str, ...] = (),
    ) -> None:
        self.allocation = allocation
        self.container = container
        self.exports = exports
        self.header = header

    def assemble(self, plan: WorkflowPlan) -> SbatchScript:
        return SbatchScript(
            directives=directives(self.allocation),
            header=tuple(Comment(line) for line in self.header),
            body=job_body(plan, self.container, self.exports),
        )


class LocalSlurm(SlurmScenario):
    name = "local_slurm"


class RemoteSlurm(SlurmScenario):
    name = "remote_slurm"
