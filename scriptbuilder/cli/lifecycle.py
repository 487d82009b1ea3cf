"""``scriptbuilder submit|status|watch|cancel WORK_DIR``: the job's life after the build.

``submit`` prints the run record (run.json) as one JSON object; ``status`` one
line (``--json``: the verdict JSON) and ``watch`` the verdict JSON on standard
output, both exiting with the verdict's code (see
:data:`scriptbuilder.lifecycle.verdict.EXIT_CODES`; 10 while not finished, 2
for bad input). ``watch`` shows its progress on standard error: one live line
on a terminal, else one line per change of state. ``results`` lists a pytest
job's tests (a table, ``--json``, ``--junit FILE``).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from scriptbuilder.campaign.life import is_campaign
from scriptbuilder.cli import campaign
from scriptbuilder.cli.group import fail, write_out
from scriptbuilder.lifecycle import allocation
from scriptbuilder.lifecycle.durations import parse_duration
from scriptbuilder.lifecycle.errors import LifecycleError
from scriptbuilder.lifecycle.junit import junit_xml
from scriptbuilder.lifecycle.outcomes import TestRecords, TestResult
from scriptbuilder.lifecycle.record import Replaced, load_build
from scriptbuilder.lifecycle.run import Status, open_run, submit
from scriptbuilder.lifecycle.ssh import SshTransport
from scriptbuilder.lifecycle.transport import LocalTransport, Transport

WORK_DIR = click.argument("work_dir", metavar="WORK_DIR", type=click.Path(file_okay=False))


def _check_ssh_options(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> tuple[str, ...]:
    for value in values:
        key, sep, _ = value.partition("=")
        if not sep or not key.isalnum() or "\n" in value:
            raise click.BadParameter(f"{value!r} is not KEY=VALUE (e.g. Port=2222)", ctx, param)
    return values


def ssh_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--ssh-option KEY=VALUE`` (repeatable) and ``--control-path PATH``: how ssh
    reaches a remote_slurm build's login node (see :func:`_ssh_transport`)."""
    command = click.option(
        "--control-path",
        metavar="PATH",
        help="ssh ControlPath of an open master connection, e.g. the remote executor's "
        "/tmp/ssh-trtllm-%r@%h:%p (remote_slurm).",
    )(command)
    return click.option(
        "--ssh-option",
        "ssh_options",
        multiple=True,
        metavar="KEY=VALUE",
        callback=_check_ssh_options,
        help="An ssh -o option, e.g. Port=2222 (remote_slurm; repeatable).",
    )(command)


class Duration(click.ParamType):  # type: ignore[type-arg]  # generic in the stubs only
    name = "DURATION"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return parse_duration(
                value, f"--{param.name.replace('_', '-')}" if param and param.name else "duration"
            )
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


@contextmanager
def _errors() -> Iterator[None]:
    """A LifecycleError as the one-line error of the group, with its exit code."""
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


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {name}" for name, n in counts.items() if n) or "no tests yet"


def status_line(run_id: str, status: Status) -> str:
    """``job ID STATE H:MM:SS`` and the queue reason while pending; while running,
    the tests' counts so far and the running test when the job records its tests,
    else the last log line."""
    job = status.job
    line = f"job {run_id} {job.state}"
    if job.state == "PENDING":
        line += f" queued {_clock(job.queued)}" + (f" ({job.reason})" if job.reason else "")
    else:
        line += f" {_clock(job.elapsed)}"
        last = status.logs.last_line()
        records = status.records
        if job.state == "RUNNING" and records is not None and records.sessions:
            running = status.report.get("running")
            line += f" | {_counts(records.counts())}" + (f" | {running}" if running else "")
        elif job.state == "RUNNING" and last:
            line += f" | {last}"
    if status.verdict is not None:
        line += f" -> {status.verdict.value}"
    return line


def _columns() -> int:
    """Standard error's terminal width (80 when it does not say)."""
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns or 80
    except (OSError, ValueError):
        return 80


def _warn_under_allocated(report: dict[str, Any]) -> None:
    ids = report.get("under_allocated") or []
    if ids:
        gpus = report.get("gpus")
        had = f"the job had {gpus} GPU{'s' if gpus != 1 else ''}" if gpus else "too few GPUs"
        write_out(
            f"warning: {len(ids)} test(s) skipped for want of GPUs ({had}): "
            f"{', '.join(ids)}; build with required_devices set to what they need\n",
            err=True,
        )


