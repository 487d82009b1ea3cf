"""local_slurm persistent mode on the real one-node Slurm (tests/slurm_cluster).

A build with ``persistent_mode`` runs inside the held allocation named by
``<repo_root>/work_dirs/.slurm_alloc.json``: the first job makes and records one
(without a shell), the next reuses it, the script's own exit status and log are
kept, ``release`` frees it, and a record of an allocation that is dead or in another
partition is not reused.
"""

from __future__ import annotations

import json
import platform
import re
import signal
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from scriptbuilder.lifecycle import allocation
from scriptbuilder.lifecycle.transport import LocalTransport, TransportError
from scriptbuilder.models.job_spec import JobSpec
from scriptbuilder.scenarios.time_limit import TIMEOUT_PATTERN, TIMEOUT_STATUS
from tests.build_env import BuildEnv, make_build_env
from tests.lifecycle_cli import Done
from tests.lifecycle_cli import scriptbuilder as run_cli
from tests.slurm_cluster.cluster import SlurmCluster
from tests.test_slurm_jobs import cluster_slurm_env

pytestmark = pytest.mark.slurm

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
JOB_NAME = "acct-trtllm.persistent"


@pytest.fixture
def slurm_shell(slurm_cluster: SlurmCluster, monkeypatch: pytest.MonkeyPatch) -> SlurmCluster:
    """Slurm commands of this process reach the test cluster (SLURM_CONF, tools on PATH)."""
    for name, value in slurm_cluster.env.items():
        if name in ("SLURM_CONF", "PATH"):
            monkeypatch.setenv(name, value)
    return slurm_cluster


@pytest.fixture
def checkout(slurm_shell: SlurmCluster, tmp_path: Path) -> Iterator[BuildEnv]:
    """A checkout whose allocation is released (and any left by a test cancelled) at the end."""
    env = make_build_env(tmp_path)
    env.slurm_env(**cluster_slurm_env(slurm_shell))
    yield env
    allocation.release(env.repo, LocalTransport())
    slurm_shell.run("scancel", f"--name={JOB_NAME}")


def build(env: BuildEnv, name: str, command: str, **fields: Any) -> JobSpec:
    """Build a persistent-mode custom job into its own work_dir; its job_spec.json."""
    work_dir = env.root / name
    work_dir.mkdir()
    (work_dir / "slurm_env.json").write_text((env.work_dir / "slurm_env.json").read_text())
    request = env.request(
        "custom",
        **{
            "work_dir": str(work_dir),
            "custom_cmd": command,
            "model_name": name,
            "required_devices": 1,
            "time_limit": "00:10:00",
            "models_path": str(env.root),
            **fields,
        },
    )
    env.build(request, environ={"HOME": str(env.root)}, machine=platform.machine).write()
    spec = JobSpec.model_validate_json((work_dir / "job_spec.json").read_bytes())
    assert spec.persistent_mode is True, spec
    return spec


