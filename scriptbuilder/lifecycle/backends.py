"""How a job is started, looked at and stopped: one backend per ``kind`` of run.json.

- :class:`Sbatch` (``sbatch``): ``sbatch`` on this machine (local_slurm, and
  perf-sanity's launch script) or on a login node through ssh after
  :func:`scriptbuilder.lifecycle.remote.upload` (remote_slurm); looked at with
  squeue, sacct and scontrol, stopped with ``scancel``. Once Slurm knows the job
  no more (no accounting, MinJobAge passed), the script's own closing line
  (``Job N finished at ... with exit code N``, after ``Job N reached its time
  limit`` when its time ran out) tells how it ended.
- :class:`Persistent` (``persistent``): local_slurm persistent mode, the script
  inside a held allocation (:mod:`scriptbuilder.lifecycle.allocation`).
- :class:`Docker` (``docker``): local_docker, ``docker_cmd.sh`` run detached
  (:mod:`scriptbuilder.lifecycle.docker`).

:func:`kind_of` says which backend starts a build's job; :data:`BACKENDS` finds the
one of a recorded run.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

from scriptbuilder.lifecycle import allocation, docker, remote, slurm
from scriptbuilder.lifecycle.errors import LifecycleError, UnknownJob
from scriptbuilder.lifecycle.logs import TAIL_BYTES, text_of
from scriptbuilder.lifecycle.record import Build, Kind, RunRecord, slurm_log_paths
from scriptbuilder.lifecycle.slurm import JobState
from scriptbuilder.lifecycle.transport import LocalTransport, Transport
from scriptbuilder.scenarios.time_limit import TIMEOUT_PATTERN

Clock = Callable[[], datetime]


def kind_of(build: Build) -> Kind:
    """The backend that starts ``build``'s job."""
    return build.where.backend(build.spec) if build.where is not None else "sbatch"


class Backend(ABC):
    kind: ClassVar[Kind]

    @abstractmethod
    def start(
        self,
        build: Build,
        transport: Transport,
        after: str | None,
        now: datetime,
        options: Sequence[str] = (),
    ) -> dict[str, Any]:
        """Start the job (``options``: sbatch's own, e.g. ``--no-requeue``); the run
        record's fields that depend on how."""

    @abstractmethod
    def look(self, record: RunRecord, transport: Transport, now: datetime) -> JobState:
        """The job's state now."""

    def look_many(
        self, records: Sequence[RunRecord], transport: Transport, now: datetime
    ) -> dict[str, JobState]:
        """The state of each of ``records``' jobs, by job id (one look each; a backend
        that can ask once for all of them does)."""
        return {record.job_id: self.look(record, transport, now) for record in records}

    @abstractmethod
    def cancel(self, record: RunRecord, transport: Transport) -> None:
        """Stop the job."""


def _call(func: Callable[..., Any], *args: Any) -> Any:
    """A Slurm command, its failure named with the fix."""
    try:
        return func(*args)
    except UnknownJob:
        raise
    except LifecycleError as exc:
        raise LifecycleError(f"{exc}: check that Slurm answers here (sinfo)") from None


def closing_state(job_id: str, log_tail: str, elapsed: float | None) -> JobState | None:
    """How the job ended by the closing lines of its script (see the module text);
    None when the log has no closing line of this job."""
    finished = re.findall(
        rf"^Job {re.escape(job_id)} finished at .* with exit code (\d+)$", log_tail, re.MULTILINE
    )
    if not finished:
        return None
    code = int(finished[-1])
    timed_out = re.search(rf"^Job {re.escape(job_id)} {TIMEOUT_PATTERN}", log_tail, re.MULTILINE)
    state = "TIMEOUT" if timed_out else "COMPLETED" if code == 0 else "FAILED"
    return JobState(state, "", code, None, elapsed, source="closing line")


def _no_options(kind: str, options: Sequence[str]) -> None:
    if options:
        raise LifecycleError(f"sbatch options {' '.join(options)} need sbatch, not a {kind} run")


