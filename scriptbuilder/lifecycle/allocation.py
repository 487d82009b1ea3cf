"""local_slurm persistent mode: the script runs inside a held allocation.

The allocation is the one the local Slurm executor keeps too, named by its record
``<repo_root>/work_dirs/.slurm_alloc.json`` (keys ``job_id, container_name,
nodelist, partition, account, nodes, gpus_per_node, docker_image,
container_mounts, allocated_at, time_limit, installed``), so the executor and
scriptbuilder share one allocation.

Functions, in the order a submit calls them:

- :func:`acquire` ``(job_spec, transport, *, now) -> (Allocation, reused)``: the recorded
  allocation when Slurm says it is RUNNING with more than
  :data:`REUSE_MARGIN_SECONDS` left, in the job's partition, made for the job's
  image and with at least the job's nodes (and GPUs per node, when both are
  known); otherwise the recorded one is cancelled (when still alive) and a new
  one is made without a shell (``salloc --no-shell``, job name
  ``<account>-trtllm.persistent`` as the executor names it, waiting at most
  :data:`GRANT_WAIT_SECONDS` for the grant) and recorded (atomic write).
- :func:`start` ``(job_spec, allocation, transport, *, reused) -> PersistentRun``:
  starts ``bash <script_path>`` detached from the caller (``setsid``), in
  ``work_dir``, with the ``SLURM_*`` variables the executor exports
  (``SLURM_JOB_ID, SLURM_JOB_NUM_NODES, SLURM_NNODES, SLURM_NTASKS,
  SLURM_NTASKS_PER_NODE, SLURM_NODELIST, SLURM_JOB_NODELIST``) plus
  ``SLURM_JOB_END_TIME``: the job's own time limit counted from now, or the
  allocation's end when that comes first, so the script's time-limit line
  comes before either (Slurm variables the caller inherited from a job of its
  own are dropped; ``SLURM_CONF`` stays). Standard output and error go to
  ``<work_dir>/<model_name>_<workflow_type>.log``; when the script ends, its
  exit status is written to ``<model_name>_<workflow_type>.exit_code`` there
  (atomically: the file is whole or absent), its pid to ``.pid``. The returned
  :class:`PersistentRun` holds the allocation's job id, the pid of the
  process group leader and both paths.
- :func:`submit` ``(job_spec, transport, *, now) -> PersistentRun``: the two above
  (``now`` is the clock of the record's ``allocated_at``).
- :func:`exit_status` ``(transport, status_path) -> int | None``: the script's
  exit status, None while it has not ended (or never started).
- :func:`running` ``(transport, pid) -> bool``: whether the script's process
  group still has a process.
- :func:`stop` ``(transport, pid) -> None``: SIGTERM to the script's process
  group (its ``srun`` steps end with it); the exit status is still written. The
  allocation stays.
- :func:`release` ``(repo_root, transport) -> str | None``: ``scancel`` of the
  recorded allocation and removal of the record; the job id, or None when there
  was no record.

Allocations with the executor's job name that no record names are left alone
(another checkout's record may name them).

Failures (a job_spec.json without the fields persistent mode needs, ``salloc``
refusing or not granting in time) raise :class:`TransportError` with one line
naming the cause and the fix.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shlex
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from scriptbuilder.inputs.slurm_time import time_limit_minutes
from scriptbuilder.lifecycle import slurm
from scriptbuilder.lifecycle.errors import TransportError
from scriptbuilder.lifecycle.transport import Transport
from scriptbuilder.models.job_spec import JobSpec, SlurmParams
from scriptbuilder.outputs.atomic import write_atomic

#: Where the executor and scriptbuilder record the allocation, under repo_root.
RECORD = Path("work_dirs") / ".slurm_alloc.json"
#: Held while the record is read and replaced (one allocation per checkout).
_LOCK = Path("work_dirs") / ".slurm_alloc.lock"
#: An allocation with this little time left is not reused (the executor's rule).
REUSE_MARGIN_SECONDS = 300
#: The time limit of a new allocation, unless the job's own limit is longer.
DEFAULT_TIME_LIMIT = "04:00:00"
#: How long ``salloc`` may wait for the grant before it gives the request up.
GRANT_WAIT_SECONDS = 600
#: The executor's job name is ``<account>`` followed by this.
JOB_NAME_SUFFIX = "-trtllm.persistent"
#: How long :func:`start` waits for the detached script to report its pid.
_PID_WAIT_SECONDS = 10.0

#: The detached wrapper (``bash -c``; arguments: script, log, status file, pid file,
#: work_dir, then ``NAME=VALUE`` words): drops the Slurm variables it inherited (but
#: SLURM_CONF, which names the cluster) and exports the allocation's, records its pid,
#: runs the script with its output in the log, passes SIGTERM on to it, and writes its
#: exit status once it has ended, through a temporary name.
_WRAPPER = """\
exec </dev/null >/dev/null 2>&1
cd -- "$5" || exit 1
for name in $(compgen -e); do
  case "$name" in
    SLURM_CONF) ;;
    SLURM_*|SBATCH_*|SRUN_*|SALLOC_*|ENVIRONMENT) unset "$name" ;;
  esac
