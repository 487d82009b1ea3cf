"""submit then watch on the real one-node Slurm (tests/slurm_cluster): every verdict
from a real job, for the pytest and the custom workflows.

The jobs of the table are built, submitted and watched at once (one ``watch``
process each, non-interactive), then checked one by one; the node-failure jobs run
after them, alone on the node, and ``watch`` on a terminal runs in a real
pseudo-terminal. A pytest job's behaviour comes from the pytest stand-in (its exit
code, its printed summary, a device guard that skips the test) or, to hang or
outlive the time limit, from a ``pytest`` put first on the job's PATH.
"""

from __future__ import annotations

import fcntl
import itertools
import json
import os
import platform
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from scriptbuilder.lifecycle.slurm import SlurmError, sbatch
from scriptbuilder.lifecycle.transport import LocalTransport
from tests.build_env import make_build_env
from tests.lifecycle_cli import scriptbuilder
from tests.slurm_cluster.cluster import SlurmCluster, parse_scontrol
from tests.test_slurm_jobs import cluster_slurm_env
from tests.test_slurm_perf import perf_request

pytestmark = pytest.mark.slurm

WORKFLOWS = ["pytest", "custom"]
HANG = 'echo "Hang detected after 300 seconds"; sleep 300'
# per case: (custom command, or what the pytest job's pytest does), with "" = the stand-in
CASES: dict[str, dict[str, Any]] = {
    "pass": {"custom": 'echo "step one"; sleep 2; echo done', "verdict": "PASSED", "rc": 0},
    "fail": {"custom": "echo going; exit 3", "verdict": "FAILED", "rc": 1},
    "skipped": {"custom": 'echo "1 skipped in 0.01s"', "verdict": "NO_TESTS_RAN", "rc": 3},
    "timeout": {"custom": "sleep 120", "pytest": "sleep 120", "verdict": "TIMEOUT", "rc": 4},
    "hang": {"custom": HANG, "pytest": HANG, "verdict": "HANG_DETECTED", "rc": 5},
    "cancelled": {"custom": "sleep 300", "pytest": "sleep 300", "verdict": "CANCELLED", "rc": 6},
    "never-starts": {"custom": "true", "verdict": "MONITOR_TIMEOUT", "rc": 9},
}
STANDIN = {  # the pytest stand-in's environment per case
    "pass": {"STANDIN_STDOUT": "1 passed in 0.01s"},
    "fail": {"STANDIN_EXIT_CODE": "1", "STANDIN_STDOUT": "1 failed in 0.01s"},
}
PYTEST_FILE = "accuracy/test_llm_api_pytorch.py"
TEST_ID = f"{PYTEST_FILE}::TestQwen3_30B_A3B::test_auto_dtype[tp4-attn_backend=TRTLLM]"


@dataclass
class Job:
    """One built work_dir, its submit environment, and (once watched) its verdict."""

    key: str
    workflow: str
    work_dir: Path
    env: dict[str, str]
    job_id: str = ""
    watch: subprocess.Popen[str] | None = None
    out: str = ""
    err: str = ""
    rc: int | None = None
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def verdict(self) -> dict[str, Any]:
        assert self.out.strip(), f"{self.key}: no verdict; stderr:\n{self.err}"
        data: dict[str, Any] = json.loads(self.out)
        return data

    def finish(self) -> None:
        assert self.watch is not None
        self.out, self.err = self.watch.communicate(timeout=400)
        self.rc = self.watch.returncode


