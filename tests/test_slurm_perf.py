"""A perf-sanity job on the real one-node Slurm: built from the orchestrator's request
form with the image from TensorRT-LLM's real properties file, written by the submit.py
stand-in, run with the pyxis stand-in (which refuses a registry image without '#'), and
judged by the success pattern the job spec gives the executors."""

from __future__ import annotations

import json
import platform
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.build_env import REAL_FILES, BuildEnv, make_build_env
from tests.slurm_cluster.cluster import SlurmCluster
from tests.test_slurm_jobs import cluster_slurm_env

pytestmark = pytest.mark.slurm

AGGR = REAL_FILES / "gpt_oss_120b_fp4_blackwell.yaml"
SERVER = "gpt_oss_fp4_tp2_mtp0_1k1k"
PERF_FILE = "tests/integration/defs/perf/test_perf_sanity.py"


def perf_request(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> tuple[BuildEnv, dict[str, Any], Path]:
    """A perf-sanity request on the real config, sized for the test node: its build
    env, the request and the HOME its build and job use."""
    env = make_build_env(tmp_path)
    (env.repo / "jenkins" / "current_image_tags.properties").write_text(
        (REAL_FILES / "current_image_tags.properties").read_text()
    )
    configs = env.repo / "tests" / "scripts" / "perf-sanity" / "aggregated"
    configs.mkdir(parents=True)
    # the config as written for 2-GPU nodes: submit.py asks for one task per GPU of a
    # node, and the test node has as many CPUs as the machine (2 here)
    config = yaml.safe_load(AGGR.read_text())
    config["hardware"]["gpus_per_node"] = 2
    (configs / AGGR.name).write_text(yaml.safe_dump(config))
    perf_test = env.repo / PERF_FILE  # where the launch script's pytest looks for it
    perf_test.parent.mkdir(parents=True, exist_ok=True)
    perf_test.write_text("def test_e2e():\n    pass\n")
    env.slurm_env(**cluster_slurm_env(slurm_cluster))
    home = tmp_path / "home"
    models = tmp_path / "models"
    home.mkdir()
    models.mkdir()
    request = env.request(
        "pytest",
        test_cmd=f'pytest {PERF_FILE} -v "test_e2e[aggr-{AGGR.stem}-{SERVER}]"',
        model_name="gpt_oss",
        partition=slurm_cluster.partitions["gpu"],
        models_path=str(models),
        time_limit="00:10:00",
    )
    return env, request, home


def test_perf_sanity_launch_script_runs(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    env, request, home = perf_request(slurm_cluster, tmp_path)
    built = env.build(request, environ={"HOME": str(home)}, machine=platform.machine)
    built.write()
    spec = json.loads((env.work_dir / "job_spec.json").read_text())
    launch = Path(spec["script_path"])
    assert launch.is_file()

    result = slurm_cluster.submit(launch, env_extra={"HOME": str(home)}, timeout=180)
    assert result.ok, result.describe()
    log = env.work_dir / spec["log_file_pattern"].replace("%j", str(result.job_id))
    text = log.read_text()
    assert all(p in text for p in spec["success_patterns"]), result.describe()
    assert not any(p in text for p in spec["failure_patterns"]), result.describe()
    images = {s["container_image"] for s in result.steps}
    assert images == {spec["docker_image"]} and "urm.nvidia.com#" in spec["docker_image"]
    pytest_runs = [r for r in result.tool_records() if r["tool"] == "pytest"]
    assert len(pytest_runs) == 2, result.describe()  # tp2: two ranks
