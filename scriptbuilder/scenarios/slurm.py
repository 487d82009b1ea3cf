"""Slurm scenarios: an sbatch script with one srun step per workflow step.

Every step after the first runs only when the ones before it succeeded; the
script always prints its closing line and exits with the first failing step's
exit code. Each step prints ``==> <label>: <command>`` first, then runs in the
background while the script waits for it, so the time-limit warning
(:mod:`scriptbuilder.scenarios.time_limit`) is handled at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from scriptbuilder.errors import BuildError
from scriptbuilder.resolution.mpi import MPI_ENV_KEEP, MPI_ENV_PREFIXES
from scriptbuilder.scenarios import time_limit
from scriptbuilder.scenarios.base import PRINT_LINE, Scenario, step_banner
from scriptbuilder.script.plan import Container, SlurmAllocation, Step, WorkflowPlan
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
    """A backslash in an --output/--error path turns off every %-pattern in sbatch."""
    if "\\" in value:
        raise BuildError(
            f"{field} {value!r} contains a backslash, which makes Slurm stop replacing %j in "
            "log file names; remove the backslash"
        )


def log_path(log_dir: str, job_name: str, ext: str) -> str:
    """``<log_dir>/<job_name>_%j.<ext>``; a literal ``%`` is doubled for sbatch."""
    return f"{log_dir.rstrip('/')}/{job_name}_".replace("%", "%%") + f"%j.{ext}"


def _directives(alloc: SlurmAllocation, warning: int | None) -> tuple[Directive, ...]:
    tasks, log_name = alloc.tasks, alloc.log_name or alloc.job_name
    return (
        Directive("job-name", alloc.job_name),
        Directive("partition", alloc.partition),
        Directive("account", alloc.account),
        Directive("time", alloc.time_limit),
        *([Directive("signal", f"B:{time_limit.SIGNAL}@{warning}")] if warning else []),
        Directive("nodes", str(tasks.nodes)),
        Directive("ntasks", str(tasks.ntasks)),
        Directive("ntasks-per-node", str(tasks.ntasks_per_node)),
        *([Directive("gres", alloc.gres)] if alloc.gres else []),
        Directive("output", log_path(alloc.log_dir, log_name, "out")),
        Directive("error", log_path(alloc.log_dir, log_name, "err")),
    )


def _option(name: str, value: str) -> SrunOption:
    return SrunOption(name, Word.literal(value))


def _srun(step: Step, container: Container) -> Srun:
    shape = step.shape
    options = (
        SrunOption("-l"),
        _option("--nodes", str(shape.nodes)),
        _option("--ntasks", str(shape.ntasks)),
        _option("--ntasks-per-node", str(shape.ntasks_per_node)),
        *([_option("--mpi", shape.mpi)] if shape.mpi else []),
        _option("--container-image", container.image),
        _option("--container-name", container.name),
        _option("--container-mounts", container.mounts),
        _option("--container-workdir", container.workdir),
        SrunOption("--kill-on-bad-exit", Word.of("1")),
    )
    clear = ClearEnv(MPI_ENV_PREFIXES, MPI_ENV_KEEP)
    script = ScriptText((clear, *step.body) if step.clear_mpi_env else step.body)
    args = [to_word(a) for a in step.args]
    return Srun(options, Command.of("bash", "-c", Word((script,)), "step", *args), background=True)


_BLANK = Blank()
_JOB_ID = Var("SLURM_JOB_ID", "")
_DATE = Subst(Command.of("date"))


def _echo(*parts: str | Var | Subst) -> Run:
    return Run(Command.of("echo", Word.of(*parts)))


_STARTED = _echo("Job ", _JOB_ID, " started at ", _DATE, " on ", Subst(Command.of("hostname")))
_FINISHED = _echo("Job ", _JOB_ID, " finished at ", _DATE, " with exit code ", Var(STATUS))


def _step_block(step: Step, container: Container, banner: str) -> If:
    """Runs when every step before succeeded: names the step, prints its banner,
    runs it and keeps its exit code."""
    return If(
        Command.of("[", Word.of(Var(STATUS)), "-eq", "0", "]"),
        (
            Comment(step.label),
            Assign(time_limit.STEP, Word.literal(step.label)),
            Run(Command.of("printf", PRINT_LINE, banner)),
            _srun(step, container),
            Assign(time_limit.STEP_PID, Word.of(Var("!"))),
            Run(Command.of("wait", Word.of(Var(time_limit.STEP_PID)))),
            Assign(STATUS, Word.of(Var("?"))),
            Assign(time_limit.STEP_PID, Word.of("")),
        ),
    )


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
    #: Seconds of warning wanted before the time limit (clamped to the limit).
    timeout_warning: int = time_limit.DEFAULT_WARNING_SECONDS
    #: Values shown as ``***`` in the step banners.
    secrets: tuple[str, ...] = ()

    def assemble(self, plan: WorkflowPlan) -> SbatchScript:
        limit = self.allocation.time_limit
        warning = time_limit.warning_seconds(limit, self.timeout_warning)
        body: list[Statement] = [_BLANK]
        for name, value in (("LLM_MODELS_ROOT", self.models_root), *plan.env):
            body.append(Export(name, Word.literal(value)))
        if warning is not None:
            body += [_BLANK, *time_limit.setup(limit, warning, _FINISHED)]
        body += [_BLANK, _STARTED, Assign(STATUS, Word.of("0"))]
        for step in plan.steps:
            banner = step_banner(step, self.secrets)
            body += [_BLANK, _step_block(step, self.container, banner)]
        body.append(_BLANK)
        if warning is not None:
            body += time_limit.TEARDOWN
        body += [_FINISHED, Exit(Word.of(Var(STATUS)))]
        return SbatchScript(
            directives=_directives(self.allocation, warning),
            header=tuple(Comment(line) for line in self.header),
            body=tuple(body),
        )


#: The two Slurm scenarios, differing by name (and the paths their callers pass).
LocalSlurm = partial(SlurmScenario, "local_slurm")
RemoteSlurm = partial(SlurmScenario, "remote_slurm")
