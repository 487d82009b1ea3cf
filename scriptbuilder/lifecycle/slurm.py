"""Slurm's side of a run: sbatch, the job's state, scancel (through a Transport).

The state comes from ``squeue`` while the job is queued or running, then from
``sacct -P`` (the job row and its step rows: a step killed for memory is an
OUT_OF_MEMORY job); where there is no accounting (``sacct`` fails, or knows no
such job) from ``scontrol show job``, which keeps a finished job for MinJobAge.
A job requeued after a node failure (pending again with ``Restarts`` > 0) is
reported as NODE_FAIL. When none of the three knows the job any more,
:class:`UnknownJob` is raised (the caller may read the script's closing line).
:func:`query_many` looks at many jobs with one ``squeue`` (every state slurmctld still
holds) and at most one ``sacct`` (for the jobs that have ended or left squeue).

Every state, Slurm's own and the ones the docker and persistent backends report,
maps once onto a :class:`Phase` (:data:`PHASES`); the raw state stays beside it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum

from scriptbuilder.lifecycle.errors import SlurmError, TransportError, UnknownJob
from scriptbuilder.lifecycle.transport import Transport


class Phase(str, Enum):
    """Where a job is in its life, whatever runs it."""

    QUEUED = "queued"
    RUNNING = "running"
    ENDED = "ended"


#: Slurm's job states (and the docker and persistent backends' few) by phase; a state
#: not named here is RUNNING (it has left the queue and not ended).
PHASES: dict[str, Phase] = {
    **dict.fromkeys(
        ("PENDING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESV_DEL_HOLD"), Phase.QUEUED
    ),
    **dict.fromkeys(
        (
            "BOOT_FAIL",
            "CANCELLED",
            "COMPLETED",
            "DEADLINE",
            "FAILED",
            "NODE_FAIL",
            "OUT_OF_MEMORY",
            "PREEMPTED",
            "TIMEOUT",
        ),
        Phase.ENDED,
    ),
}
TERMINAL = frozenset(state for state, phase in PHASES.items() if phase is Phase.ENDED)
_WHOLE_LINE = ("Command", "WorkDir", "StdErr", "StdIn", "StdOut", "Comment", "Reason")
_FIELD = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_:/]*)=")
_SQUEUE_FORMAT = "%T|%r|%M|%V|%S"
_SACCT_FIELDS = "JobID,State,ExitCode,Elapsed,Submit,Start"
_SQUEUE_FIELDS = ("JobID", "State", "Reason", "exit_code", "TimeUsed", "SubmitTime", "StartTime")
#: ``squeue -O``: each field unpadded, ``|`` after each but the last.
_SQUEUE_ALL = ",".join(f"{f}:0|" for f in _SQUEUE_FIELDS) + ",RestartCnt:0"


@dataclass
class JobState:
    state: str
    reason: str = ""
    exit_code: int | None = None
    signal: int | None = None
    elapsed: float | None = None
    queued: float | None = None
    restarts: int = 0
    #: What told the state: ``scheduler``, ``exit file`` or ``closing line``.
    source: str = "scheduler"

    @property
    def phase(self) -> Phase:
        return PHASES.get(self.state, Phase.RUNNING)

    @property
    def finished(self) -> bool:
        return self.phase is Phase.ENDED


def _ok(transport: Transport, argv: Sequence[str], timeout: float = 60.0) -> str:
    done = transport.run(argv, timeout=timeout)
    if done.returncode != 0:
        text = (done.stderr or done.stdout).decode("utf-8", "replace")
        # the cause, not the usage hint after it ('Try "sbatch --help" for more information')
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        causes = [line for line in lines if not line.startswith("Try ")] or lines
        said = causes[-1] if causes else f"exit code {done.returncode}"
        raise SlurmError(f"{argv[0]} failed: {said}")
    return done.stdout.decode("utf-8", "replace")


def sbatch(
    transport: Transport,
    script: str,
    cwd: str,
    after: str | None = None,
    options: Sequence[str] = (),
) -> str:
    """Submit ``script`` from ``cwd`` (``sbatch --chdir``, then ``options``); the job id."""
    argv = ["sbatch", "--parsable", f"--chdir={cwd}", *options]
    if after:
        argv.append(f"--dependency=afterok:{after}")
    out = _ok(transport, [*argv, script]).strip()
    job_id = out.splitlines()[-1].split(";")[0].strip() if out else ""
    if not job_id.isdigit():
        raise SlurmError(f"sbatch printed no job id: {out[:200]!r}")
    return job_id


def scancel(transport: Transport, job_id: str) -> None:
    _ok(transport, ["scancel", job_id])


def seconds(text: str) -> float | None:
    """``[D-][HH:]MM:SS`` (Slurm's elapsed time) in seconds; None when not one."""
    match = re.fullmatch(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)", text.strip())
    if not match:
        return None
    days, hours, minutes, secs = (int(g or 0) for g in match.groups())
    return float(((days * 24 + hours) * 60 + minutes) * 60 + secs)


def _timestamp(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.strip())
    except ValueError:
        return None


def _queued(submit: str, start: str, now: datetime) -> float | None:
    """Seconds from ``submit`` to ``start`` (to ``now`` while it has not started);
    Slurm's times are the cluster's local time, without a zone."""
    if now.tzinfo is not None:
        now = now.astimezone().replace(tzinfo=None)
    began, started = _timestamp(submit), _timestamp(start)
    if began is None:
        return None
    end = started if started is not None and started <= now else now
    return max(0.0, (end - began).total_seconds())


def parse_scontrol(text: str) -> dict[str, str]:
    """Fields of ``scontrol show job`` (the multi-line form)."""
    fields: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        key, sep, rest = line.partition("=")
        if sep and key in _WHOLE_LINE:
            fields[key] = rest
            continue
        matches = list(_FIELD.finditer(line))
        for i, match in enumerate(matches):
            end = matches[i + 1].start() if i + 1 < len(matches) else len(line)
            fields[match.group(1)] = line[match.end() : end].strip()
    return fields


def _exit(text: str) -> tuple[int | None, int | None]:
    code, _, sig = text.partition(":")
    return (int(code) if code.isdigit() else None, int(sig) if sig.isdigit() else None)


def parse_sacct(text: str, job_id: str, now: datetime) -> JobState | None:
    """The job's state from ``sacct -P -n -o JobID,State,ExitCode,Elapsed,Submit,Start``
    rows (the job row and its steps); None when the job is not among them."""
    rows = [line.split("|") for line in text.splitlines() if line.count("|") >= 5]
    job = next((r for r in rows if r[0] == job_id), None)
    if job is None:
        return None
    state = job[1].split()[0] if job[1].split() else "UNKNOWN"
    if any(r[1].startswith("OUT_OF_MEMORY") for r in rows):
        state = "OUT_OF_MEMORY"
    code, sig = _exit(job[2])
    return JobState(state, "", code, sig, seconds(job[3]), _queued(job[4], job[5], now))


def from_scontrol(fields: dict[str, str], now: datetime) -> JobState:
    code, sig = _exit(fields.get("ExitCode", ""))
    state = fields.get("JobState", "UNKNOWN")
    restarts = int(fields.get("Restarts", "0") or 0)
    if state in ("PENDING", "REQUEUED") and restarts:
        state = "NODE_FAIL"  # requeued after its node failed (JobRequeue=1)
    queued = _queued(fields.get("SubmitTime", ""), fields.get("StartTime", ""), now)
    elapsed = seconds(fields.get("RunTime", ""))
    return JobState(state, fields.get("Reason", ""), code, sig, elapsed, queued, restarts)


def query(transport: Transport, job_id: str, now: datetime) -> JobState:
    """The job's state now (see the module text)."""
    done = transport.run(["squeue", "-h", "-j", job_id, "-o", _SQUEUE_FORMAT])
    row = done.stdout.decode("utf-8", "replace").strip().split("|")
    if done.returncode == 0 and len(row) == 5:
        if row[0] != "PENDING":  # pending: scontrol tells a job requeued after a node failure
            return JobState(
                row[0], row[1], None, None, seconds(row[2]), _queued(row[3], row[4], now)
            )
    elif done.returncode != 0 and b"Invalid job id" not in done.stderr:
        said = done.stderr.decode("utf-8", "replace").strip() or f"exit code {done.returncode}"
        raise SlurmError(f"squeue failed: {said.splitlines()[-1]}")
    if done.returncode != 0 or row == [""]:  # no longer queued: accounting first
        try:
            acct = transport.run(["sacct", "-j", job_id, "-P", "-n", "-o", _SACCT_FIELDS])
        except TransportError:
            acct = None
        if acct is not None and acct.returncode == 0:
            found = parse_sacct(acct.stdout.decode("utf-8", "replace"), job_id, now)
            if found is not None:
                return found
    shown = transport.run(["scontrol", "show", "job", job_id])
    if shown.returncode != 0:
        raise UnknownJob(f"Slurm knows no job {job_id} (squeue, sacct and scontrol have none)")
    return from_scontrol(parse_scontrol(shown.stdout.decode("utf-8", "replace")), now)


def _squeue_row(row: list[str], now: datetime) -> JobState:
    """A row of :data:`_SQUEUE_ALL`; ``exit_code`` is the wait status (code << 8 | signal)."""
    _, state, reason, status, used, submitted, started, restarts = row
    code = sig = None
    if status.isdigit() and state in TERMINAL:
        code, sig = int(status) >> 8, (int(status) & 0x7F) or None
    count = int(restarts) if restarts.isdigit() else 0
    if state in ("PENDING", "REQUEUED") and count:
        state = "NODE_FAIL"  # requeued after its node failed (JobRequeue=1)
    return JobState(
        state, reason, code, sig, seconds(used), _queued(submitted, started, now), count
    )


def query_many(transport: Transport, job_ids: Sequence[str], now: datetime) -> dict[str, JobState]:
    """The state of each of ``job_ids`` Slurm still knows, by job id, from one ``squeue``
    (every state slurmctld still holds) and, for the jobs that have ended or that squeue
    no longer shows, one ``sacct`` when accounting answers (see the module text)."""
    if not job_ids:
        return {}
    ids = ",".join(job_ids)
    done = transport.run(["squeue", "-h", "-t", "all", "-j", ids, "-O", _SQUEUE_ALL])
    if done.returncode != 0 and b"Invalid job id" not in done.stderr:
        said = done.stderr.decode("utf-8", "replace").strip() or f"exit code {done.returncode}"
        raise SlurmError(f"squeue failed: {said.splitlines()[-1]}")
    found: dict[str, JobState] = {}
    for line in done.stdout.decode("utf-8", "replace").splitlines():
        row = [field.strip() for field in line.split("|")]
        if len(row) == 8 and row[0] in job_ids:
            found[row[0]] = _squeue_row(row, now)
    left = [i for i in job_ids if i not in found or found[i].finished]
    if left:
        try:
            acct = transport.run(["sacct", "-j", ",".join(left), "-P", "-n", "-o", _SACCT_FIELDS])
        except TransportError:
            acct = None
        if acct is not None and acct.returncode == 0:
            text = acct.stdout.decode("utf-8", "replace")
            lines = text.splitlines()
            for job_id in left:
                mine = "\n".join(x for x in lines if x.split("|")[0].split(".")[0] == job_id)
                state = parse_sacct(mine, job_id, now)
                if state is not None:
                    found[job_id] = state
    return found


def nodes_to_exclude(transport: Transport, job_id: str) -> list[str]:
    """The nodes job ``job_id`` ran on, when its partition has other nodes (a job sent
    elsewhere then avoids them); [] when Slurm no longer tells, or no node would be left."""
    shown = transport.run(["scontrol", "show", "job", job_id])
    if shown.returncode != 0:
        return []
    fields = parse_scontrol(shown.stdout.decode("utf-8", "replace"))
    nodes, partition = fields.get("NodeList", ""), fields.get("Partition", "")
    if not nodes or nodes == "(null)" or not partition:
        return []
    names = transport.run(["scontrol", "show", "hostnames", nodes])
    listed = transport.run(["sinfo", "-h", "-N", "-p", partition, "-o", "%N"])
    if names.returncode != 0 or listed.returncode != 0:
        return []
    failed = sorted(set(names.stdout.decode("utf-8", "replace").split()))
    others = set(listed.stdout.decode("utf-8", "replace").split()) - set(failed)
    return failed if others else []