class Sbatch(Backend):
    kind = "sbatch"

    def start(
        self,
        build: Build,
        transport: Transport,
        after: str | None,
        now: datetime,
        options: Sequence[str] = (),
    ) -> dict[str, Any]:
        spec = build.spec
        if build.where is not None and build.where.transport == "ssh":
            submit_dir = spec.remote_work_dir or ""
            if not submit_dir:
                raise LifecycleError("job_spec.json has no remote_work_dir: set it in the request")
            script = remote.upload(transport, spec, build.work_dir)
        else:
            submit_dir, script = str(build.work_dir), str(build.script)
        job_id = _call(slurm.sbatch, transport, script, submit_dir, after, options)
        text = build.script.read_text(encoding="utf-8", errors="replace")
        out, err = slurm_log_paths(text, submit_dir, job_id, spec.job_name)
        return dict(
            job_id=job_id,
            script_path=script,
            submit_dir=submit_dir,
            stdout_path=out,
            stderr_path=err,
        )

    def look(self, record: RunRecord, transport: Transport, now: datetime) -> JobState:
        try:
            job: JobState = _call(slurm.query, transport, record.job_id, now)
            return job
        except UnknownJob as exc:
            return self._closed(record, transport, str(exc))

    def look_many(
        self, records: Sequence[RunRecord], transport: Transport, now: datetime
    ) -> dict[str, JobState]:
        """One squeue and at most one sacct for all (:func:`slurm.query_many`); a job
        neither knows by its closing line."""
        found: dict[str, JobState] = _call(
            slurm.query_many, transport, [r.job_id for r in records], now
        )
        for record in records:
            if record.job_id not in found:
                said = f"Slurm knows no job {record.job_id} (squeue and sacct have none)"
                found[record.job_id] = self._closed(record, transport, said)
        return found

    @staticmethod
    def _closed(record: RunRecord, transport: Transport, said: str) -> JobState:
        out = record.stdout_path
        tail = transport.read_tail(out, TAIL_BYTES) if out else None
        found = closing_state(record.job_id, text_of(tail, TAIL_BYTES), None)
        if found is None:
            raise LifecycleError(
                f"{said}, and its log {record.stdout_path} has no closing line: the job "
                "ended without one (killed?); its verdict is unknown"
            ) from None
        return found

    def cancel(self, record: RunRecord, transport: Transport) -> None:
        _call(slurm.scancel, transport, record.job_id)


def _elapsed(record: RunRecord, now: datetime) -> float:
    return max(0.0, (now - record.submitted_at).total_seconds())


def _by_exit_file(record: RunRecord, transport: Transport, now: datetime) -> JobState:
    """The state of a script run detached (persistent, docker): by its exit file, and
    while there is none by its process."""
    elapsed = _elapsed(record, now)
    code = allocation.exit_status(transport, str(record.exit_file))
    if code is None:
        if record.pid is not None and allocation.running(transport, record.pid):
            return JobState("RUNNING", "", None, None, elapsed, 0.0, source="exit file")
        return JobState(
            "FAILED", "ended without an exit status", None, None, elapsed, source="exit file"
        )
    state = "COMPLETED" if code == 0 else "FAILED"
    return JobState(state, "", code, None, elapsed, 0.0, source="exit file")


class Persistent(Backend):
    kind = "persistent"

    def start(
        self,
        build: Build,
        transport: Transport,
        after: str | None,
        now: datetime,
        options: Sequence[str] = (),
    ) -> dict[str, Any]:
        _no_options(self.kind, options)
        if after:
            raise LifecycleError(
                "--after needs sbatch: build with persistent_mode false to wait for a job"
            )
        started = allocation.submit(build.spec, transport, now=now)
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

    def look(self, record: RunRecord, transport: Transport, now: datetime) -> JobState:
        return _by_exit_file(record, transport, now)

    def cancel(self, record: RunRecord, transport: Transport) -> None:
        if record.pid is not None:
            allocation.stop(transport, record.pid)


class Docker(Backend):
    kind = "docker"

    def start(
        self,
        build: Build,
        transport: Transport,
        after: str | None,
        now: datetime,
        options: Sequence[str] = (),
    ) -> dict[str, Any]:
        _no_options(self.kind, options)
        if after:
            raise LifecycleError("--after needs Slurm: local_docker runs start at once")
        spec = build.spec
        container = spec.job_name  # the container's --name (see the field)
        log = Path(spec.log_file or build.work_dir / f"{container}.log")
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

    def look(self, record: RunRecord, transport: Transport, now: datetime) -> JobState:
        return _by_exit_file(record, transport, now)

    def cancel(self, record: RunRecord, transport: Transport) -> None:
        docker.stop(transport, str(record.container_name))


BACKENDS: dict[Kind, Backend] = {b.kind: b for b in (Sbatch(), Persistent(), Docker())}
