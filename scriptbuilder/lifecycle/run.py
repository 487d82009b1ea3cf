"""A submitted run: :func:`submit` starts one, :func:`open_run` finds it again.

:meth:`Run.status` is one look; :meth:`Run.wait` polls until the job ends or the
time-out passes, cancels the job at once when its logs say ``hang detected``
(and a job that Slurm requeued after its node failed, since test jobs are not
retried), and at the time-out leaves the job alone unless asked to cancel it.

How each scenario runs (``kind`` in run.json):

- ``sbatch``: local_slurm (also perf-sanity's launch script), and remote_slurm
  through ssh after :func:`scriptbuilder.lifecycle.remote.upload`;
- ``persistent``: local_slurm persistent mode, the script inside a held
  allocation (:mod:`scriptbuilder.lifecycle.allocation`);
- ``docker``: local_docker (:mod:`scriptbuilder.lifecycle.docker`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from scriptbuilder.lifecycle import allocation, docker, remote, slurm
from scriptbuilder.lifecycle.durations import parse_duration
from scriptbuilder.lifecycle.logs import LogView, read_logs, secret_values
from scriptbuilder.lifecycle.record import (
    RUN_FILE,
    Build,
    LifecycleError,
    RunRecord,
    load_build,
    read_record,
    slurm_log_paths,
)
from scriptbuilder.lifecycle.slurm import JobState, SlurmError
from scriptbuilder.lifecycle.ssh import SshTransport
from scriptbuilder.lifecycle.transport import LocalTransport, Transport, TransportError
from scriptbuilder.lifecycle.verdict import NOT_FINISHED, Verdict, decide, report
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

    @property
    def exit_code(self) -> int:
        return self.verdict.exit_code if self.verdict else NOT_FINISHED


class Run:
    """A submitted run (see the module text)."""

    def __init__(self, build: Build, record: RunRecord, transport: Transport, clock: Clock):
        self.build, self.record, self.transport, self.clock = build, record, transport, clock
        self.secrets = secret_values(build.script.read_text(encoding="utf-8", errors="replace"))

    @property
    def job_id(self) -> str:
        return self.record.job_id

    def _kind(self) -> str:
        if self.record.container_name:
            return "docker"
        return "persistent" if self.record.allocation else "sbatch"

    def _job(self) -> JobState:
        now = self.clock()
        if self._kind() == "sbatch":
            job: JobState = _slurm_call(slurm.query, self.transport, self.job_id, now)
            return job
        elapsed = max(0.0, (now - self.record.submitted_at).total_seconds())
        code = allocation.exit_status(self.transport, str(self.record.exit_file))
        if code is None:
            alive = self.record.pid is not None and allocation.running(
                self.transport, self.record.pid
            )
            if alive:
                return JobState("RUNNING", "", None, None, elapsed, 0.0)
            return JobState("FAILED", "ended without an exit status", None, None, elapsed)
        return JobState("COMPLETED" if code == 0 else "FAILED", "", code, None, elapsed, 0.0)

    def status(self) -> Status:
        """The run now: state, logs, and the verdict when it has ended (one look)."""
        job = self._job()
        self._refresh()  # after the state: a cancel is recorded before it takes effect
        record = self.record
        logs = read_logs(self.transport, record.stdout_path, record.stderr_path, self.secrets)
        verdict = decide(job, logs, self.build.spec, self.record.ended_by) if job.finished else None
        if self.record.ended_by == "monitor_timeout" and job.finished:
            verdict = Verdict.MONITOR_TIMEOUT
        return Status(job, logs, verdict, report(verdict, self.job_id, job, logs, self.build.spec))

    def _refresh(self) -> None:
        """Take ``ended_by`` from run.json: a cancel from another process counts."""
        with contextlib.suppress(LifecycleError):
            latest = read_record(self.build, required=False)
            if latest is not None and latest.job_id == self.job_id and latest.ended_by:
                self.record = self.record.model_copy(update={"ended_by": latest.ended_by})

    def cancel(self, ended_by: str = "cancel") -> None:
        """Stop the run: scancel, docker stop of its own container, or SIGTERM to the
        script in its allocation. Recorded in run.json (``ended_by``)."""
        self.record = self.record.model_copy(update={"ended_by": ended_by})
        self.record.write(self.build.work_dir)
        kind = self._kind()
        if kind == "sbatch":
            _slurm_call(slurm.scancel, self.transport, self.job_id)
        elif kind == "docker":
            docker.stop(self.transport, str(self.record.container_name))
        elif self.record.pid is not None:
            allocation.stop(self.transport, self.record.pid)

    def _stop(self, why: str) -> None:
        """Cancel from watch; a job that ended meanwhile makes scancel fail, and the
        next look tells how it ended."""
        with contextlib.suppress(LifecycleError):
            self.cancel(why)

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
                return Status(
                    status.job,
                    status.logs,
                    verdict,
                    report(verdict, self.job_id, status.job, status.logs, self.build.spec),
                )
            time.sleep(max(0.0, min(every, deadline - time.monotonic())))


def _seconds(value: float | str) -> float:
    return parse_duration(value, "timeout")


def monitor_timeout(spec: dict[str, Any]) -> float:
    """The build's monitor_timeout (job_spec.json ``monitor_timeout_seconds`` or
    ``monitor_timeout``), else 1h."""
    for key in ("monitor_timeout_seconds", "monitor_timeout"):
        value = spec.get(key)
        if value not in (None, ""):
            try:
                return parse_duration(value, key)
            except ValueError as exc:
                raise LifecycleError(f"{exc} (job_spec.json {key})") from None
    return DEFAULT_MONITOR_TIMEOUT


def _slurm_call(func: Callable[..., Any], *args: Any) -> Any:
    try:
        return func(*args)
    except (SlurmError, TransportError) as exc:
        raise LifecycleError(f"{exc}: check that Slurm answers here (sinfo)") from None


def _remote_transport(spec: dict[str, Any]) -> Transport:
    env = spec.get("slurm_env") or {}
    host = spec.get("ssh_host") or env.get("ssh_host")
    if not host:
        raise LifecycleError("job_spec.json has no ssh_host: set ssh_host in the request")
    try:
        return SshTransport(str(host), user=spec.get("slurm_user") or env.get("slurm_user"))
    except TransportError as exc:
        raise LifecycleError(str(exc)) from None


def _transport_settings(transport: Transport) -> dict[str, Any]:
    """What rebuilds ``transport`` from run.json (ssh's constructor arguments; {} local)."""
    if not isinstance(transport, SshTransport):
        return {}
    names = ("host", "user", "control_path", "options")
    return {n: list(v) if n == "options" else v for n in names for v in [getattr(transport, n)]}


def open_run(
    work_dir: str | os.PathLike[str],
    *,
    transport: Transport | None = None,
    clock: Clock | None = None,
) -> Run:
    """The run recorded in ``work_dir/run.json`` for the build there."""
    build = load_build(Path(work_dir))
    record = read_record(build)
    assert record is not None
    if transport is None:
        transport = SshTransport(**record.transport) if record.transport else LocalTransport()
    return Run(build, record, transport, clock or _utc_now)


def submit(
    work_dir: str | os.PathLike[str],
    *,
    after: str | None = None,
    again: bool = False,
    transport: Transport | None = None,
    clock: Clock | None = None,
) -> Run:
    """Submit the build in ``work_dir`` (see the module text); the run, recorded in
    ``work_dir/run.json``. A second submit of the same build is refused unless
    ``again``."""
    build = load_build(Path(work_dir))
    clock = clock or _utc_now
    if after is not None and not after.isdigit():
        raise LifecycleError(f"--after {after!r} is not a Slurm job id (digits, e.g. 12345)")
    with open(build.work_dir / f".{RUN_FILE}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        earlier = _earlier(build)
        if earlier is not None and not again:
            raise LifecycleError(
                f"this build of {build.work_dir} was already submitted as job "
                f"{earlier.job_id}: use --again to submit it once more"
            )
        scenario = build.scenario
        if scenario == "remote_slurm":
            transport = transport or _remote_transport(build.spec)
        transport = transport or LocalTransport()
        fields = _start(build, transport, after, clock)
        record = RunRecord(
            scenario=scenario,
            workflow=str(build.spec.get("workflow_type", "")),
            host=transport.describe(),
            transport=_transport_settings(transport),
            submitted_at=clock(),
            scriptbuilder_version=__version__,
            job_spec_sha256=build.spec_sha256,
            script_sha256=build.script_sha256,
            after=after,
            **fields,
        )
        run = Run(build, record, transport, clock)
        try:
            record.write(build.work_dir)
        except OSError as exc:  # an unrecorded job would be submitted again: stop it
            with contextlib.suppress(LifecycleError, OSError):
                run.cancel()
            raise LifecycleError(
                f"{build.work_dir / RUN_FILE}: {exc.strerror}; job {record.job_id} was "
                "cancelled: make work_dir writable and submit again"
            ) from None
    return run


def _earlier(build: Build) -> RunRecord | None:
    try:
        return read_record(build, required=False)
    except LifecycleError:  # another build's run: this build was never submitted
        return None


def _start(build: Build, transport: Transport, after: str | None, clock: Clock) -> dict[str, Any]:
    """Start the job; the run record's fields that depend on how."""
    spec, scenario = build.spec, build.scenario
    name = str(spec.get("job_name", ""))
    if scenario == "local_docker":
        if after:
            raise LifecycleError("--after needs Slurm: local_docker runs start at once")
        container = docker.container_name(spec)
        log = Path(spec.get("log_file") or build.work_dir / f"{name}.log")
        exit_file = log.with_suffix(".exit_code")
        env = transport.env if isinstance(transport, LocalTransport) else None
        pid = docker.start(build.script, log, exit_file, env)
        return dict(
            job_id=f"docker:{container}",
            script_path=str(build.script),
            submit_dir=str(build.work_dir),
            stdout_path=str(log),
            stderr_path=str(log),
            container_name=container,
            exit_file=str(exit_file),
            pid=pid,
        )
    if scenario == "local_slurm" and spec.get("persistent_mode"):
        if after:
            raise LifecycleError(
                "--after needs sbatch: build with persistent_mode false to wait for a job"
            )
        try:
            started = allocation.submit(spec, transport, now=clock())
        except TransportError as exc:
            raise LifecycleError(str(exc)) from None
        return dict(
            job_id=started.allocation_job_id,
            script_path=str(build.script),
            submit_dir=str(build.work_dir),
            stdout_path=started.log_path,
            stderr_path=started.log_path,
            exit_file=started.status_path,
            pid=started.pid,
            allocation={"job_id": started.allocation_job_id, "reused": started.reused},
        )
    if scenario == "remote_slurm":
        submit_dir = str(spec.get("remote_work_dir") or "")
        if not submit_dir:
            raise LifecycleError("job_spec.json has no remote_work_dir: set it in the request")
        try:
            script = remote.upload(transport, spec, build.work_dir)
        except TransportError as exc:
            raise LifecycleError(str(exc)) from None
    elif scenario == "local_slurm":
        submit_dir, script = str(build.work_dir), str(build.script)
    else:
        raise LifecycleError(f"job_spec.json scenario {scenario!r} is not one submit knows")
    job_id = _slurm_call(slurm.sbatch, transport, script, submit_dir, after)
    text = build.script.read_text(encoding="utf-8", errors="replace")
    out, err = slurm_log_paths(text, submit_dir, job_id, name)
    return dict(
        job_id=job_id, script_path=script, submit_dir=submit_dir, stdout_path=out, stderr_path=err
    )
