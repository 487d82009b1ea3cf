"""A submitted run: :func:`submit` starts one, :func:`open_run` finds it again.

:meth:`Run.status` is one look; :meth:`Run.wait` polls until the job ends or the
time-out passes, cancels the job at once when its logs say ``hang detected``
(and a job that Slurm requeued after its node failed, since test jobs are not
retried), and at the time-out leaves the job alone unless asked to cancel it.
The backend of the run's ``kind`` (:mod:`scriptbuilder.lifecycle.backends`)
starts, looks at and stops the job. Once the job has ended its verdict report is
written into run.json, and every later look returns it without asking anyone.

``submit`` over the run.json of another job that may still be queued or running
is refused, unless ``again``: that job is then cancelled first (and named in the
new run.json's ``replaces``).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from scriptbuilder.lifecycle.backends import BACKENDS, Backend, kind_of
from scriptbuilder.lifecycle.durations import parse_duration
from scriptbuilder.lifecycle.errors import LifecycleError
from scriptbuilder.lifecycle.logs import LogView, read_logs
from scriptbuilder.lifecycle.outcomes import TestRecords, read_records, records_path
from scriptbuilder.lifecycle.record import (
    RUN_FILE,
    Build,
    Replaced,
    RunRecord,
    load_build,
    read_record,
    update,
)
from scriptbuilder.lifecycle.slurm import JobState, Phase
from scriptbuilder.lifecycle.ssh import SshTransport
from scriptbuilder.lifecycle.transport import LocalTransport, Transport
from scriptbuilder.lifecycle.verdict import NOT_FINISHED, Verdict, decide, report
from scriptbuilder.models.defaults import DEFAULT_SECRET_PATTERNS
from scriptbuilder.models.job_spec import JobSpec
from scriptbuilder.outputs.atomic import locked
from scriptbuilder.resolution.secrets import script_secrets
from scriptbuilder.version import __version__

Clock = Callable[[], datetime]
DEFAULT_MONITOR_TIMEOUT = 3600.0
DEFAULT_INTERVAL = 30.0


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


@dataclass
class Status:
    """One look at a run: the scheduler's state, the logs, and the verdict once ended."""

    job: JobState
    logs: LogView
    verdict: Verdict | None
    report: dict[str, Any]
    records: TestRecords | None = None

    @property
    def exit_code(self) -> int:
        return self.verdict.exit_code if self.verdict else NOT_FINISHED

    @classmethod
    def recorded(cls, data: dict[str, Any]) -> Status:
        """The status of a run whose end run.json recorded (its verdict report)."""
        job = JobState(
            str(data.get("state")),
            str(data.get("reason") or ""),
            data.get("job_exit_code"),
            data.get("signal"),
            data.get("elapsed_seconds"),
            data.get("queued_seconds"),
            source=str(data.get("state_source") or "scheduler"),
        )
        logs = data.get("logs") or {}
        view = LogView(logs.get("out"), logs.get("err"))
        return cls(job, view, Verdict(data["verdict"]), data)


