"""Per-test truth on the real one-node Slurm: REAL pytest runs real test files in the
job (a ``pytest`` and a ``python`` first on the job's PATH run this interpreter, which
has pytest), the shipped plugin records each test, and ``watch``, ``status`` and
``results`` report them, also when the job ran out of time, killed its own
interpreter or hung.

The jobs are built, submitted and watched at once, then checked one by one.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scriptbuilder.lifecycle import Verdict
from scriptbuilder.lifecycle import submit as submit_run
from tests.build_env import BuildEnv, make_build_env
from tests.slurm_cluster.cluster import SlurmCluster
from tests.ssh_server.server import SshServer
from tests.test_lifecycle_persistent import checkout, slurm_shell
from tests.test_lifecycle_persistent import scriptbuilder as persistent_cli
from tests.test_lifecycle_remote import ODD, remote_env, transport
from tests.test_lifecycle_slurm import Job, scriptbuilder, start_watch, submit
from tests.test_slurm_jobs import cluster_slurm_env
from tests.test_test_records import EVERY_OUTCOME, EXPECTED

pytestmark = pytest.mark.slurm
__all__ = ["checkout", "remote_env", "slurm_shell"]  # the fixtures, used below

DEFS = "tests/integration/defs"
FILES = {
    "outcomes": EVERY_OUTCOME,
    "timeout": "import time\n\ndef test_a():\n    pass\n\ndef test_b():\n    pass\n\n"
    "def test_sleeper():\n    time.sleep(300)\n",
    "kill": "import os, signal\n\ndef test_one():\n    pass\n\n"
    "def test_killer():\n    os.kill(os.getpid(), signal.SIGKILL)\n\ndef test_never():\n    pass\n",
    "hang": "import time\n\ndef test_ok():\n    pass\n\n"
    "def test_hangs():\n    print('Hang detected after 300 seconds', flush=True)\n"
    "    time.sleep(300)\n",
}
COMMANDS = {  # the three ways a job runs pytest
    "outcomes": "pytest -v test_sb_outcomes.py --junitxml=own-report.xml",
    "timeout": "python -m pytest -v test_sb_timeout.py",
    "kill": "python run_tests.py",
    "hang": "pytest -s -v test_sb_hang.py",
}


def build(cluster: SlurmCluster, root: Path, key: str, workflow: str = "pytest") -> Job:
    env = make_build_env(root / key)
    env.slurm_env(**cluster_slurm_env(cluster))
    home = root / key / "home"
    home.mkdir()
    shim = root / key / "bin"  # real pytest, whichever way the command starts it
    shim.mkdir()
    for name, run in (("pytest", "-m pytest"), ("python", "")):
        (shim / name).write_text(f'#!/bin/sh\nexec {sys.executable} {run} "$@"\n')
        (shim / name).chmod(0o755)
    job_env = cluster.job_env(
        env_extra={
            "HOME": str(home),
            "PATH": f"{shim}:{cluster.job_env()['PATH']}",
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        }
    )
    request: dict[str, Any] = {
        "partition": cluster.partitions["gpu"],
        "models_path": str(home),
        "persistent_mode": False,
        "skip_install": True,
        "required_devices": 1,
        "time_limit": "00:01:00" if key == "timeout" else "00:10:00",
    }
    if workflow == "custom":
        request["custom_cmd"] = "echo '3 passed in 0.01s'"
    else:
        defs = env.repo / DEFS
        (defs / f"test_sb_{key}.py").write_text(FILES[key])
        (defs / "run_tests.py").write_text(
            "import sys, pytest\nsys.exit(pytest.main(['-v', 'test_sb_kill.py']))\n"
        )
        request["test_cmd"] = f"cd {defs} && {COMMANDS[key]}"
    built = env.build(
        env.request(workflow, **request), environ={"HOME": str(home)}, machine=platform.machine
    )
    built.write()
    return Job(key, workflow, env.work_dir, job_env)


@pytest.fixture(scope="module")
def jobs(
    slurm_cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Job]]:
    root = tmp_path_factory.mktemp("records")
    table = {key: build(slurm_cluster, root, key) for key in FILES}
    table["custom"] = build(slurm_cluster, root, "custom", "custom")
    for job in table.values():
        submit(job)
        start_watch(job, "--interval", "1s", "--timeout", "300s")
    for job in table.values():
        job.finish()
    try:
        yield table
    finally:
        for job in table.values():
            slurm_cluster.run("scancel", job.job_id)


def by_name(tests: list[dict[str, Any]]) -> dict[str, tuple[str, str]]:
    return {t["id"].split("::")[-1]: (t["outcome"], t["message"]) for t in tests}


def test_every_outcome_in_watch_results_and_junit(jobs: dict[str, Job]) -> None:
    job = jobs["outcomes"]
    verdict = job.verdict
    why = f"{verdict}\n{job.err}"
    assert verdict["verdict"] == "FAILED" and job.rc == 1, why
    assert by_name(verdict["tests"]) == EXPECTED, why
    assert verdict["counts"] == {
        "failed": 1,
        "error": 1,
        "unfinished": 0,
        "xpassed": 1,
        "passed": 1,
        "skipped": 2,
        "xfailed": 1,
    }, why
    assert verdict["unfinished"] is None
    assert all(isinstance(t["duration_seconds"], float) for t in verdict["tests"])
    # under-allocated: skipped for the device count, and a warning line on stderr
    assert verdict["under_allocated"] == ["test_sb_outcomes.py::test_needs_gpus"], why
    assert verdict["gpus"] == 1
    assert "test_sb_outcomes.py::test_needs_gpus" in job.err and "warning:" in job.err, why
    # the user's own --junitxml still written
    assert (job.work_dir.parent / "TensorRT-LLM" / DEFS / "own-report.xml").is_file()

    junit = job.work_dir / "report.xml"
    done = scriptbuilder("results", str(job.work_dir), "--json", "--junit", str(junit), env=job.env)
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    assert by_name(listed) == EXPECTED
    assert [t["outcome"] for t in listed][:2] == ["failed", "error"]  # failures first
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("7", "1", "1")
    kids = {c.get("name"): [(k.tag, k.get("message")) for k in c] for c in suite.iter("testcase")}
    assert kids["test_fail"] == [("failure", "AssertionError: values differ")]
    assert kids["test_error"] == [("error", "RuntimeError: fixture broke")]
    assert kids["test_skip"] == [("skipped", "not on this machine")]
    assert kids["test_pass"] == [] and kids["test_xpass"] == []

    table = scriptbuilder("results", str(job.work_dir), env=job.env)
    assert table.returncode == 0, table.stderr
    rows = table.stdout.splitlines()
    assert rows[0].startswith("failed") and "AssertionError: values differ" in rows[0]
    assert len(rows) == 7


def test_time_limit_keeps_the_passes_and_names_the_sleeper(jobs: dict[str, Job]) -> None:
    job = jobs["timeout"]
    verdict = job.verdict
    why = f"{verdict}\n{job.err}"
    assert verdict["verdict"] == "TIMEOUT" and job.rc == 4, why
    assert by_name(verdict["tests"]) == {
        "test_a": ("passed", ""),
        "test_b": ("passed", ""),
        "test_sleeper": ("unfinished", ""),
    }, why
    assert verdict["unfinished"] == "test_sb_timeout.py::test_sleeper"
    junit = job.work_dir / "report.xml"
    done = scriptbuilder("results", str(job.work_dir), "--junit", str(junit), env=job.env)
    assert done.returncode == 0, done.stderr
    (case,) = [c for c in ET.parse(junit).iter("testcase") if c.get("name") == "test_sleeper"]
    assert [k.tag for k in case] == ["error"]
    assert "job ended during this test" in (case[0].get("message") or "")


def test_killed_interpreter_is_a_failure_with_its_test_unfinished(jobs: dict[str, Job]) -> None:
    job = jobs["kill"]
    verdict = job.verdict
    why = f"{verdict}\n{job.err}"
    assert verdict["verdict"] == "FAILED" and job.rc == 1, why
    assert by_name(verdict["tests"]) == {
        "test_one": ("passed", ""),
        "test_killer": ("unfinished", ""),
    }, why
    assert verdict["unfinished"] == "test_sb_kill.py::test_killer"


def test_hang_names_the_hanging_test(jobs: dict[str, Job]) -> None:
    job = jobs["hang"]
    verdict = job.verdict
    why = f"{verdict}\n{job.err}"
    assert verdict["verdict"] == "HANG_DETECTED" and job.rc == 5, why
    assert verdict["unfinished"] == "test_sb_hang.py::test_hangs", why
    assert by_name(verdict["tests"])["test_ok"] == ("passed", "")


def test_a_custom_job_has_no_tests(jobs: dict[str, Job]) -> None:
    job = jobs["custom"]
    verdict = job.verdict
    assert verdict["verdict"] == "PASSED" and job.rc == 0, job.err
    assert verdict["tests"] == [] and verdict["unfinished"] is None
    assert verdict["under_allocated"] == []
    done = scriptbuilder("results", str(job.work_dir), env=job.env)
    assert done.returncode == 2 and "records no tests" in done.stderr
    assert not list(job.work_dir.glob("*.tests.jsonl"))


def test_status_after_the_end_reads_the_same_records(jobs: dict[str, Job]) -> None:
    job = jobs["kill"]
    done = scriptbuilder("status", str(job.work_dir), "--json", env=job.env)
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["tests"] == job.verdict["tests"]


def test_remote_slurm_records_read_over_ssh(
    ssh_server: SshServer, remote_env: BuildEnv, slurm_cluster: SlurmCluster
) -> None:
    """remote_slurm through the real sshd: the plugin is uploaded beside the script into
    a remote_work_dir whose name holds quotes, a space and a dollar sign; the job's
    real pytest records there, and the records are read back over ssh."""
    remote_repo = remote_env.root / ODD / "TensorRT-LLM"
    defs = remote_repo / DEFS
    defs.mkdir(parents=True)
    (defs / "test_sb_outcomes.py").write_text(EVERY_OUTCOME)
    command = f"cd {shlex.quote(str(defs))} && {sys.executable} -m pytest -v test_sb_outcomes.py"
    request = remote_env.request(
        "pytest",
        execution_scenario="remote_slurm",
        test_cmd=command,
        model_name="remote",
        required_devices=1,
        skip_install=True,
        allow_missing_tests=True,  # the build looks for them in the local checkout
        time_limit="00:10:00",
        models_path=str(remote_env.root),
    )
    request["remote_repo_path"] = str(remote_repo)
    request["remote_work_dir"] = str(remote_repo / "work_dirs" / ODD)
    remote_env.build(
        request, environ={"HOME": str(remote_env.root)}, machine=platform.machine
    ).write()
    run = submit_run(remote_env.work_dir, transport=transport(ssh_server))
    status = run.wait(timeout=180, interval=0.5)
    assert status.verdict is Verdict.FAILED, status.report
    assert by_name(status.report["tests"]) == EXPECTED, status.report
    records = Path(request["remote_work_dir"]) / f"remote_auto_test_{run.job_id}.tests.jsonl"
    assert records.is_file()
    assert (Path(request["remote_work_dir"]) / "sb_test_records.py").is_file()
    flags = [f for o in ssh_server.options() for f in ("--ssh-option", o)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    done = scriptbuilder("results", str(remote_env.work_dir), "--json", *flags, env=env)
    assert done.returncode == 0, done.stderr
    assert by_name(json.loads(done.stdout)) == EXPECTED


def test_persistent_mode_records_each_run_alone(
    checkout: BuildEnv, slurm_shell: SlurmCluster
) -> None:
    """Persistent mode: the script runs inside the held allocation, whose job id names
    the records file; a second run of the build there reports its own tests only."""
    defs = checkout.repo / DEFS
    (defs / "test_sb_outcomes.py").write_text(EVERY_OUTCOME)
    request = checkout.request(
        "pytest",
        test_cmd=f"cd {defs} && {sys.executable} -m pytest -v test_sb_outcomes.py",
        model_name="kept",
        required_devices=1,
        skip_install=True,
        time_limit="00:10:00",
        models_path=str(checkout.root),
    )
    built = checkout.build(request, environ={"HOME": str(checkout.root)}, machine=platform.machine)
    built.write()
    work_dir = str(checkout.work_dir)
    for again in ((), ("--again",)):
        submitted = persistent_cli(slurm_shell, "submit", work_dir, *again)
        assert submitted.returncode == 0, submitted.stderr
        assert json.loads(submitted.stdout)["allocation"]["job_id"]
        watched = persistent_cli(slurm_shell, "watch", work_dir, "--interval", "0.5s")
        verdict = json.loads(watched.stdout)
        assert verdict["verdict"] == "FAILED" and watched.returncode == 1, watched.stderr
        assert by_name(verdict["tests"]) == EXPECTED, verdict
        assert verdict["counts"]["failed"] == 1, verdict