def eventually(predicate: Callable[[], object], timeout: float, message: Callable[[], str]) -> None:
    """Poll ``predicate`` until it is true; fail with ``message()`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, message()
        time.sleep(0.1)


def wait_for_exit(run: allocation.PersistentRun, timeout: float = 120.0) -> int:
    transport = LocalTransport()
    eventually(
        lambda: allocation.exit_status(transport, run.status_path) is not None,
        timeout,
        lambda: f"no exit status after {timeout:g}s:\n{log_of(run)}",
    )
    status = allocation.exit_status(transport, run.status_path)
    assert status is not None
    return status


def log_of(run: allocation.PersistentRun) -> str:
    try:
        return Path(run.log_path).read_text(errors="replace")
    except FileNotFoundError:
        return "<no log>"


def job_state(cluster: SlurmCluster, job_id: str) -> str:
    return cluster.show_job(int(job_id)).get("JobState", "")


def salloc(cluster: SlurmCluster, partition: str, time_limit: str) -> str:
    """A held allocation made by hand, as the executor makes one."""
    done = cluster.run(
        "salloc",
        "--no-shell",
        f"--job-name={JOB_NAME}",
        f"--partition={partition}",
        "--account=acct",
        "--nodes=1",
        f"--time={time_limit}",
        timeout=120,
    )
    granted = re.search(r"Granted job allocation (\d+)", done.stderr)
    assert granted, done.stderr
    return granted.group(1)


def record(env: BuildEnv) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(allocation.record_path(env.repo).read_text())
    return data


def write_record(env: BuildEnv, spec: JobSpec, job_id: str, changes: dict[str, Any]) -> None:
    """The allocation record as the executor writes it, with ``changes``."""
    path = allocation.record_path(env.repo)
    path.parent.mkdir(parents=True, exist_ok=True)
    fields = {
        "job_id": job_id,
        "container_name": spec.container_name,
        "nodelist": "",
        "partition": "gpu",
        "account": "acct",
        "nodes": 1,
        "gpus_per_node": 8,
        "docker_image": spec.docker_image,
        "container_mounts": spec.container_mounts,
        "allocated_at": "2026-01-02T03:00:00",
        "time_limit": "01:00:00",
        "installed": True,
        **changes,
    }
    path.write_text(json.dumps(fields))


def test_first_job_makes_and_records_an_allocation_the_next_reuses(
    checkout: BuildEnv, slurm_shell: SlurmCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    # variables of a job this process would be in must not reach the script
    monkeypatch.setenv("SLURM_JOB_ID", "1")
    monkeypatch.setenv("SLURM_STEP_ID", "7")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "elsewhere")
    transport = LocalTransport()
    first = build(checkout, "first", "echo first job here")
    run = allocation.submit(first, transport, now=NOW)
    assert not run.reused
    rec = record(checkout)
    assert rec["job_id"] == run.allocation_job_id
    assert rec["partition"] == "gpu" and rec["account"] == "acct" and rec["nodes"] == 1
    assert rec["docker_image"] == first.docker_image
    assert rec["container_name"] == first.container_name
    assert rec["nodelist"] == slurm_shell.hostname
    assert rec["allocated_at"] == "2026-01-02T03:04:05+00:00"
    assert set(rec) == {
        *("job_id", "container_name", "nodelist", "partition", "account", "nodes"),
        *("gpus_per_node", "docker_image", "container_mounts", "allocated_at"),
        *("time_limit", "installed"),
    }
    info = slurm_shell.show_job(int(run.allocation_job_id))
    assert info["JobName"] == JOB_NAME and info["JobState"] == "RUNNING", info
    assert info.get("BatchFlag") == "0", info  # no batch script: a held allocation

    assert wait_for_exit(run) == 0, log_of(run)
    log = log_of(run)
    assert run.log_path == str(Path(first.work_dir) / "first_custom.log")
    assert f"Job {run.allocation_job_id} started at" in log
    assert "first job here" in log
    assert re.search(rf"Job {run.allocation_job_id} finished at .+ with exit code 0", log), log
    steps = slurm_shell.step_records(int(run.allocation_job_id))
    assert steps, "the script's srun steps ran in the allocation"
    assert {s["container_name"] for s in steps} == {first.container_name}, steps
    assert job_state(slurm_shell, run.allocation_job_id) == "RUNNING"  # held for the next

    second = build(checkout, "second", "echo second job; exit 3")
    again = allocation.submit(second, transport, now=NOW)
    assert again.reused and again.allocation_job_id == run.allocation_job_id
    assert wait_for_exit(again) == 3, log_of(again)
    assert "second job" in log_of(again)
    assert re.search(r"finished at .+ with exit code 3", log_of(again)), log_of(again)
    assert record(checkout)["job_id"] == run.allocation_job_id


def test_release_frees_the_allocation(checkout: BuildEnv, slurm_shell: SlurmCluster) -> None:
    transport = LocalTransport()
    spec = build(checkout, "job", "true")
    run = allocation.submit(spec, transport, now=NOW)
    assert wait_for_exit(run) == 0, log_of(run)
    assert allocation.release(checkout.repo, transport) == run.allocation_job_id
    assert not allocation.record_path(checkout.repo).exists()
    eventually(
        lambda: job_state(slurm_shell, run.allocation_job_id) in ("CANCELLED", ""),
        30,
        lambda: str(slurm_shell.show_job(int(run.allocation_job_id))),
    )
    assert allocation.release(checkout.repo, transport) is None


#: A record as the executor writes it, changed per case: (partition and time of the
#: held allocation, record changes, cancelled before the submit, reused).
RECORDS: dict[str, tuple[str, str, dict[str, Any], bool, bool]] = {
    "the executor's own": ("gpu", "01:00:00", {}, False, True),
    "dead": ("gpu", "01:00:00", {}, True, False),
    "another partition": ("cpu", "01:00:00", {"partition": "cpu"}, False, False),
    "under five minutes left": ("gpu", "00:04:00", {}, False, False),
    "another image": ("gpu", "01:00:00", {"docker_image": "nvcr.io#other/image:1"}, False, False),
    "fewer GPUs per node": ("gpu", "01:00:00", {"gpus_per_node": 4}, False, False),
}


@pytest.mark.parametrize("case", list(RECORDS))
def test_recorded_allocation_reused_only_when_it_fits(
    checkout: BuildEnv, slurm_shell: SlurmCluster, case: str
) -> None:
    partition, time_limit, changes, cancelled, reused = RECORDS[case]
    spec = build(checkout, "job", "echo in the allocation")
    held = salloc(slurm_shell, partition, time_limit)
    if cancelled:
        slurm_shell.run("scancel", held)
    write_record(checkout, spec, held, changes)
    run = allocation.submit(spec, LocalTransport(), now=NOW)
    assert run.reused is reused
    assert (run.allocation_job_id == held) is reused
    assert record(checkout)["job_id"] == run.allocation_job_id
    assert wait_for_exit(run) == 0, log_of(run)
    assert f"Job {run.allocation_job_id} started" in log_of(run)
    if not reused:  # a live stale allocation is not left holding the node
        assert job_state(slurm_shell, held) == "CANCELLED"
        assert record(checkout)["partition"] == "gpu"


@pytest.mark.parametrize(
    ("job_limit", "held_for", "window"),
    [
        # a one-minute job in a new four-hour allocation: warned half its limit early,
        # as a one-minute sbatch job is
        ("00:01:00", None, (20, 50)),
        # a ten-minute job (warned 300 s early) in an allocation with six minutes left:
        # warned about a minute in, before the allocation is gone, not five minutes in
        ("00:10:00", "00:06:00", (30, 90)),
    ],
    ids=["the job's limit", "the allocation's end"],
)
def test_the_closing_line_comes_before_the_first_limit(
    checkout: BuildEnv,
    slurm_shell: SlurmCluster,
    job_limit: str,
    held_for: str | None,
    window: tuple[float, float],
) -> None:
    spec = build(checkout, "job", "echo sleeping; sleep 600", time_limit=job_limit)
    if held_for is not None:
        write_record(checkout, spec, salloc(slurm_shell, "gpu", held_for), {})
    run = allocation.submit(spec, LocalTransport(), now=NOW)
    began = time.monotonic()
    assert run.reused is (held_for is not None)
    assert wait_for_exit(run, timeout=window[1] + 60) == TIMEOUT_STATUS, log_of(run)
    assert window[0] < time.monotonic() - began < window[1], log_of(run)
    closing = rf"Job {run.allocation_job_id} {TIMEOUT_PATTERN} \({job_limit}\)"
    assert re.search(closing, log_of(run)), log_of(run)


def test_stop_ends_the_script_and_keeps_the_allocation(
    checkout: BuildEnv, slurm_shell: SlurmCluster
) -> None:
    transport = LocalTransport()
    spec = build(checkout, "job", "echo sleeping; sleep 300")
    run = allocation.submit(spec, transport, now=NOW)
    eventually(lambda: "sleeping" in log_of(run), 60, lambda: log_of(run))
    assert allocation.running(transport, run.pid)
    allocation.stop(transport, run.pid)
    assert wait_for_exit(run, timeout=60) == 128 + signal.SIGTERM, log_of(run)
    eventually(
        lambda: not allocation.running(transport, run.pid),
        10,
        lambda: "the script's processes outlived its exit status",
    )
    assert job_state(slurm_shell, run.allocation_job_id) == "RUNNING"

    def steps() -> str:
        args = ("squeue", "--steps", "--noheader", "--jobs", run.allocation_job_id)
        return slurm_shell.run(*args).stdout.strip()

    eventually(lambda: steps() == "", 30, steps)  # its srun step ended with it


# ----- the same through the command line --------------------------------------------------------


def scriptbuilder(cluster: SlurmCluster, *args: str) -> Done:
    return run_cli(*args, env=cluster.env)


def test_submit_watch_release_on_the_command_line(
    checkout: BuildEnv, slurm_shell: SlurmCluster
) -> None:
    first = build(checkout, "first", "echo from the first job")
    submitted = scriptbuilder(slurm_shell, "submit", first.work_dir)
    assert submitted.returncode == 0, submitted.stderr
    record = json.loads(submitted.stdout)
    held = record["allocation"]["job_id"]
    assert record["job_id"] == held and record["allocation"]["reused"] is False, record
    assert record["stdout_path"] == str(Path(first.work_dir) / "first_custom.log")
    watched = scriptbuilder(slurm_shell, "watch", first.work_dir, "--interval", "0.5s")
    assert watched.returncode == 0, watched.stderr
    assert json.loads(watched.stdout)["verdict"] == "PASSED", watched.stdout

    second = build(checkout, "second", "echo from the second job; exit 3")
    submitted = scriptbuilder(slurm_shell, "submit", second.work_dir)
    assert submitted.returncode == 0, submitted.stderr
    assert json.loads(submitted.stdout)["allocation"] == {"job_id": held, "reused": True}
    watched = scriptbuilder(slurm_shell, "watch", second.work_dir, "--interval", "0.5s")
    verdict = json.loads(watched.stdout)
    assert watched.returncode == 1 and verdict["verdict"] == "FAILED", watched.stdout
    assert verdict["job_exit_code"] == 3, verdict

    released = scriptbuilder(slurm_shell, "release", second.work_dir)
    assert (released.returncode, released.stdout) == (0, f"released allocation {held}\n")
    assert job_state(slurm_shell, held) in ("CANCELLED", "COMPLETING", "")
    released = scriptbuilder(slurm_shell, "release", second.work_dir)
    assert released.returncode == 0 and released.stdout.startswith("no allocation recorded")


def test_an_allocation_slurm_refuses_is_one_line_and_records_nothing(
    checkout: BuildEnv, slurm_shell: SlurmCluster
) -> None:
    spec = build(checkout, "job", "true")
    assert spec.slurm_params is not None
    params = spec.slurm_params.model_copy(update={"partition": "nosuch"})
    spec = spec.model_copy(update={"slurm_params": params})
    with pytest.raises(TransportError) as caught:
        allocation.submit(spec, LocalTransport(), now=NOW)
    message = str(caught.value)
    assert "\n" not in message, message
    assert message.startswith("salloc could not hold an allocation in partition nosuch (")
    assert "check partition and account" in message, message
    assert not allocation.record_path(checkout.repo).exists()
    assert not Path(spec.work_dir, "job_custom.log").exists()
    queued = slurm_shell.run("squeue", "--noheader", f"--name={JOB_NAME}")
    assert queued.stdout.strip() == "", queued.stdout


def test_a_build_without_repo_root_is_refused(slurm_shell: SlurmCluster) -> None:
    with pytest.raises(TransportError, match=r"job_spec\.json has no repo_root"):
        allocation.submit(JobSpec.model_construct(), LocalTransport(), now=NOW)