class Run:
    """A submitted run (see the module text)."""

    def __init__(self, build: Build, record: RunRecord, transport: Transport, clock: Clock):
        self.build, self.record, self.transport, self.clock = build, record, transport, clock
        text = build.script.read_text(encoding="utf-8", errors="replace")
        self.secrets = script_secrets(text, DEFAULT_SECRET_PATTERNS)

    @property
    def job_id(self) -> str:
        return self.record.job_id

    @property
    def backend(self) -> Backend:
        return BACKENDS[self.record.kind]

    def status(self, looked: JobState | None = None) -> Status:
        """The run now: state, logs, and the verdict when it has ended (one look, or
        ``looked``, the state a look at many jobs found; the recorded verdict once
        there is one)."""
        self._refresh()
        if self.record.report is not None:
            return Status.recorded(self.record.report)
        job = looked or self.backend.look(self.record, self.transport, self.clock())
        self._refresh()  # after the state: a cancel is recorded before it takes effect
        record = self.record
        logs = read_logs(self.transport, record.stdout_path, record.stderr_path, self.secrets)
        records = self.records(job.finished)
        spec, ended_by = self.build.spec, record.ended_by
        verdict = decide(job, logs, spec, ended_by, records) if job.finished else None
        if record.ended_by == "monitor_timeout" and job.finished:
            verdict = Verdict.MONITOR_TIMEOUT
        data = report(verdict, self.job_id, job, logs, spec, records)
        status = Status(job, logs, verdict, data, records)
        if verdict is not None:
            with contextlib.suppress(OSError):  # a read-only work_dir: looked at again later
                self.record = update(self.build, self.record, report=status.report)
        return status

    def records(self, ended: bool) -> TestRecords | None:
        """The tests the job recorded (None when it recorded none); a test it is still
        in is ``unfinished`` once it has ``ended``. A file a persistent or docker run
        shares with the runs before it is read from this run's submit on."""
        path = records_path(self.build.spec, self.job_id)
        if path is None:
            return None
        since = None if self.record.kind == "sbatch" else self.record.submitted_at.timestamp()
        found = read_records(self.transport, path, self.secrets, since)
        return found.ended() if found is not None and ended else found

    def _refresh(self) -> None:
        """Take ``ended_by`` and ``report`` from run.json: another process's count."""
        with contextlib.suppress(LifecycleError):
            latest = read_record(self.build, required=False, any_build=True)
            if latest is not None and latest.job_id == self.job_id:
                changes = {"ended_by": latest.ended_by or self.record.ended_by}
                self.record = self.record.model_copy(update=changes | {"report": latest.report})

    def cancel(self, ended_by: str = "cancel") -> None:
        """Stop the run: scancel, docker stop of its own container, or SIGTERM to the
        script in its allocation. Recorded in run.json (``ended_by``); a run whose
        end is recorded is left alone."""
        self._refresh()
        if self.record.report is not None:
            raise LifecycleError(
                f"job {self.job_id} has already ended ({self.record.report['verdict']}): "
                "nothing to cancel"
            )
        self._cancel(ended_by)

    def _cancel(self, ended_by: str) -> None:
        self.record = update(self.build, self.record, ended_by=ended_by)
        self.backend.cancel(self.record, self.transport)

    def _stop(self, why: str) -> None:
        """Cancel from watch; a job that ended meanwhile makes scancel fail, and the
        next look tells how it ended."""
        with contextlib.suppress(LifecycleError):
            self._cancel(why)

    def wait(
        self,
        timeout: float | str | None = None,
        interval: float | str = DEFAULT_INTERVAL,
        cancel_on_timeout: bool = False,
        on_poll: Callable[[Status], None] | None = None,
    ) -> Status:
        """Poll every ``interval`` until the run ends or ``timeout`` passes (default: the
        build's monitor_timeout, else 1h); the last status (MONITOR_TIMEOUT when the
        time-out passed first)."""
        limit = monitor_timeout(self.build.spec) if timeout is None else _seconds(timeout)
        every = parse_duration(interval, "interval")
        deadline = time.monotonic() + limit
        while True:
            status = self.status()
            if on_poll is not None:
                on_poll(status)
            node_failed = status.job.state == "NODE_FAIL" and status.job.restarts > 0
            if status.logs.hang and not status.job.finished and self.record.ended_by is None:
                self._stop("hang")
                continue
            if node_failed and self.record.ended_by is None:
                self._stop("node_failure")  # the copy Slurm requeued: no retries
            if status.job.finished:
                return status
            if time.monotonic() >= deadline:
                if cancel_on_timeout:
                    self._stop("monitor_timeout")
                verdict = Verdict.MONITOR_TIMEOUT
                job, logs, records = status.job, status.logs, status.records
                return Status(
                    job,
                    logs,
                    verdict,
                    report(verdict, self.job_id, job, logs, self.build.spec, records),
                    records,
                )
            time.sleep(max(0.0, min(every, deadline - time.monotonic())))


def _seconds(value: float | str) -> float:
    return parse_duration(value, "timeout")


def monitor_timeout(spec: JobSpec) -> float:
    """The build's monitor_timeout (job_spec.json ``monitor_timeout_seconds``, a key the
    orchestrator may write, or ``monitor_timeout``), else 1h."""
    given = {"monitor_timeout_seconds": (spec.model_extra or {}).get("monitor_timeout_seconds")}
    for key, value in (given | {"monitor_timeout": spec.monitor_timeout}).items():
        if value not in (None, ""):
            try:
                return parse_duration(value, key)
            except ValueError as exc:
                raise LifecycleError(f"{exc} (job_spec.json {key})") from None
    return DEFAULT_MONITOR_TIMEOUT