def _progress(run_id: str) -> tuple[Callable[[Status], None], Callable[[], None]]:
    """The on_poll callback of watch and what ends its display."""
    live = sys.stderr is not None and sys.stderr.isatty()
    shown: list[Any] = [None]

    def on_poll(status: Status) -> None:
        line = status_line(run_id, status)
        if live:
            # no wider than the terminal: a wrapped line could not be redrawn in place
            width = _columns() - 1
            write_out("\r\x1b[K" + line[:width], err=True)
            shown[0] = line
        elif shown[0] != (status.job.state, status.job.reason):
            shown[0] = (status.job.state, status.job.reason)
            write_out(line + "\n", err=True)

    def done() -> None:
        if live and shown[0] is not None:
            write_out("\n", err=True)

    return on_poll, done


def register(group: click.Group) -> None:
    """Add the lifecycle commands to ``scriptbuilder``'s group."""
    commands = (
        submit_command,
        status_command,
        watch_command,
        cancel_command,
        release_command,
        results_command,
        rerun_command,
    )
    for command in commands:
        group.add_command(command)


@click.command("submit")
@WORK_DIR
@click.option("--after", metavar="JOBID", help="Start only once job JOBID has succeeded.")
@click.option(
    "--again",
    is_flag=True,
    help="Submit even though WORK_DIR's run.json names a job: that job is cancelled first "
    "when it may still be queued or running.",
)
@ssh_options
def submit_command(work_dir: str, after: str | None, again: bool, **options: Any) -> None:
    """Submit what the last build wrote to WORK_DIR; record it in WORK_DIR/run.json."""

    def said(replaced: Replaced) -> None:
        if replaced.cancelled:
            write_out(f"cancelled job {replaced.job_id}, the earlier run of {work_dir}\n", err=True)

    if is_campaign(work_dir):
        with _errors():
            campaign.submit(work_dir, again)
        return
    with _errors():
        transport = _ssh_transport(work_dir, options)
        run = submit(work_dir, after=after, again=again, transport=transport, on_replace=said)
    _json(run.record.model_dump(mode="json"))


@click.command("status")
@WORK_DIR
@click.option("--json", "as_json", is_flag=True, help="Print the verdict JSON.")
@ssh_options
def status_command(work_dir: str, as_json: bool, **options: Any) -> int:
    """One look at the run of WORK_DIR (no waiting); exits with the verdict's code. A
    campaign folder: every job's line and the total (--json: the campaign's JSON)."""
    if is_campaign(work_dir):
        with _errors():
            return campaign.status(work_dir, as_json)
    with _errors():
        run = open_run(work_dir, transport=_ssh_transport(work_dir, options))
        status = run.status()
    _warn_under_allocated(status.report)
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
@click.option(
    "--retries",
    type=click.IntRange(min=0),
    default=2,
    show_default=True,
    help="Campaign folder: fresh jobs at most per job the infrastructure ended (node or "
    "boot failure, preemption, launch failure), running only its tests without an outcome.",
)
@ssh_options
def watch_command(
    work_dir: str,
    timeout: float | None,
    interval: float,
    cancel_on_timeout: bool,
    retries: int,
    **options: Any,
) -> int:
    """Follow the run of WORK_DIR until it ends; print the verdict JSON. A campaign
    folder: every job, asking the scheduler once per round for all; the campaign's JSON."""
    if is_campaign(work_dir):
        with _errors():
            return campaign.watch(work_dir, timeout, interval, retries)
    with _errors():
        run = open_run(work_dir, transport=_ssh_transport(work_dir, options))
        on_poll, done = _progress(run.job_id)
        try:
            status = run.wait(timeout, interval, cancel_on_timeout, on_poll)
        finally:
            done()
    _warn_under_allocated(status.report)
    _json(status.report)
    return status.exit_code


@click.command("cancel")
@WORK_DIR
@ssh_options
def cancel_command(work_dir: str, **options: Any) -> None:
    """Cancel the run of WORK_DIR (scancel, or docker stop of its own container), also
    one an earlier build of WORK_DIR submitted; every job of a campaign folder."""
    if is_campaign(work_dir):
        with _errors():
            campaign.cancel(work_dir)
        return
    with _errors():
        run = open_run(work_dir, transport=_ssh_transport(work_dir, options), any_build=True)
        run.cancel()
    write_out(f"cancelled {run.job_id}\n")


# ----- remote and persistent mode: `release`, and the ssh options of submit ----------------------