def build_job(
    cluster: SlurmCluster, root: Path, key: str, workflow: str, action: str, **fields: Any
) -> Job:
    """Build the work_dir of ``action`` (a CASES key) for ``workflow``."""
    case = CASES[action]
    env = make_build_env(root / key)
    probe = cluster_slurm_env(cluster)
    if (
        case.get("nodes") and workflow == "custom"
    ):  # the probe believes in 4 nodes of 2 GPUs: a 4-GPU job needs 2
        probe["partitions"][0].update(nodes="4", gres="gpu:2", gpus_per_node=2)
    env.slurm_env(**probe)
    home = root / key / "home"
    home.mkdir()
    job_env = cluster.job_env(env_extra={"HOME": str(home)})
    request: dict[str, Any] = {
        "partition": cluster.partitions["gpu"],
        "models_path": str(home),
        "persistent_mode": False,
        # Slurm may send the time-limit warning (--signal) up to 60 s early, so only the
        # job meant to outlive its limit gets a one-minute one
        "time_limit": "00:01:00" if action == "timeout" else "00:10:00",
    }
    if workflow == "custom":
        request.update(custom_cmd=case["custom"], required_devices=1)
    else:
        request["test_cmd"] = f"pytest -v '{TEST_ID}'"
        test_file = env.repo / "tests/integration/defs" / PYTEST_FILE
        if action == "skipped":  # the test's device guard wants more GPUs than the node has
            test_file.with_name(test_file.name + ".gpus").write_text(">=16")
        job_env.update(STANDIN.get(action, {}))
        if case.get("pytest"):
            shim = root / key / "bin"
            shim.mkdir()
            (shim / "pytest").write_text(f"#!/bin/bash\n{case['pytest']}\n")
            (shim / "pytest").chmod(0o755)
            job_env["PATH"] = f"{shim}:{job_env['PATH']}"
    request.update(fields)
    built = env.build(
        env.request(workflow, **request), environ={"HOME": str(home)}, machine=platform.machine
    )
    built.write()
    return Job(key, workflow, env.work_dir, job_env)


def submit(job: Job, *args: str) -> None:
    done = scriptbuilder("submit", str(job.work_dir), *args, env=job.env)
    assert done.returncode == 0, done.stderr
    job.job_id = json.loads(done.stdout)["job_id"]


