"""``scriptbuilder submit|status|watch|cancel WORK_DIR``: the job's life after the build.

``submit`` prints the run record (run.json) as one JSON object; ``status`` one
line (``--json``: the verdict JSON) and ``watch`` the verdict JSON on standard
output, both exiting with the verdict's code (see
:data:`scriptbuilder.lifecycle.verdict.EXIT_CODES`; 10 while not finished, 2
for bad input). ``watch`` shows its progress on standard error: one live line
on a terminal, else one line per change of state. The lifecycle package is
imported inside the commands, so ``scriptbuilder build`` does not load it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from scriptbuilder.cli.group import fail, write_out

if TYPE_CHECKING:
    from scriptbuilder.lifecycle.run import Status

WORK_DIR = click.argument("work_dir", metavar="WORK_DIR", type=click.Path(file_okay=False))


class Duration(click.ParamType):  # type: ignore[type-arg]  # generic in the stubs only
    name = "DURATION"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from scriptbuilder.lifecycle.durations import parse_duration

        try:
            return parse_duration(
                value, f"--{param.name.replace('_', '-')}" if param and param.name else "duration"
            )
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


@contextmanager
def _errors() -> Iterator[None]:
    """A LifecycleError as the one-line error of the group, with its exit code."""
    from scriptbuilder.lifecycle.record import LifecycleError

    try:
        yield
    except LifecycleError as exc:
        fail(
            click.get_current_context().find_root().info_name or "scriptbuilder",
            str(exc),
            exc.exit_code,
        )


def _json(data: dict[str, Any]) -> None:
    write_out(json.dumps(data, ensure_ascii=False) + "\n")


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    total = int(seconds)
    return f"{total // 3600}:{total // 60 % 60:02d}:{total % 60:02d}"


def status_line(run_id: str, status: Status) -> str:
    """``job ID STATE H:MM:SS`` and the queue reason while pending, the last log
    line while running."""
    job = status.job
    line = f"job {run_id} {job.state}"
    if job.state == "PENDING":
        line += f" queued {_clock(job.queued)}" + (f" ({job.reason})" if job.reason else "")
    else:
        line += f" {_clock(job.elapsed)}"
        last = status.logs.last_line()
        if job.state == "RUNNING" and last:
            line += f" | {last}"
    if status.verdict is not None:
        line += f" -> {status.verdict.value}"
    return line


def _progress(run_id: str) -> tuple[Callable[[Status], None], Callable[[], None]]:
    """The on_poll callback of watch and what ends its display."""
    live = sys.stderr is not None and sys.stderr.isatty()
    shown: list[Any] = [None]

    def on_poll(status: Status) -> None:
        line = status_line(run_id, status)
        if live:
            width = 200
            write_out("\r\x1b[K" + line[:width], err=True)
            shown[0] = line
        elif shown[0] != (status.job.state, status.job.reason):
            shown[0] = (status.job.state, status.job.reason)
            write_out(line + "\n", err=True)

    def done() -> None:
        if live and shown[0] is not None:
            write_out("\n", err=True)

    return on_poll, done


def _submit_transport(options: dict[str, Any]) -> Any:
    """The transport the submit options ask for; None: the scenario's own."""
    return None


def register(group: click.Group) -> None:
    """Add the lifecycle commands to ``scriptbuilder``'s group."""
    for command in (submit_command, status_command, watch_command, cancel_command):
        group.add_command(command)


@click.command("submit")
@WORK_DIR
@click.option("--after", metavar="JOBID", help="Start only once job JOBID has succeeded.")
@click.option("--again", is_flag=True, help="Submit a build that was already submitted.")
def submit_command(work_dir: str, after: str | None, again: bool, **options: Any) -> None:
    """Submit what the last build wrote to WORK_DIR; record it in WORK_DIR/run.json."""
    from scriptbuilder.lifecycle.run import submit

    with _errors():
        run = submit(work_dir, after=after, again=again, transport=_submit_transport(options))
    _json(run.record.model_dump(mode="json"))


@click.command("status")
@WORK_DIR
@click.option("--json", "as_json", is_flag=True, help="Print the verdict JSON.")
def status_command(work_dir: str, as_json: bool) -> int:
    """One look at the run of WORK_DIR (no waiting); exits with the verdict's code."""
    from scriptbuilder.lifecycle.run import open_run

    with _errors():
        run = open_run(work_dir)
        status = run.status()
    if as_json:
        _json(status.report)
    else:
        write_out(status_line(run.job_id, status) + "\n")
    return status.exit_code


@click.command("watch")
@WORK_DIR
@click.option(
    "--timeout",
    type=Duration(),
    help="Give up after this long (default: the "
    "request's monitor_timeout, else 1h): 1h, 30m, 3600s, HH:MM:SS.",
)
@click.option(
    "--interval", type=Duration(), default="30s", show_default=True, help="Time between two looks."
)
@click.option("--cancel-on-timeout", is_flag=True, help="Cancel the job when --timeout passes.")
def watch_command(
    work_dir: str, timeout: float | None, interval: float, cancel_on_timeout: bool
) -> int:
    """Follow the run of WORK_DIR until it ends; print the verdict JSON."""
    from scriptbuilder.lifecycle.run import open_run

    with _errors():
        run = open_run(work_dir)
        on_poll, done = _progress(run.job_id)
        try:
            status = run.wait(timeout, interval, cancel_on_timeout, on_poll)
        finally:
            done()
    _json(status.report)
    return status.exit_code


@click.command("cancel")
@WORK_DIR
def cancel_command(work_dir: str) -> None:
    """Cancel the run of WORK_DIR (scancel, or docker stop of its own container)."""
    from scriptbuilder.lifecycle.run import open_run

    with _errors():
        run = open_run(work_dir)
        run.cancel()
    write_out(f"cancelled {run.job_id}\n")


# ----- remote and persistent mode: `release`, and the ssh options of submit ----------------------
