"""A campaign on the real one-node Slurm (tests/slurm_cluster): every job submitted with
``scriptbuilder submit`` and watched to its verdict: each job sees exactly its GPUs,
each test runs once, the install step once per job."""

from __future__ import annotations

import json
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from scriptbuilder.api import build_campaign
from tests.build_env import make_build_env
from tests.slurm_cluster.cluster import SlurmCluster, read_jsonl
from tests.test_lifecycle_slurm import scriptbuilder
from tests.test_slurm_jobs import cluster_slurm_env

pytestmark = pytest.mark.slurm

PY = "accuracy/test_llm_api_pytorch.py"
LIST = f"""\
{PY}::TestLlama3_1_8BInstruct::test_bfloat16
{PY}::TestLlama3_1_8BInstruct::test_fp8_large_memory
{PY}::TestDeepSeekV3Lite::test_fp8_4gpus
{PY}::TestQwen3_30B_A3B::test_auto_dtype[tp4-attn_backend=TRTLLM] ISOLATION
unittest/_torch/modules/test_linear_multi.py SKIP (not today)
"""


def test_every_job_of_a_campaign_submits_and_passes(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    env = make_build_env(tmp_path)
    env.slurm_env(**cluster_slurm_env(slurm_cluster))
    home = tmp_path / "home"
    home.mkdir()
    listing = tmp_path / "tests.txt"
    listing.write_text(LIST)
    request = env.request(
        test_cmd=None,
        test_list=str(listing),
        model_name="l0",
        partition=slurm_cluster.partitions["gpu"],
        models_path=str(home),
        time_limit="00:10:00",
        default_test_minutes=1.0,
    )
    built = build_campaign(request, environ={"HOME": str(home)}, machine=platform.machine)
    built.write()
    jobs = built.campaign.jobs
    assert sorted(job.gpus for job in jobs) == [1, 4, 4]  # two 1-GPU tests share a job
    record = slurm_cluster.new_record_file("campaign")
    job_env = slurm_cluster.job_env(
        record_file=record,
        env_extra={"HOME": str(home), "STANDIN_STDOUT": "1 passed in 0.01s"},
    )
    for job in jobs:
        done = scriptbuilder("submit", job.work_dir, env=job_env)
        assert done.returncode == 0, done.stderr
    for job in jobs:
        done = scriptbuilder(
            "watch", job.work_dir, "--interval", "1s", "--timeout", "300s", env=job_env
        )
        assert (done.returncode, json.loads(done.stdout)["verdict"]) == (0, "PASSED"), done
    runs = read_jsonl(record)
    pytest_runs = [r for r in runs if r["tool"] == "pytest"]
    ran = sorted(arg for r in pytest_runs for arg in r["argv"][2:])
    assert ran == sorted(e.test_id for job in jobs for e in job.entries)
    for r in pytest_runs:
        (job,) = [j for j in jobs if r["argv"][2] in {e.test_id for e in j.entries}]
        assert len(r["env"]["CUDA_VISIBLE_DEVICES"].split(",")) == job.gpus
    installs = [r for r in runs if r["tool"] == "pip"]
    assert len(installs) == 2 * len(jobs)  # pip install -e . and the requirements, per job


def _campaign(slurm_cluster: SlurmCluster, tmp_path: Path, listing: str) -> tuple[Any, Path]:
    env = make_build_env(tmp_path)
    env.slurm_env(**cluster_slurm_env(slurm_cluster))
    home = tmp_path / "home"
    home.mkdir()
    path = tmp_path / "tests.txt"
    path.write_text(listing)
    request = env.request(
        test_cmd=None,
        test_list=str(path),
        model_name="l0",
        partition=slurm_cluster.partitions["gpu"],
        models_path=str(home),
        time_limit="00:10:00",
        default_test_minutes=1.0,
    )
    built = build_campaign(request, environ={"HOME": str(home)}, machine=platform.machine)
    built.write()
    return built, home


def _counting_path(tmp_path: Path, log: Path) -> str:
    """A folder of squeue, sacct and scontrol wrappers that log each call, then run the
    real tool (found further along PATH)."""
    wrappers = tmp_path / "counting"
    wrappers.mkdir()
    for tool in ("squeue", "sacct", "scontrol"):
        real = shutil.which(tool)
        assert real is not None
        script = wrappers / tool
        script.write_text(f'#!/bin/sh\necho "{tool} $*" >> {log}\nexec {real} "$@"\n')
        script.chmod(0o755)
    return str(wrappers)


def test_watch_over_ten_jobs_asks_the_scheduler_at_most_twice_per_round(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    ids = [f"{PY}::TestLlama3_1_8BInstruct::test_bfloat16", f"{PY}::TestMixtral8x7B::test_tp2"]
    ids += [f"{PY}::TestLlama3_1_8BInstruct::test_fp8_large_memory"]
    ids += [f"{PY}::TestDeepSeekV3Lite::test_fp8_4gpus"]
    listing = "".join(f"{test_id} ISOLATION\n" for test_id in ids)
    listing += "".join(
        f"{PY}::TestQwen3_30B_A3B::test_auto_dtype[tp{n}-attn_backend={b}] ISOLATION\n"
        for n in (1, 2, 4)
        for b in ("TRTLLM", "FLASHINFER")
    )
    built, home = _campaign(slurm_cluster, tmp_path, listing)
    assert len(built.campaign.jobs) == 10
    folder = built.request.work_dir
    record = slurm_cluster.new_record_file("campaign10")
    job_env = slurm_cluster.job_env(
        record_file=record,
        env_extra={"HOME": str(home), "STANDIN_STDOUT": "1 passed in 0.01s"},
    )
    done = scriptbuilder("submit", folder, env=job_env)
    assert done.returncode == 0, done.stderr
    submitted = json.loads(done.stdout)
    assert len({job["job_id"] for job in submitted}) == 10
    assert all(json.loads((Path(j["work_dir"]) / "run.json").read_text()) for j in submitted)
    log = tmp_path / "calls.log"
    watch_env = {**job_env, "PATH": f"{_counting_path(tmp_path, log)}:{job_env['PATH']}"}
    done = scriptbuilder("watch", folder, "--interval", "1s", "--timeout", "300s", env=watch_env)
    report = json.loads(done.stdout)
    assert done.returncode == 0, done.stderr
    assert report["ended"] and [j["verdict"] for j in report["jobs"]] == ["PASSED"] * 10
    calls = log.read_text().splitlines()
    rounds = [c for c in calls if c.startswith("squeue")]
    assert rounds and len(calls) <= 2 * len(rounds), calls
    assert not [c for c in calls if c.startswith("scontrol")], calls
    assert all(c.count(",") >= 1 for c in rounds[:1])  # one squeue asks for every job
    # every look after the end: the verdicts recorded, no scheduler asked
    log.unlink()
    done = scriptbuilder("status", folder, "--json", env=watch_env)
    assert done.returncode == 0 and not log.exists(), done.stderr
    lines = done.stdout
    assert json.loads(lines)["job_phases"] == {"ended": 10}
    done = scriptbuilder("status", folder, env=watch_env)
    assert done.stdout.splitlines()[-1].startswith("total: tests 0 passed, 0 failed"), done.stdout


CAMPAIGN_TESTS = """\
import os
from pathlib import Path

RAN = Path(os.environ["SB_RAN_FILE"])


def _ran(name):
    with RAN.open("a") as f:
        f.write(name + "\\n")


def test_ok1():
    _ran("test_ok1")


def test_ok2():
    _ran("test_ok2")


def test_flaky():
    _ran("test_flaky")
    assert RAN.read_text().count("test_flaky") > 1, "fails the first time"


def test_broken():
    _ran("test_broken")
    assert False, "always fails"
"""


def test_rerun_failed_submits_one_job_of_exactly_the_failed_tests(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    env = make_build_env(tmp_path)
    env.slurm_env(**cluster_slurm_env(slurm_cluster))
    home = tmp_path / "home"
    home.mkdir()
    defs = env.repo / "tests/integration/defs"
    (defs / "test_sb_campaign.py").write_text(CAMPAIGN_TESTS)
    names = ("test_ok1", "test_ok2", "test_flaky", "test_broken")
    listing = tmp_path / "tests.txt"
    listing.write_text("".join(f"test_sb_campaign.py::{name}\n" for name in names))
    request = env.request(
        test_cmd=None,
        test_list=str(listing),
        model_name="l0",
        partition=slurm_cluster.partitions["gpu"],
        models_path=str(home),
        time_limit="00:10:00",
        skip_install=True,
        default_test_minutes=1.0,
    )
    built = build_campaign(request, environ={"HOME": str(home)}, machine=platform.machine)
    built.write()
    folder = built.request.work_dir
    shim = tmp_path / "bin"  # real pytest in the jobs
    shim.mkdir()
    (shim / "pytest").write_text(f'#!/bin/sh\nexec {sys.executable} -m pytest "$@"\n')
    (shim / "pytest").chmod(0o755)
    ran = tmp_path / "ran.txt"
    job_env = slurm_cluster.job_env(
        env_extra={
            "HOME": str(home),
            "PATH": f"{shim}:{slurm_cluster.job_env()['PATH']}",
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
            "SB_RAN_FILE": str(ran),
        }
    )
    assert scriptbuilder("submit", folder, env=job_env).returncode == 0
    done = scriptbuilder("watch", folder, "--interval", "1s", "--timeout", "300s", env=job_env)
    first = json.loads(done.stdout)
    assert done.returncode == 1, done.stderr  # tests failed
    assert first["counts"]["passed"] == 2 and first["counts"]["failed"] == 2, first["tests"]

    done = scriptbuilder("rerun", "--failed", folder, env=job_env)
    assert done.returncode == 0, done.stderr
    rerun = json.loads(done.stdout)
    failed = {"test_sb_campaign.py::test_flaky", "test_sb_campaign.py::test_broken"}
    assert set(rerun["tests"]) == failed and len(rerun["tests"]) == 2
    campaign = json.loads((Path(folder) / "campaign.json").read_text())
    assert [(a["name"], a["of"]) for a in campaign["attempts"]] == [("rerun-1", "rerun")]

    done = scriptbuilder("watch", folder, "--interval", "1s", "--timeout", "300s", env=job_env)
    report = json.loads(done.stdout)
    assert done.returncode == 1, done.stderr  # test_broken is broken
    tests = {t["id"].split("::")[-1]: t for t in report["tests"]}
    assert sorted(tests) == sorted(names)  # each test once
    assert (tests["test_flaky"]["outcomes"], tests["test_flaky"]["flaky"]) == (
        ["failed", "passed"],
        True,
    )
    assert (tests["test_broken"]["outcomes"], tests["test_broken"]["flaky"]) == (
        ["failed", "failed"],
        False,
    )
    assert "outcomes" not in tests["test_ok1"]
    assert sorted(ran.read_text().split()) == sorted([*names, "test_flaky", "test_broken"])
    assert [j["name"] for j in report["jobs"]] == [
        *(j.name for j in built.campaign.jobs),
        "rerun-1",
    ]

    junit = tmp_path / "all.xml"
    done = scriptbuilder("results", folder, "--junit", str(junit), env=job_env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].startswith("failed") and "test_broken" in done.stdout
    assert junit.read_text().count("<testcase") == 4


SLOW_TESTS = """\
import os
import time
from pathlib import Path


def _run(name):
    with Path(os.environ["SB_RAN_FILE"]).open("a") as f:
        f.write(name + "\\n")
    time.sleep(3)

""" + "".join(f"\n\ndef test_s{n}():\n    _run('test_s{n}')\n" for n in range(8))


def test_a_node_lost_while_jobs_run_is_retried_with_only_the_tests_left(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    env = make_build_env(tmp_path)
    env.slurm_env(**cluster_slurm_env(slurm_cluster))
    home = tmp_path / "home"
    home.mkdir()
    defs = env.repo / "tests/integration/defs"
    (defs / "test_sb_slow.py").write_text(SLOW_TESTS)
    names = [f"test_s{n}" for n in range(8)]
    listing = tmp_path / "tests.txt"
    listing.write_text("".join(f"test_sb_slow.py::{name}\n" for name in names))
    request = env.request(
        test_cmd=None,
        test_list=str(listing),
        model_name="l0",
        partition=slurm_cluster.partitions["gpu"],
        models_path=str(home),
        time_limit="00:10:00",
        skip_install=True,
        default_test_minutes=1.0,
        max_jobs=2,
    )
    built = build_campaign(request, environ={"HOME": str(home)}, machine=platform.machine)
    built.write()
    folder = built.request.work_dir
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "pytest").write_text(f'#!/bin/sh\nexec {sys.executable} -m pytest "$@"\n')
    (shim / "pytest").chmod(0o755)
    ran = tmp_path / "ran.txt"
    ran.touch()
    job_env = slurm_cluster.job_env(
        env_extra={
            "HOME": str(home),
            "PATH": f"{shim}:{slurm_cluster.job_env()['PATH']}",
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
            "SB_RAN_FILE": str(ran),
        }
    )
    assert scriptbuilder("submit", folder, env=job_env).returncode == 0
    argv = [sys.executable, "-m", "scriptbuilder", "watch", folder, "--interval", "1s"]
    watch = subprocess.Popen(
        [*argv, "--timeout", "300s"], env=job_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    node = slurm_cluster.hostname
    try:
        deadline = time.monotonic() + 120
        while len(ran.read_text().split()) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        before = ran.read_text().split()
        assert len(before) >= 3
        slurm_cluster.run("scontrol", "update", f"nodename={node}", "state=down", "reason=x")
        time.sleep(5)
    finally:
        slurm_cluster.run("scontrol", "update", f"nodename={node}", "state=resume")
    out, err = watch.communicate(timeout=300)
    report = json.loads(out)
    assert watch.returncode == 0, err
    retries = report["attempts"]
    assert retries and all(a["of"] != "rerun" for a in retries), report
    assert all(a["name"].startswith(a["of"] + "-retry") for a in retries)
    campaign = json.loads((Path(folder) / "campaign.json").read_text())
    assert campaign["attempts"] == retries
    tests = {t["id"].split("::")[-1]: t for t in report["tests"]}
    assert sorted(tests) == names and {t["outcome"] for t in tests.values()} == {"passed"}
    runs = ran.read_text().split()
    passed_first = [t for t in tests.values() if "-retry" not in t["job"]]
    for test in passed_first:  # no passed test ran twice
        assert runs.count(test["id"].split("::")[-1]) == 1, runs
    retried = {s.split("::")[-1] for a in retries for s in a["tests"]}
    assert retried and not retried & {t["id"].split("::")[-1] for t in passed_first}
    assert report["exit_code"] == 0 and report["ended"]