def start_watch(job: Job, *args: str) -> None:
    job.watch = subprocess.Popen(
        [sys.executable, "-m", "scriptbuilder", "watch", str(job.work_dir), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=job.env,
    )


def show(cluster: SlurmCluster, job_id: str) -> dict[str, str]:
    return parse_scontrol(cluster.run("scontrol", "show", "job", job_id).stdout)


def wait_state(cluster: SlurmCluster, job_id: str, states: set[str], timeout: float = 180) -> str:
    deadline = time.monotonic() + timeout
    while True:
        state = show(cluster, job_id).get("JobState", "")
        if state in states or time.monotonic() > deadline:
            return state
        time.sleep(0.3)


def epoch(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


@pytest.fixture(scope="module")
def jobs(
    slurm_cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Job]]:
    root = tmp_path_factory.mktemp("lifecycle")
    table: dict[str, Job] = {}
    for action in CASES:
        for workflow in WORKFLOWS:
            key = f"{workflow}-{action}"
            table[key] = build_job(slurm_cluster, root, key, workflow, action)
    for workflow in WORKFLOWS:  # --after: the second waits for the first
        for key in (f"{workflow}-first", f"{workflow}-second"):
            table[key] = build_job(slurm_cluster, root, key, workflow, "pass")
    for key, job in table.items():
        if key.endswith("-second"):
            submit(job, "--after", table[key.replace("second", "first")].job_id)
        else:
            submit(job)
        if key.endswith("never-starts"):  # held while queued behind the jobs before it
            slurm_cluster.run("scontrol", "hold", job.job_id)
    for key, job in table.items():
        if key.endswith("never-starts"):
            start_watch(job, "--interval", "1s", "--timeout", "4s")
        else:
            start_watch(job, "--interval", "1s", "--timeout", "300s")
    outside = [job for key, job in table.items() if key.endswith("-cancelled")]

    def cancel_from_outside() -> None:
        for job in outside:
            wait_state(slurm_cluster, job.job_id, {"RUNNING"})
            time.sleep(1)
            slurm_cluster.run("scancel", job.job_id)

    canceller = threading.Thread(target=cancel_from_outside)
    canceller.start()
    for job in table.values():
        job.finish()
    canceller.join()
    try:
        yield table
    finally:
        for job in table.values():
            slurm_cluster.run("scancel", job.job_id)


@pytest.mark.parametrize("workflow", WORKFLOWS)
@pytest.mark.parametrize("action", list(CASES))
def test_verdict_of_a_real_job(
    jobs: dict[str, Job], slurm_cluster: SlurmCluster, workflow: str, action: str
) -> None:
    job = jobs[f"{workflow}-{action}"]
    verdict = job.verdict
    info = show(slurm_cluster, job.job_id)
    why = f"{job.key}: {verdict}\n--- watch stderr:\n{job.err}\n--- scontrol: {info}"
    assert verdict["verdict"] == CASES[action]["verdict"], why
    assert job.rc == CASES[action]["rc"], why
    assert verdict["job_id"] == job.job_id
    run = json.loads((job.work_dir / "run.json").read_text())
    assert verdict["logs"]["out"] == run["stdout_path"] == info.get("StdOut"), why
    if action != "never-starts":
        assert Path(run["stdout_path"]).is_file(), why
        assert verdict["excerpt"]["out_last_100"], why
    if action == "pass" and workflow == "pytest":
        assert verdict["pytest"] == {"passed": 1}, why
    if action == "skipped":
        assert verdict["pytest"] == {"skipped": 1}, why
    if action == "fail":
        assert verdict["job_exit_code"] != 0 and "err_first_50" in verdict["excerpt"], why
    if action == "timeout":
        assert verdict["matched_patterns"]["timeout"], why
    if action == "hang":
        # cancelled within one poll interval (1 s) of the line, plus Slurm's own latency
        assert info["JobState"] == "CANCELLED", why
        log = Path(run["stdout_path"]).read_text()
        assert "Hang detected after 300 seconds" in log, why
        assert epoch(info["EndTime"]) - epoch(info["StartTime"]) < 15, why
        assert run["ended_by"] == "hang", why
    if action == "cancelled":
        assert run["ended_by"] is None, why  # cancelled from outside, not by watch
    if action == "never-starts":
        assert info["JobState"] == "PENDING" and verdict["state"] == "PENDING", why
        assert info["Reason"] in ("JobHeldAdmin", "JobHeldUser"), why
        # left alone; a second watch cancels it at its time-out when asked to
        again = scriptbuilder(
            "watch",
            str(job.work_dir),
            "--timeout",
            "2s",
            "--interval",
            "1s",
            "--cancel-on-timeout",
            env=job.env,
        )
        assert again.returncode == 9, again.stderr
        assert wait_state(slurm_cluster, job.job_id, {"CANCELLED"}, 30) == "CANCELLED"
        status = scriptbuilder("status", str(job.work_dir), "--json", env=job.env)
        assert json.loads(status.stdout)["verdict"] == "MONITOR_TIMEOUT", status.stdout
        assert status.returncode == 9


@pytest.mark.parametrize("workflow", WORKFLOWS)
def test_after_orders_two_jobs(
    jobs: dict[str, Job], slurm_cluster: SlurmCluster, workflow: str
) -> None:
    first, second = jobs[f"{workflow}-first"], jobs[f"{workflow}-second"]
    assert first.verdict["verdict"] == second.verdict["verdict"] == "PASSED", second.err
    one, two = show(slurm_cluster, first.job_id), show(slurm_cluster, second.job_id)
    assert two["Dependency"] in ("(null)", f"afterok:{first.job_id}(unfulfilled)"), two
    assert epoch(two["StartTime"]) >= epoch(one["EndTime"]), (one, two)
    assert json.loads((second.work_dir / "run.json").read_text())["after"] == first.job_id


def test_watch_without_a_terminal_prints_one_line_per_state(jobs: dict[str, Job]) -> None:
    lines = jobs["custom-cancelled"].err.splitlines()  # running until cancelled from outside
    states = [line.split()[2] for line in lines]
    assert states[-1] == "CANCELLED" and lines[-1].endswith("-> CANCELLED"), lines
    assert "RUNNING" in states, lines
    # a line when the state (or the queue reason) changes, never the same one twice
    changes = [re.sub(r" \d+:\d\d:\d\d", "", line).split(" | ")[0] for line in lines]
    assert all(a != b for a, b in itertools.pairwise(changes)), lines
    assert not any("\r" in line or "\x1b" in line for line in lines), lines


def test_second_submit_refused_unless_again(jobs: dict[str, Job]) -> None:
    job = jobs["custom-pass"]
    done = scriptbuilder("submit", str(job.work_dir), env=job.env)
    assert done.returncode == 2 and done.stdout == "", done
    assert f"already submitted as job {job.job_id}" in done.stderr
    assert "--again" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert json.loads((job.work_dir / "run.json").read_text())["job_id"] == job.job_id


def forgetful_slurm(root: Path) -> Path:
    """A folder to put first on PATH: Slurm's tools as they answer once Slurm has
    forgotten a job (no accounting, MinJobAge passed)."""
    folder = root / "forgetful"
    folder.mkdir(exist_ok=True)
    for name, said in (
        ("squeue", "slurm_load_jobs error: Invalid job id specified"),
        ("sacct", "sacct: error: Slurm accounting storage is disabled"),
        ("scontrol", "slurm_load_jobs error: Invalid job id specified"),
    ):
        (folder / name).write_text(f"#!/bin/bash\necho '{said}' >&2\nexit 1\n")
        (folder / name).chmod(0o755)
    return folder


@pytest.mark.parametrize("workflow", WORKFLOWS)
@pytest.mark.parametrize("action", ["pass", "fail", "timeout"])
def test_the_end_is_remembered_once_slurm_forgets_the_job(
    jobs: dict[str, Job], tmp_path: Path, workflow: str, action: str
) -> None:
    """run.json holds the kind and the final report; once Slurm knows the job no more,
    status returns that report, and without it the script's closing line decides."""
    job = jobs[f"{workflow}-{action}"]
    run_json = job.work_dir / "run.json"
    run = json.loads(run_json.read_text())
    assert run["kind"] == "sbatch" and run["report"] == job.verdict, run
    env = {**job.env, "PATH": f"{forgetful_slurm(tmp_path)}:{job.env['PATH']}"}
    done = scriptbuilder("status", str(job.work_dir), "--json", env=env)
    assert done.returncode == CASES[action]["rc"], done.stderr
    assert json.loads(done.stdout) == job.verdict
    run["report"] = None  # as a watcher killed before the job ended leaves it
    run_json.write_text(json.dumps(run))
    done = scriptbuilder("status", str(job.work_dir), "--json", env=env)
    assert done.returncode == CASES[action]["rc"], done.stderr
    report = json.loads(done.stdout)
    assert report["verdict"] == CASES[action]["verdict"], report
    assert (report["state_source"], report["phase"]) == ("closing line", "ended"), report
    assert json.loads(run_json.read_text())["report"] == report
    line = scriptbuilder("status", str(job.work_dir), env=env)
    assert line.returncode == CASES[action]["rc"], line.stderr
    assert line.stdout.endswith(f"-> {CASES[action]['verdict']}\n"), line.stdout


def test_submit_over_a_running_job_of_another_build(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    first = build_job(slurm_cluster, tmp_path, "first", "custom", "cancelled")
    submit(first)
    assert wait_state(slurm_cluster, first.job_id, {"RUNNING"}) == "RUNNING"
    second = build_job(
        slurm_cluster, tmp_path, "second", "custom", "pass", work_dir=str(first.work_dir)
    )
    assert second.work_dir != first.work_dir  # (its own sandbox; the build went to first's)
    refused = scriptbuilder("submit", str(first.work_dir), env=first.env)
    assert refused.returncode == 2 and refused.stdout == "", refused
    (line,) = refused.stderr.splitlines()
    assert f"holds job {first.job_id} of an earlier build" in line and "--again" in line, line
    assert show(slurm_cluster, first.job_id)["JobState"] == "RUNNING"
    again = scriptbuilder("submit", str(first.work_dir), "--again", env=first.env)
    assert again.returncode == 0, again.stderr
    assert f"cancelled job {first.job_id}" in again.stderr
    record = json.loads((first.work_dir / "run.json").read_text())
    assert record["replaces"] == {"job_id": first.job_id, "cancelled": True}, record
    assert record["job_id"] not in ("", first.job_id), record
    assert wait_state(slurm_cluster, first.job_id, {"CANCELLED"}, 60) == "CANCELLED"
    watched = scriptbuilder("watch", str(first.work_dir), "--interval", "1s", env=first.env)
    assert watched.returncode == 0, watched.stderr
    assert json.loads(watched.stdout)["job_id"] == record["job_id"]


def test_watch_on_a_terminal_shows_one_live_line(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    job = build_job(
        slurm_cluster,
        tmp_path,
        "tty",
        "custom",
        "pass",
        custom_cmd='echo "first line"; sleep 3; echo "second line"; sleep 2',
    )
    submit(job)
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 60, 0, 0))  # 60 columns
    proc = subprocess.Popen(
        [sys.executable, "-m", "scriptbuilder", "watch", str(job.work_dir), "--interval", "1s"],
        stdout=subprocess.PIPE,
        stderr=follower,
        env=job.env,
    )
    os.close(follower)
    screen = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 120)
        if not ready:
            break
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        screen += chunk
    out, _ = proc.communicate(timeout=60)
    os.close(leader)
    text = screen.decode()
    assert proc.returncode == 0 and json.loads(out)["verdict"] == "PASSED", text
    updates = text.split("\r\x1b[K")[1:]
    assert len(updates) >= 3, text
    assert text.endswith("\n") and text.count("\n") == 1, repr(text)  # one line, updated
    assert any(re.search(r"RUNNING \d:\d\d:\d\d \| .*first line", u) for u in updates), text
    assert "COMPLETED" in updates[-1] and "-> PASSED" in updates[-1], text
    assert all(len(u.rstrip("\n")) < 60 for u in updates), text  # never wraps