done
script=$1 log=$2 status=$3 pid_file=$4
shift 5
export "$@"
printf '%s\\n' "$$" > "$pid_file.tmp" && mv -f -- "$pid_file.tmp" "$pid_file"
child=''
trap 'kill -TERM "$child" 2>/dev/null' TERM
bash -- "$script" > "$log" 2>&1 &
child=$!
while :; do
  wait "$child"
  rc=$?
  kill -0 "$child" 2>/dev/null || break
done
printf '%s\\n' "$rc" > "$status.tmp" && mv -f -- "$status.tmp" "$status"
"""
_GRANTED = re.compile(r"Granted job allocation (\d+)")
_PENDING = re.compile(r"job allocation (\d+)")


@dataclass(frozen=True)
class Allocation:
    """The record's fields (``.slurm_alloc.json``), as the executor writes them."""

    job_id: str
    container_name: str | None
    nodelist: str
    partition: str
    account: str
    nodes: int
    gpus_per_node: int | None
    docker_image: str
    container_mounts: str | None
    allocated_at: str
    time_limit: str
    installed: bool

    @classmethod
    def from_record(cls, data: Mapping[str, Any]) -> Allocation | None:
        """The allocation of a parsed record; None when a field the reuse check
        needs is missing or of the wrong kind (the record is then not reused)."""
        try:
            gpus = data.get("gpus_per_node")
            return cls(
                job_id=str(int(data["job_id"])),
                container_name=_str_or_none(data.get("container_name")),
                nodelist=str(data.get("nodelist") or ""),
                partition=str(data["partition"]),
                account=str(data.get("account") or ""),
                nodes=int(data["nodes"]),
                gpus_per_node=int(gpus) if gpus is not None else None,
                docker_image=str(data["docker_image"]),
                container_mounts=_str_or_none(data.get("container_mounts")),
                allocated_at=str(data.get("allocated_at") or ""),
                time_limit=str(data.get("time_limit") or ""),
                installed=bool(data.get("installed", False)),
            )
        except (KeyError, TypeError, ValueError):
            return None


@dataclass(frozen=True)
class PersistentRun:
    """A script started inside an allocation: what a run record needs."""

    allocation_job_id: str
    pid: int
    log_path: str
    status_path: str
    reused: bool


@dataclass(frozen=True)
class _Live:
    """What squeue says of an allocation."""

    state: str
    seconds_left: int | None  # None: no limit
    partition: str
    nodes: int
    nodelist: str


def _str_or_none(value: object) -> str | None:
    return None if value is None else str(value)


