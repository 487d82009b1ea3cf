"""Slurm scenarios: an sbatch script with one srun step per workflow step.

Every step after the first runs only when the ones before it succeeded; the
script always prints its closing line and exits with the first failing
step's exit code.
"""

from __future__ import annotations

from scriptbuilder.errors import BuildError
from scriptbuilder.job.plan import (
    MPI_ENV_KEEP,
    MPI_ENV_PREFIXES,
    Container,
    SlurmAllocation,
    Step,
    WorkflowPlan,
)
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

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import ClassVar

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


_DASH_L = SrunOption("-l")
_KILL_ON_BAD_EXIT = SrunOption("--kill-on-bad-exit", Word.of("1"))
_CLEAR_MPI_ENV = ClearEnv(MPI_ENV_PREFIXES, MPI_ENV_KEEP)
#: ``(option, value) -> SrunOption`` for the task counts and ``--mpi``: few distinct
#: values, so each option node (and its rendered text) is made once.
_SHAPE_OPTIONS: dict[tuple[str, str], SrunOption] = {}
#: ``(clear_mpi_env, id(body)) -> (body, word)``, the word being the ``bash -c``
#: argument: workflows reuse their step bodies, so each is rendered once (the entry
#: keeps the body alive, so its id cannot be reused while it is cached).
_STEP_SCRIPTS: dict[tuple[bool, int], tuple[tuple[Statement, ...], Word]] = {}
_CACHE_LIMIT = 1024


def _shape_option(name: str, value: str) -> SrunOption:
    option = _SHAPE_OPTIONS.get((name, value))
    if option is None:
        if len(_SHAPE_OPTIONS) >= _CACHE_LIMIT:
            _SHAPE_OPTIONS.clear()
        option = _SHAPE_OPTIONS[name, value] = SrunOption(name, Word.of(value))
    return option


def _step_script(step: Step) -> Word:
    key = (step.clear_mpi_env, id(step.body))
    entry = _STEP_SCRIPTS.get(key)
    if entry is None or entry[0] is not step.body:
        body: tuple[Statement, ...] = step.body
        if step.clear_mpi_env:
            body = (_CLEAR_MPI_ENV, *body)
        if len(_STEP_SCRIPTS) >= _CACHE_LIMIT:
            _STEP_SCRIPTS.clear()
        entry = _STEP_SCRIPTS[key] = (step.body, Word((ScriptText(body),)))
    return entry[1]


def _container_options(container: Container) -> tuple[SrunOption, ...]:
    return (
        SrunOption("--container-image", Word.of(container.image)),
        SrunOption("--container-name", Word.of(container.name)),
        SrunOption("--container-mounts", Word.of(container.mounts)),
        SrunOption("--container-workdir", Word.of(container.workdir)),
        _KILL_ON_BAD_EXIT,
    )


def _srun(step: Step, container_options: tuple[SrunOption, ...]) -> Srun:
    shape = step.shape
    options = [
        _DASH_L,
        _shape_option("--nodes", str(shape.nodes)),
        _shape_option("--ntasks", str(shape.ntasks)),
        _shape_option("--ntasks-per-node", str(shape.ntasks_per_node)),
    ]
    if shape.mpi:
        options.append(_shape_option("--mpi", shape.mpi))
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
_COMMENTS: dict[str, Comment] = {}


def _comment(text: str) -> Comment:
    comment = _COMMENTS.get(text)
    if comment is None:
        if len(_COMMENTS) >= _CACHE_LIMIT:
            _COMMENTS.clear()
        comment = _COMMENTS[text] = Comment(text)
    return comment


def job_body(
    plan: WorkflowPlan, container: Container, exports: tuple[tuple[str, str], ...]
) -> tuple[Statement, ...]:
    body: list[Statement] = [_BLANK]
    for name, value in (*exports, *plan.env):
        body.append(Export(name, Word.of(value)))
    body += [_BLANK, _STARTED, _STATUS_ZERO]
    container_options = _container_options(container)
    for step in plan.steps:
        run = (_comment(step.label), _srun(step, container_options), _STATUS_FROM_STEP)
        body += [_BLANK, If(_STATUS_OK, run)]
    body += [_BLANK, _FINISHED, _EXIT]
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
            header=tuple([_comment(line) for line in self.header]),
            body=job_body(plan, self.container, self.exports),
        )


class LocalSlurm(SlurmScenario):
    name = "local_slurm"


class RemoteSlurm(SlurmScenario):
    name = "remote_slurm"