@pytest.mark.parametrize("workflow", WORKFLOWS)
def test_node_set_down_while_running_is_a_node_failure(
    slurm_cluster: SlurmCluster, tmp_path: Path, workflow: str
) -> None:
    """With JobRequeue=1 (Slurm's default) the job is requeued after its node fails:
    watch reports NODE_FAILURE and cancels the requeued copy (test jobs are not retried)."""
    job = build_job(slurm_cluster, tmp_path, workflow, workflow, "cancelled")
    node = slurm_cluster.hostname
    submit(job)
    start_watch(job, "--interval", "1s", "--timeout", "240s")
    try:
        assert wait_state(slurm_cluster, job.job_id, {"RUNNING"}) == "RUNNING"
        time.sleep(2)
        slurm_cluster.run("scontrol", "update", f"nodename={node}", "state=down", "reason=test")
        job.finish()
    finally:
        slurm_cluster.run("scontrol", "update", f"nodename={node}", "state=resume")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            state = slurm_cluster.run("sinfo", "-h", "-n", node, "-o", "%T").stdout.strip()
            if state == "idle":
                break
            time.sleep(0.5)
    info = show(slurm_cluster, job.job_id)
    why = f"{job.verdict}\n{job.err}\n{info}"
    assert job.verdict["verdict"] == "NODE_FAILURE" and job.rc == 8, why
    assert info["Restarts"] == "1" and info["JobState"] == "CANCELLED", why
    assert state == "idle", f"node not back: {state}"