def _transport_settings(transport: Transport) -> dict[str, Any]:
    """What rebuilds ``transport`` from run.json (ssh's constructor arguments; {} local)."""
    if not isinstance(transport, SshTransport):
        return {}
    names = ("host", "user", "control_path", "options")
    return {n: list(v) if n == "options" else v for n in names for v in [getattr(transport, n)]}


def _recorded_transport(record: RunRecord) -> Transport:
    return SshTransport(**record.transport) if record.transport else LocalTransport()


def open_run(
    work_dir: str | os.PathLike[str],
    *,
    transport: Transport | None = None,
    clock: Clock | None = None,
    any_build: bool = False,
) -> Run:
    """The run recorded in ``work_dir/run.json`` for the build there (with
    ``any_build``, also one of an earlier build: enough to cancel it)."""
    build = load_build(Path(work_dir))
    record = read_record(build, any_build=any_build)
    assert record is not None
    return Run(build, record, transport or _recorded_transport(record), clock or _utc_now)


def submit(
    work_dir: str | os.PathLike[str],
    *,
    after: str | None = None,
    again: bool = False,
    transport: Transport | None = None,
    clock: Clock | None = None,
    on_replace: Callable[[Replaced], None] | None = None,
    options: Sequence[str] = (),
) -> Run:
    """Submit the build in ``work_dir`` (see the module text); the run, recorded in
    ``work_dir/run.json``. A second submit of the same build, or one over a job
    that may still be queued or running, is refused unless ``again``
    (``on_replace`` is told of the job that replaces); ``options``: sbatch's own."""
    build = load_build(Path(work_dir))
    clock = clock or _utc_now
    if after is not None and not after.isdigit():
        raise LifecycleError(f"--after {after!r} is not a Slurm job id (digits, e.g. 12345)")
    with locked(build.work_dir):
        earlier = read_record(build, required=False, any_build=True)
        replaces = _replace(build, earlier, again, clock) if earlier is not None else None
        if replaces is not None and on_replace is not None:
            on_replace(replaces)
        if transport is None and build.where is not None and build.where.transport == "ssh":
            transport = SshTransport.from_job_spec(build.spec)
        transport = transport or LocalTransport()
        kind = kind_of(build)
        submitted_at = clock()  # before the start: the job's records come after it
        fields = BACKENDS[kind].start(build, transport, after, submitted_at, options)
        record = RunRecord(
            kind=kind,
            scenario=build.scenario,
            workflow=build.spec.workflow_type,
            host=transport.describe(),
            transport=_transport_settings(transport),
            submitted_at=submitted_at,
            scriptbuilder_version=__version__,
            job_spec_sha256=build.spec_sha256,
            script_sha256=build.script_sha256,
            after=after,
            replaces=replaces,
            **fields,
        )
        try:
            record.write(build.work_dir)
        except OSError as exc:  # an unrecorded job would be submitted again: stop it
            with contextlib.suppress(LifecycleError, OSError):
                BACKENDS[kind].cancel(record, transport)
            raise LifecycleError(
                f"{build.work_dir / RUN_FILE}: {exc.strerror}; job {record.job_id} was "
                "cancelled: make work_dir writable and submit again"
            ) from None
    return Run(build, record, transport, clock)


def _replace(build: Build, earlier: RunRecord, again: bool, clock: Clock) -> Replaced | None:
    """What becomes of the job ``earlier`` records when ``build`` is submitted over it:
    nothing when it has ended (another build's), cancelled with ``again``, else the
    submit is refused. What the new run.json records of it."""
    same = earlier.of(build)
    if same and not again:
        raise LifecycleError(
            f"this build of {build.work_dir} was already submitted as job "
            f"{earlier.job_id}: use --again to submit it once more"
        )
    ended = earlier.report is not None
    if not ended:
        try:
            look = BACKENDS[earlier.kind].look(earlier, _recorded_transport(earlier), clock())
            ended = look.phase is Phase.ENDED
            state = f"{look.state.lower()}"
        except LifecycleError as exc:
            state = f"perhaps still running ({exc})"
    if ended:
        return Replaced(job_id=earlier.job_id, cancelled=False) if again or same else None
    if not again:
        raise LifecycleError(
            f"{build.work_dir} holds job {earlier.job_id} of an earlier build, {state}: "
            f"cancel it (scriptbuilder cancel {build.work_dir}) or submit with --again, "
            "which cancels it first"
        )
    BACKENDS[earlier.kind].cancel(earlier, _recorded_transport(earlier))
    return Replaced(job_id=earlier.job_id, cancelled=True)
