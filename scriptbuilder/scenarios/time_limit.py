"""The time-limit warning of a Slurm job: a closing line instead of a silent kill.

Under sbatch, ``#SBATCH --signal=B:USR1@<seconds>`` has Slurm send ``USR1`` to the
batch shell before the limit (up to a minute early). Run with ``bash`` inside a
held allocation the directive does nothing, so the script starts its own timer:
``<seconds>`` before ``SLURM_JOB_END_TIME`` when Slurm exports it, else before
the limit counted from the script's start. The trap prints ``Job <id> reached its
time limit (<limit>) during <step>``, stops the step and the timer, prints the
closing line and exits with :data:`TIMEOUT_STATUS`.
"""

from __future__ import annotations

from scriptbuilder.inputs.slurm_time import time_limit_minutes
from scriptbuilder.script.tree import (
    Assign,
    Command,
    Difference,
    Exit,
    Function,
    If,
    Redirect,
    Run,
    Statement,
    Subst,
    Trap,
    Var,
    Word,
)

DEFAULT_WARNING_SECONDS = 300
#: The largest ``@<seconds>`` sbatch takes.
MAX_WARNING_SECONDS = 65535
SIGNAL = "USR1"
#: The exit code of a job stopped at its time limit (as GNU ``timeout`` uses).
TIMEOUT_STATUS = 124
#: What the executors match in the log (plain text, also a regular expression).
TIMEOUT_PATTERN = "reached its time limit"
STEP = "step"
STEP_PID = "step_pid"
_TIMER = "timer"
_HANDLER = "time_limit_reached"
_TIMER_FN = "time_limit_timer"
_DEV_NULL = "/dev/null"


def warning_seconds(time_limit: str, wanted: int = DEFAULT_WARNING_SECONDS) -> int | None:
    """``wanted``, at most half the limit (so a short job still runs before it is
    warned) and at most what sbatch takes; None when the job has no limit (or
    sbatch will refuse the limit anyway)."""
    try:
        minutes = time_limit_minutes(time_limit)
    except ValueError:
        return None
    return None if minutes is None else max(1, min(wanted, minutes * 30, MAX_WARNING_SECONDS))


def _kill_quietly(name: str) -> If:
    kill = Run(Command.of("kill", Word.of(Var(name))), (Redirect("2>", _DEV_NULL),))
    return If(Command.of("[", "-n", Word.of(Var(name, "")), "]"), (kill,))


def _timer_function() -> Function:
    """Sleeps for its argument, then signals the script (stopped by TERM, the sleep with it)."""
    return Function(
        _TIMER_FN,
        (
            Trap((Run(Command.of("kill", Word.of(Var("!")))), Exit(Word.of("0"))), ("TERM",)),
            Run(Command.of("sleep", Word.of(Var("1"))), background=True),
            Run(Command.of("wait", Word.of(Var("!")))),
            Run(Command.of("kill", f"-{SIGNAL}", Word.of(Var("$")))),
        ),
    )


def _start_timer(time_limit: str, warning: int) -> If:
    """Outside sbatch (``ENVIRONMENT`` is ``BATCH`` only there): the timer, started
    ``warning`` seconds before ``SLURM_JOB_END_TIME``, else before the limit."""
    job_end = Var("SLURM_JOB_END_TIME")
    now = Subst(Command.of("date", "+%s"))
    limit_seconds = 60 * (time_limit_minutes(time_limit) or 0)
    delay = If(
        Command.of("[", "-n", Word.of(Var(job_end.name, "")), "]"),
        (Assign("warn_in", Word.of(Difference(job_end, (now, warning)))),),
        (Assign("warn_in", Word.of(str(max(0, limit_seconds - warning)))),),
    )
    quiet = (Redirect("<", _DEV_NULL), Redirect(">", _DEV_NULL), Redirect("2>", _DEV_NULL))
    start = Run(Command.of(_TIMER_FN, Word.of(Var("warn_in"))), quiet, background=True)
    outside_sbatch = Command.of("[", Word.of(Var("ENVIRONMENT", "")), "!=", "BATCH", "]")
    return If(outside_sbatch, (delay, start, Assign(_TIMER, Word.of(Var("!")))))


def setup(time_limit: str, warning: int, closing: Run) -> tuple[Statement, ...]:
    """The trap and its function, then a background timer that sleeps, then
    signals this shell."""
    reached = Word.of(
        "Job ",
        Var("SLURM_JOB_ID", ""),
        f" reached its time limit ({time_limit}) during ",
        Var(STEP, "setup"),
    )
    body = (
        Run(Command.of("echo", reached)),
        Assign("rc", Word.of(str(TIMEOUT_STATUS))),
        _kill_quietly(STEP_PID),
        _kill_quietly(_TIMER),
        closing,
        Exit(Word.of(Var("rc"))),
    )
    return (
        Function(_HANDLER, body),
        Trap((Run(Command.of(_HANDLER)),), (SIGNAL,)),
        _timer_function(),
        _start_timer(time_limit, warning),
    )


def teardown() -> tuple[Statement, ...]:
    """Ignores a late warning while the closing line is printed, then stops the timer."""
    return (Trap((), (SIGNAL,)), _kill_quietly(_TIMER))