def test_perf_sanity_launch_script_is_submitted(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    """submit.py's launch script goes to sbatch; its log is Slurm's slurm-<id>.out in
    work_dir, and the verdict comes from the job's exit code."""
    env, request, home = perf_request(slurm_cluster, tmp_path)
    env.build(request, environ={"HOME": str(home)}, machine=platform.machine).write()
    job = Job("perf", "pytest", env.work_dir, slurm_cluster.job_env(env_extra={"HOME": str(home)}))
    submit(job)
    start_watch(job, "--interval", "1s", "--timeout", "180s")
    job.finish()
    verdict = job.verdict
    assert verdict["verdict"] == "PASSED" and job.rc == 0, f"{verdict}\n{job.err}"
    assert verdict["logs"]["out"] == str(env.work_dir / f"slurm-{job.job_id}.out"), verdict
    spec = json.loads((env.work_dir / "job_spec.json").read_text())
    assert set(verdict["matched_patterns"]["success"]) == set(spec["success_patterns"]), verdict


def test_python_api_submit_wait_status_cancel(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    import scriptbuilder
    from scriptbuilder.lifecycle import Verdict, open_run
    from scriptbuilder.lifecycle.transport import LocalTransport

    done = build_job(slurm_cluster, tmp_path, "api", "custom", "pass")
    slow = build_job(slurm_cluster, tmp_path, "api-slow", "custom", "cancelled")
    transport = LocalTransport(env=done.env)
    run = scriptbuilder.submit(done.work_dir, transport=transport)
    status = run.wait(timeout="3m", interval="1s")
    assert status.verdict is Verdict.PASSED and status.exit_code == 0, status.report
    again = open_run(done.work_dir, transport=transport).status()
    assert again.verdict is Verdict.PASSED and again.report["job_id"] == run.job_id
    running = scriptbuilder.submit(slow.work_dir, transport=transport)
    assert running.status().verdict is None  # pending or running: no verdict yet
    running.cancel()
    assert running.wait(timeout="1m", interval="1s").verdict is Verdict.CANCELLED


def test_sbatch_refusing_a_directive_names_it(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    """sbatch's cause, not the usage hint it prints after it."""
    script = tmp_path / "bad.sh"
    script.write_text("#!/bin/bash\n#SBATCH --no-such-option=1\ntrue\n")
    transport = LocalTransport(slurm_cluster.env)
    with pytest.raises(SlurmError, match=r"^sbatch failed: .*no-such-option") as caught:
        sbatch(transport, str(script), str(tmp_path))
    assert "--help" not in str(caught.value)