def _spec_field(job_spec: JobSpec, name: str) -> str:
    value = getattr(job_spec, name)
    if value in (None, ""):
        raise TransportError(
            f"job_spec.json has no {name}, which persistent mode needs; rebuild the job "
            "(scriptbuilder build) or set persistent_mode false"
        )
    return str(value)


def _params(job_spec: JobSpec) -> SlurmParams:
    if job_spec.slurm_params is None:
        _spec_field(job_spec, "slurm_params")
    assert job_spec.slurm_params is not None
    return job_spec.slurm_params


def record_path(repo_root: str | os.PathLike[str]) -> Path:
    """``<repo_root>/work_dirs/.slurm_alloc.json``."""
    return Path(repo_root) / RECORD


def read_record(repo_root: str | os.PathLike[str]) -> Allocation | None:
    """The recorded allocation; None when there is no record or it cannot be used."""
    try:
        data = json.loads(record_path(repo_root).read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError, ValueError):
        return None
    return Allocation.from_record(data) if isinstance(data, dict) else None


def _write_record(repo_root: str, allocation: Allocation) -> None:
    path = record_path(repo_root)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(asdict(allocation), indent=2) + "\n")


@contextlib.contextmanager
def _locked(repo_root: str) -> Iterator[None]:
    path = Path(repo_root) / _LOCK
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _seconds_left(text: str) -> int | None:
    """Seconds in squeue's ``%L``; None for no limit; 0 for what is not a time."""
    if text.upper() in ("UNLIMITED", "NOT_SET"):
        return None
    seconds = slurm.seconds(text)
    return int(seconds) if seconds is not None else 0


def _live(transport: Transport, job_id: str) -> _Live | None:
    """squeue's view of the allocation; None when Slurm no longer knows it."""
    result = transport.run(
        ["squeue", "--jobs", job_id, "--states=all", "--noheader", "--format=%T|%L|%P|%D|%N"],
        timeout=60,
    )
    lines = result.stdout.decode(errors="replace").splitlines()
    fields = lines[0].strip().split("|") if result.returncode == 0 and lines else []
    if len(fields) != 5:
        return None
    state, left, partition, nodes, nodelist = fields
    count = int(nodes) if nodes.isdigit() else 0
    return _Live(state, _seconds_left(left), partition, count, nodelist)


def _fits(allocation: Allocation, live: _Live, job_spec: JobSpec) -> bool:
    params = _params(job_spec)
    needed_gpus = params.gpus_per_node
    return (
        live.state == "RUNNING"
        and (live.seconds_left is None or live.seconds_left > REUSE_MARGIN_SECONDS)
        and live.partition == allocation.partition == params.partition
        and allocation.docker_image == job_spec.docker_image
        and min(allocation.nodes, live.nodes) >= (params.nodes or 1)
        and (
            needed_gpus is None
            or allocation.gpus_per_node is None
            or allocation.gpus_per_node >= needed_gpus
        )
    )


def _one_line(data: bytes) -> str:
    lines = [line.strip() for line in data.decode(errors="replace").splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower()]
    return (errors or lines or ["no output"])[-1]


def _new_time_limit(job_limit: str) -> str:
    """The executor's four hours, or the job's limit when that is longer."""
    try:
        minutes = time_limit_minutes(job_limit)
    except ValueError:
        return DEFAULT_TIME_LIMIT
    default = time_limit_minutes(DEFAULT_TIME_LIMIT) or 0
    return job_limit if minutes is None or minutes > default else DEFAULT_TIME_LIMIT


