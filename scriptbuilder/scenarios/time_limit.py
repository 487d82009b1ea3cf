"""The time-limit warning of a Slurm job: a closing line instead of a silent kill.

Under ``sbatch`` the ``#SBATCH --signal=B:USR1@<seconds>`` directive has Slurm
send ``USR1`` to the batch shell that many seconds before the limit (Slurm may
send it up to a minute early). Run with ``bash`` inside a held allocation
(persistent mode) the directive has no effect, so the script starts its own
timer: it fires ``<seconds>`` before ``SLURM_JOB_END_TIME`` when Slurm exports
that, else ``<seconds>`` before the time limit counted from the script's start.

Either way the trap prints ``Job <id> reached its time limit (<limit>) during
<step>``, stops the running step and the timer, prints the usual closing line
with exit code :data:`TIMEOUT_STATUS` and exits with it.
"""

from __future__ import annotations

from scriptbuilder.inputs.slurm_time import time_limit_minutes
from scriptbuilder.script.tree import (
    Assign,
    Command,
    Difference,
    Directive,
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

#: The warning before the limit, unless the request says otherwise.
DEFAULT_WARNING_SECONDS = 300
#: The largest ``@<seconds>`` sbatch takes.
MAX_WARNING_SECONDS = 65535
SIGNAL = "USR1"
#: The exit code of a job stopped at its time limit (as GNU ``timeout`` uses).
TIMEOUT_STATUS = 124
#: What the executors match in the log (plain text, also a regular expression).
TIMEOUT_PATTERN = "reached its time limit"
#: Shell variables of the script.
STEP = "step"
STEP_PID = "step_pid"
TIMER = "timer"
_HANDLER = "time_limit_reached"
_TIMER_FN = "time_limit_timer"
_DEV_NULL = "/dev/null"
_QUIET = (Redirect("2>", _DEV_NULL),)


def warning_seconds(time_limit: str, wanted: int = DEFAULT_WARNING_SECONDS) -> int | None:
    """Seconds of warning for ``time_limit``: ``wanted``, at most half the limit (so
    a short job still runs before it is warned) and at most what sbatch takes;
    None when the job has no limit (or sbatch will refuse the limit anyway)."""
    try:
        minutes = time_limit_minutes(time_limit)
    except ValueError:
        return None
    if minutes is None:
        return None
    return max(1, min(wanted, minutes * 30, MAX_WARNING_SECONDS))


def signal_directive(seconds: int) -> Directive:
    return Directive("signal", f"B:{SIGNAL}@{seconds}")


def _if_set(name: str, body: tuple[Statement, ...]) -> If:
    return If(Command.of("[", "-n", Word.of(Var(name, "")), "]"), body)


def _kill_quietly(name: str) -> If:
    return _if_set(name, (Run(Command.of("kill", Word.of(Var(name))), _QUIET),))


#: Stops the persistent-mode timer, when one runs.
STOP_TIMER = _kill_quietly(TIMER)


def handler(time_limit: str, closing: Run) -> tuple[Statement, ...]:
    """The function the trap runs, and the trap itself."""
    during = Var(STEP, "setup")
    reached = Word.of(
        "Job ", Var("SLURM_JOB_ID", ""), f" reached its time limit ({time_limit}) during ", during
    )
    body = (
        Run(Command.of("echo", reached)),
        Assign("rc", Word.of(str(TIMEOUT_STATUS))),
        _kill_quietly(STEP_PID),
        STOP_TIMER,
        closing,
        Exit(Word.of(Var("rc"))),
    )
    return (Function(_HANDLER, body), Trap((Run(Command.of(_HANDLER)),), (SIGNAL,)))


def timer(limit_seconds: int, warning: int) -> tuple[Statement, ...]:
    """Outside sbatch (``ENVIRONMENT`` is ``BATCH`` only there): a background timer
    that sends the warning signal to this shell (its function sleeps its first
    argument, then signals)."""
    function = Function(
        _TIMER_FN,
        (
            Trap((Run(Command.of("kill", Word.of(Var("!")))), Exit(Word.of("0"))), ("TERM",)),
            Run(Command.of("sleep", Word.of(Var("1"))), background=True),
            Run(Command.of("wait", Word.of(Var("!")))),
            Run(Command.of("kill", f"-{SIGNAL}", Word.of(Var("$")))),
        ),
    )
    now = Subst(Command.of("date", "+%s"))
    delay = If(
        Command.of("[", "-n", Word.of(Var("SLURM_JOB_END_TIME", "")), "]"),
        (Assign("warn_in", Word.of(Difference(Var("SLURM_JOB_END_TIME"), (now, warning)))),),
        (Assign("warn_in", Word.of(str(max(0, limit_seconds - warning)))),),
    )
    start = Run(
        Command.of(_TIMER_FN, Word.of(Var("warn_in"))),
        (Redirect("<", _DEV_NULL), Redirect(">", _DEV_NULL), Redirect("2>", _DEV_NULL)),
        background=True,
    )
    outside_sbatch = Command.of("[", Word.of(Var("ENVIRONMENT", "")), "!=", "BATCH", "]")
    return (function, If(outside_sbatch, (delay, start, Assign(TIMER, Word.of(Var("!"))))))


def limit_seconds(time_limit: str) -> int:
    minutes = time_limit_minutes(time_limit)
    return 60 * (minutes or 0)


#: Ignores a late warning while the closing line is printed.
IGNORE_WARNING = Trap((), (SIGNAL,))