def _ssh_transport(work_dir: str, options: dict[str, Any]) -> Transport | None:
    """ssh to the build's login node with the given ``--ssh-option``/``--control-path``;
    None when neither is given (submit then uses job_spec.json's host, the other
    commands the ssh settings recorded in run.json)."""
    given = tuple(options.get("ssh_options") or ())
    control_path = options.get("control_path") or None
    if not given and not control_path:
        return None
    build = load_build(Path(work_dir))
    if build.where is None or build.where.transport != "ssh":
        raise LifecycleError(
            f"--ssh-option and --control-path are for remote_slurm builds, and {work_dir} "
            f"holds a {build.scenario} build: leave them out"
        )
    return SshTransport.from_job_spec(build.spec, control_path=control_path, options=given)


@click.command("release")
@WORK_DIR
def release_command(work_dir: str) -> None:
    """Free the held allocation persistent mode shares with the local Slurm executor
    (scancel, and remove <repo_root>/work_dirs/.slurm_alloc.json); the checkout is the
    repo_root of WORK_DIR's build."""
    with _errors():
        build = load_build(Path(work_dir))
        repo_root = build.spec.repo_root
        if not repo_root:
            raise LifecycleError(
                f"job_spec.json of {work_dir} has no repo_root, so no allocation record is "
                "known: build again with repo_root set"
            )
        job_id = allocation.release(repo_root, LocalTransport())
    if job_id is None:
        write_out(f"no allocation recorded in {allocation.record_path(repo_root)}\n")
    else:
        write_out(f"released allocation {job_id}\n")


# ----- results: the tests of a pytest job ------------------------------------------------------


def _table(tests: list[TestResult]) -> str:
    """One line per test: outcome, duration, id, message (failures first)."""
    lines = []
    for test in tests:
        took = "-" if test.duration_seconds is None else f"{test.duration_seconds:.2f}s"
        row = f"{test.outcome:<10} {took:>9}  {test.id}"
        lines.append(f"{row}  {test.message}" if test.message else row)
    return "".join(line + "\n" for line in lines)


_RESULT_KEYS = ("id", "outcome", "duration_seconds", "message")


def _write_junit(path: str, tests: list[TestResult]) -> None:
    try:
        LocalTransport().write_file(path, junit_xml(tests), 0o644)
    except OSError as exc:
        raise LifecycleError(f"--junit {path}: {exc.strerror}; pass a writable path") from None


@click.command("results")
@WORK_DIR
@click.option("--json", "as_json", is_flag=True, help="Print the tests as JSON objects.")
@click.option(
    "--junit",
    "junit_file",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Also write a JUnit XML report to FILE.",
)
@ssh_options
def results_command(work_dir: str, as_json: bool, junit_file: str | None, **options: Any) -> None:
    """The tests of the pytest run of WORK_DIR as the job recorded them (a test the job
    ended in is unfinished): a table, failures first. A campaign folder: every job's
    tests merged, each once (with every outcome when it ran again), and each planned
    entry no test has an outcome for as not_run."""
    if is_campaign(work_dir):
        with _errors():
            merged = campaign.results(work_dir)
            tests = [TestResult(**{k: t[k] for k in _RESULT_KEYS}) for t in merged]
            if junit_file is not None:  # a test not run is no pass: an error there
                errors = {"not_run": "error"}
                _write_junit(
                    junit_file,
                    [replace(t, outcome=errors.get(t.outcome, t.outcome)) for t in tests],
                )
        if as_json:
            write_out(json.dumps(merged, ensure_ascii=False) + "\n")
        else:
            write_out(_table(tests))
        return
    with _errors():
        run = open_run(work_dir, transport=_ssh_transport(work_dir, options))
        if run.build.spec.test_records is None:
            raise LifecycleError(
                f"the build in {work_dir} records no tests (only pytest jobs do): "
                "use status or watch for its verdict"
            )
        status = run.status()
        listed = [TestResult(**test) for test in status.report.get("tests") or []]
        tests = TestRecords(listed).failures_first()
        if junit_file is not None:
            _write_junit(junit_file, tests)
    _warn_under_allocated(status.report)
    if as_json:
        write_out(json.dumps([t.as_dict() for t in tests], ensure_ascii=False) + "\n")
    else:
        write_out(_table(tests))


@click.command("rerun")
@click.argument("folder", metavar="DIR", type=click.Path(file_okay=False))
@click.option(
    "--failed",
    is_flag=True,
    required=True,
    help="Rerun the tests that failed, errored or were left unfinished.",
)
def rerun_command(folder: str, failed: bool) -> None:
    """Build and submit one new job of the failed and unfinished tests of the campaign
    DIR; its report then keeps both outcomes of each (flaky or broken)."""
    with _errors():
        if not is_campaign(folder):
            raise LifecycleError(
                f"{folder} holds no campaign.json: rerun --failed takes a campaign folder"
            )
        campaign.rerun(folder)