def _allocate(job_spec: JobSpec, transport: Transport, *, now: datetime) -> Allocation:
    params = _params(job_spec)
    partition, account, nodes = params.partition, params.account, params.nodes or 1
    time_limit = _new_time_limit(params.time_limit or DEFAULT_TIME_LIMIT)
    argv = [
        "salloc",
        "--no-shell",
        f"--immediate={GRANT_WAIT_SECONDS}",
        f"--job-name={account}{JOB_NAME_SUFFIX}",
        f"--partition={partition}",
        f"--account={account}",
        f"--nodes={nodes}",
        f"--ntasks-per-node={params.ntasks_per_node or 1}",
        f"--time={time_limit}",
    ]
    if params.gres:
        argv.append(f"--gres={params.gres}")
    result = transport.run(argv, timeout=GRANT_WAIT_SECONDS + 60)
    granted = _GRANTED.search(result.stderr.decode(errors="replace"))
    if result.returncode != 0 or granted is None:
        pending = _PENDING.search(result.stderr.decode(errors="replace"))
        if pending is not None:  # never leave a request behind
            transport.run(["scancel", pending.group(1)], timeout=60)
        raise TransportError(
            f"salloc could not hold an allocation in partition {partition} "
            f"({_one_line(result.stderr)}); check partition and account in the request, "
            "or set persistent_mode false to submit with sbatch"
        )
    job_id = granted.group(1)
    live = _live(transport, job_id)
    return Allocation(
        job_id=job_id,
        container_name=job_spec.container_name,
        nodelist=live.nodelist if live else "",
        partition=partition,
        account=account,
        nodes=live.nodes if live and live.nodes else nodes,
        gpus_per_node=params.gpus_per_node,
        docker_image=_spec_field(job_spec, "docker_image"),
        container_mounts=job_spec.container_mounts,
        allocated_at=now.isoformat(timespec="seconds"),
        time_limit=time_limit,
        installed=False,
    )


def acquire(job_spec: JobSpec, transport: Transport, *, now: datetime) -> tuple[Allocation, bool]:
    """The allocation the job runs in and whether it was reused (see the module text)."""
    repo_root = _spec_field(job_spec, "repo_root")
    with _locked(repo_root):
        recorded = read_record(repo_root)
        if recorded is not None:
            live = _live(transport, recorded.job_id)
            if live is not None and _fits(recorded, live, job_spec):
                # the nodes as Slurm has them (a record may leave nodelist empty)
                return replace(recorded, nodelist=live.nodelist or recorded.nodelist), True
            if live is not None and live.state in ("RUNNING", "PENDING", "CONFIGURING"):
                transport.run(["scancel", recorded.job_id], timeout=60)
        allocation = _allocate(job_spec, transport, now=now)
        _write_record(repo_root, allocation)
        return allocation, False


def _run_paths(job_spec: JobSpec) -> tuple[str, str, str]:
    work_dir = _spec_field(job_spec, "work_dir")
    stem = f"{_spec_field(job_spec, 'model_name')}_{_spec_field(job_spec, 'workflow_type')}"
    base = os.path.join(work_dir, stem)
    return f"{base}.log", f"{base}.exit_code", f"{base}.pid"


def _slurm_env(job_spec: JobSpec, allocation: Allocation, end_time: int | None) -> dict[str, str]:
    params = _params(job_spec)
    nodes = str(params.nodes or allocation.nodes)
    env = {
        "SLURM_JOB_ID": allocation.job_id,
        "SLURM_JOB_NUM_NODES": nodes,
        "SLURM_NNODES": nodes,
        "SLURM_NTASKS": str(params.ntasks or 1),
        "SLURM_NTASKS_PER_NODE": str(params.ntasks_per_node or 1),
        "SLURM_NODELIST": allocation.nodelist,
        "SLURM_JOB_NODELIST": allocation.nodelist,
    }
    if end_time is not None:
        env["SLURM_JOB_END_TIME"] = str(end_time)
    return env


