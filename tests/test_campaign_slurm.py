"""A campaign on the real one-node Slurm (tests/slurm_cluster): every job submitted with
``scriptbuilder submit`` and watched to its verdict: each job sees exactly its GPUs,
each test runs once, the install step once per job."""

from __future__ import annotations

import json
import platform
from pathlib import Path

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
