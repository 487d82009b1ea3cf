"""Slurm scenarios: an sbatch script with one srun step per workflow step.

Every step after the first runs only when the ones before it succeeded; the
script always prints its closing line and exits with the first failing
step's exit code.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from scriptbuilder.errors import BuildError
from scriptbuilder.job.plan import Container, SlurmAllocation, Step, WorkflowPlan
from scriptbuilder.resolution.mpi import MPI_ENV_KEEP, MPI_ENV_PREFIXES
from scriptbuilder.scenarios.base import Scenario
from scriptbuilder.script.tree import (
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
    ScriptText,
    Srun,
    SrunOption,
    Statement,
    Subst,
    Var,
    Word,
    to_word,
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
        Directive("nodes", str(alloc.tasks.nodes)),
        Directive("ntasks", str(alloc.tasks.ntasks)),
        Directive("ntasks-per-node", str(alloc.tasks.ntasks_per_node)),
    ]
    if alloc.gres:
        lines.append(Directive("gres", alloc.gres))
    lines += [
        Directive("output", log_path(alloc.log_dir, alloc.job_name, "out")),
        Directive("error", log_path(alloc.log_dir, alloc.job_name, "err")),
    ]
    return tuple(lines)


_DASH_L = SrunOption("-l")
_KILL_ON_BAD_EXIT = SrunOption("--kill-on-bad-exit", Word.of("1"))
_CLEAR_MPI_ENV = ClearEnv(MPI_ENV_PREFIXES, MPI_ENV_KEEP)


def _option(name: str, value: str) -> SrunOption:
    return SrunOption(name, Word.of(value))


def _step_script(step: Step) -> Word:
    """The ``bash -c`` argument of a step."""
    body = (_CLEAR_MPI_ENV, *step.body) if step.clear_mpi_env else step.body
    return Word((ScriptText(body),))


def _container_options(container: Container) -> tuple[SrunOption, ...]:
    return (
        _option("--container-image", container.image),
        _option("--container-name", container.name),
        _option("--container-mounts", container.mounts),
        _option("--container-workdir", container.workdir),
        _KILL_ON_BAD_EXIT,
    )


def _srun(step: Step, container_options: tuple[SrunOption, ...]) -> Srun:
    shape = step.shape
    options = [
        _DASH_L,
        _option("--nodes", str(shape.nodes)),
        _option("--ntasks", str(shape.ntasks)),
        _option("--ntasks-per-node", str(shape.ntasks_per_node)),
    ]
    if shape.mpi:
        options.append(_option("--mpi", shape.mpi))
    payload = Command((_BASH, _DASH_C, _step_script(step), _STEP, *[to_word(a) for a in step.args]))
    return Srun((*options, *container_options), payload)


_BASH = Word.of("bash")
_DASH_C = Word.of("-c")
_STEP = Word.of("step")
_STATUS_OK = Command.of("[", Word.of(Var(STATUS)), "-eq", "0", "]")
_BLANK = Blank()
_STATUS_ZERO = Assign(STATUS, Word.of("0"))
_STATUS_FROM_STEP = Assign(STATUS, Word.of(Var("?")))
_JOB_ID = Var("SLURM_JOB_ID", "")
_DATE = Subst(Command.of("date"))


def _echo(*parts: str | Var | Subst) -> Run:
    return Run(Command.of("echo", Word.of(*parts)))


_STARTED = _echo("Job ", _JOB_ID, " started at ", _DATE, " on ", Subst(Command.of("hostname")))
_FINISHED = _echo("Job ", _JOB_ID, " finished at ", _DATE, " with exit code ", Var(STATUS))
_EXIT = Exit(Word.of(Var(STATUS)))


def job_body(
    plan: WorkflowPlan, container: Container, exports: tuple[tuple[str, str], ...]
) -> tuple[Statement, ...]:
    body: list[Statement] = [_BLANK]
    for name, value in (*exports, *plan.env):
        body.append(Export(name, Word.of(value)))
    body += [_BLANK, _STARTED, _STATUS_ZERO]
    container_options = _container_options(container)
    for step in plan.steps:
        run = (Comment(step.label), _srun(step, container_options), _STATUS_FROM_STEP)
        body += [_BLANK, If(_STATUS_OK, run)]
    body += [_BLANK, _FINISHED, _EXIT]
    return tuple(body)


@dataclass(frozen=True)
class SlurmScenario(Scenario):
    """Local and remote Slurm: the script shape is the same, ``name`` and the paths
    in ``allocation`` and ``container`` differ. ``models_root`` is exported as
    ``LLM_MODELS_ROOT`` before the workflow's own variables."""

    name: str
    allocation: SlurmAllocation
    container: Container
    models_root: str
    header: tuple[str, ...] = ()

    def assemble(self, plan: WorkflowPlan) -> SbatchScript:
        exports = (("LLM_MODELS_ROOT", self.models_root),)
        return SbatchScript(
            directives=directives(self.allocation),
            header=tuple(Comment(line) for line in self.header),
            body=job_body(plan, self.container, exports),
        )


#: The two Slurm scenarios, differing by name (and the paths their callers pass).
LocalSlurm = partial(SlurmScenario, "local_slurm")
RemoteSlurm = partial(SlurmScenario, "remote_slurm")