def _end_time(job_spec: JobSpec, allocation: Allocation, transport: Transport) -> int | None:
    """The earlier of the job's time limit from now and the allocation's end
    (epoch seconds, by this machine's clock: the script compares it with
    ``date +%s``); None when neither has a limit."""
    limits: list[int] = []
    try:
        minutes = time_limit_minutes(_params(job_spec).time_limit or "infinite")
    except ValueError:
        minutes = None
    if minutes is not None:
        limits.append(minutes * 60)
    live = _live(transport, allocation.job_id)
    if live is not None and live.seconds_left is not None:
        limits.append(live.seconds_left)
    return int(time.time()) + min(limits) if limits else None


def start(
    job_spec: JobSpec,
    allocation: Allocation,
    transport: Transport,
    *,
    reused: bool = False,
) -> PersistentRun:
    """Start the job's script detached inside ``allocation`` (see the module text)."""
    script = _spec_field(job_spec, "script_path")
    work_dir = _spec_field(job_spec, "work_dir")
    log_path, status_path, pid_path = _run_paths(job_spec)
    transport.run(["rm", "-f", "--", status_path, pid_path], timeout=30)  # of an earlier run
    env = _slurm_env(job_spec, allocation, _end_time(job_spec, allocation, transport))
    argv = [
        *("setsid", "--fork", "bash", "-c", _WRAPPER, "scriptbuilder-persistent"),
        *(script, log_path, status_path, pid_path, work_dir),
        *(f"{name}={value}" for name, value in env.items()),
    ]
    result = transport.run(argv, timeout=60)
    if result.returncode != 0:
        raise TransportError(
            f"could not start {shlex.quote(script)} in allocation {allocation.job_id} "
            f"({_one_line(result.stderr)}); check that setsid and bash are installed"
        )
    pid = _wait_for_pid(transport, pid_path)
    return PersistentRun(allocation.job_id, pid, log_path, status_path, reused)


def _wait_for_pid(transport: Transport, pid_path: str) -> int:
    deadline = time.monotonic() + _PID_WAIT_SECONDS
    while True:
        data = transport.read_head(pid_path, 64)
        if data is not None and data.endswith(b"\n") and data.strip().isdigit():
            return int(data)
        if time.monotonic() > deadline:
            raise TransportError(
                f"the script did not start within {_PID_WAIT_SECONDS:g}s (no {pid_path}); "
                "check that work_dir exists and is writable"
            )
        time.sleep(0.05)


def submit(job_spec: JobSpec, transport: Transport, *, now: datetime) -> PersistentRun:
    """:func:`acquire` then :func:`start`."""
    allocation, reused = acquire(job_spec, transport, now=now)
    return start(job_spec, allocation, transport, reused=reused)


def exit_status(transport: Transport, status_path: str) -> int | None:
    """The script's exit status once it has ended; None before."""
    data = transport.read_head(status_path, 64)
    if data is None or not data.strip().isdigit():
        return None
    return int(data)


def running(transport: Transport, pid: int) -> bool:
    """Whether a process of the script's process group is alive."""
    return transport.run(["kill", "-0", "--", f"-{pid}"], timeout=30).returncode == 0


def stop(transport: Transport, pid: int) -> None:
    """SIGTERM to the script's process group; the allocation stays."""
    transport.run(["kill", "-TERM", "--", f"-{pid}"], timeout=30)


def release(repo_root: str | os.PathLike[str], transport: Transport) -> str | None:
    """Cancel the recorded allocation and remove the record; its job id, or None."""
    root = os.fspath(repo_root)
    with _locked(root):
        path = record_path(root)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except ValueError:
            data = {}
        job_id = str(data.get("job_id", "")) if isinstance(data, dict) else ""
        if job_id:
            result = transport.run(["scancel", job_id], timeout=60)
            live = _live(transport, job_id) if result.returncode != 0 else None
            if live is not None and live.state in ("RUNNING", "PENDING"):
                raise TransportError(
                    f"scancel {job_id} failed ({_one_line(result.stderr)}); "
                    f"cancel it by hand (scancel {job_id}), then run release again"
                )
        path.unlink(missing_ok=True)
        return job_id or None
