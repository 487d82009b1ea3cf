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
from scriptbuilder.script import tree
from scriptbuilder.script.plan import Container, SlurmAllocation, Step, WorkflowPlan

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


def _directives(alloc: SlurmAllocation, warning: int | None) -> tuple[tree.Directive, ...]:
    tasks, log_name = alloc.tasks, alloc.log_name or alloc.job_name
    return (
        tree.Directive("job-name", alloc.job_name),
        tree.Directive("partition", alloc.partition),
        tree.Directive("account", alloc.account),
        tree.Directive("time", alloc.time_limit),
        *([tree.Directive("signal", f"B:{time_limit.SIGNAL}@{warning}")] if warning else []),
        tree.Directive("nodes", str(tasks.nodes)),
        tree.Directive("ntasks", str(tasks.ntasks)),
        tree.Directive("ntasks-per-node", str(tasks.ntasks_per_node)),
        *([tree.Directive("gres", alloc.gres)] if alloc.gres else []),
        tree.Directive("output", log_path(alloc.log_dir, log_name, "out")),
        tree.Directive("error", log_path(alloc.log_dir, log_name, "err")),
    )


def _option(name: str, value: str) -> tree.SrunOption:
    return tree.SrunOption(name, tree.Word.literal(value))


_LABEL_OUTPUT = tree.SrunOption("-l")
_KILL_ON_BAD_EXIT = tree.SrunOption("--kill-on-bad-exit", tree.Word.literal("1"))
_CLEAR_MPI_ENV = tree.ClearEnv(MPI_ENV_PREFIXES, MPI_ENV_KEEP)


def _srun(step: Step, container: Container) -> tree.Srun:
    shape = step.shape
    workdir = container.project if step.in_project and container.project else container.workdir
    options = (
        _LABEL_OUTPUT,
        _option("--nodes", str(shape.nodes)),
        _option("--ntasks", str(shape.ntasks)),
        _option("--ntasks-per-node", str(shape.ntasks_per_node)),
        *([_option("--mpi", shape.mpi)] if shape.mpi else []),
        _option("--container-image", container.image),
        _option("--container-name", container.name),
        _option("--container-mounts", container.mounts),
        _option("--container-workdir", workdir),
        _KILL_ON_BAD_EXIT,
    )
    script = tree.ScriptText((_CLEAR_MPI_ENV, *step.body) if step.clear_mpi_env else step.body)
    args = [tree.to_word(a) for a in step.args]
    return tree.Srun(
        options, tree.Command.of("bash", "-c", tree.Word((script,)), "step", *args), background=True
    )


_BLANK = tree.Blank()
_JOB_ID = tree.Var("SLURM_JOB_ID", "")
_DATE = tree.Subst(tree.Command.of("date"))


def _echo(*parts: str | tree.Var | tree.Subst) -> tree.Run:
    return tree.Run(tree.Command.of("echo", tree.Word.of(*parts)))


_STARTED = _echo(
    "Job ", _JOB_ID, " started at ", _DATE, " on ", tree.Subst(tree.Command.of("hostname"))
)
_FINISHED = _echo("Job ", _JOB_ID, " finished at ", _DATE, " with exit code ", tree.Var(STATUS))


_STATUS = tree.Word.of(tree.Var(STATUS))
_EARLIER_STEPS_OK = tree.Command.of("[", _STATUS, "-eq", "0", "]")
#: After the step's srun: wait for it, keep its exit code, forget its pid.
_WAIT_FOR_STEP = (
    tree.Assign(time_limit.STEP_PID, tree.Word.of(tree.Var("!"))),
    tree.Run(tree.Command.of("wait", tree.Word.of(tree.Var(time_limit.STEP_PID)))),
    tree.Assign(STATUS, tree.Word.of(tree.Var("?"))),
    tree.Assign(time_limit.STEP_PID, tree.Word.literal("")),
)


def _step_block(step: Step, container: Container, banner: str) -> tree.If:
    """Runs when every step before succeeded: names the step, prints its banner,
    runs it and keeps its exit code."""
    return tree.If(
        _EARLIER_STEPS_OK,
        (
            tree.Comment(step.label),
            tree.Assign(time_limit.STEP, tree.Word.literal(step.label)),
            tree.Run(tree.Command.of("printf", PRINT_LINE, banner)),
            _srun(step, container),
            *_WAIT_FOR_STEP,
        ),
    )


_NO_STEP_FAILED = tree.Assign(STATUS, tree.Word.literal("0"))
_EXIT = tree.Exit(_STATUS)


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

    def assemble(self, plan: WorkflowPlan) -> tree.SbatchScript:
        limit = self.allocation.time_limit
        warning = time_limit.warning_seconds(limit, self.timeout_warning)
        body: list[tree.Statement] = [_BLANK]
        for name, value in (("LLM_MODELS_ROOT", self.models_root), *plan.env):
            body.append(tree.Export(name, tree.Word.literal(value)))
        if warning is not None:
            body += [_BLANK, *time_limit.setup(limit, warning, _FINISHED)]
        body += [_BLANK, _STARTED, _NO_STEP_FAILED]
        for step in plan.steps:
            banner = step_banner(step, self.secrets)
            body += [_BLANK, _step_block(step, self.container, banner)]
        body.append(_BLANK)
        if warning is not None:
            body += time_limit.TEARDOWN
        body += [_FINISHED, _EXIT]
        return tree.SbatchScript(
            directives=_directives(self.allocation, warning),
            header=tuple(tree.Comment(line) for line in self.header),
            body=tuple(body),
        )


#: The two Slurm scenarios, differing by name (and the paths their callers pass).
LocalSlurm = partial(SlurmScenario, "local_slurm")
RemoteSlurm = partial(SlurmScenario, "remote_slurm")
