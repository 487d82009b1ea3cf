"""Jobs built from orchestrator-shaped requests (tests/data/orchestrator/) run on the
real one-node Slurm: the probe's all-null slurm_env.json, the earlier job_spec.json,
and for remote_slurm the home asked over (fake) ssh, with cluster paths that happen
to exist on this machine."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.build_env import make_build_env
from tests.orchestrator_env import FIXTURES, fake_ssh, orchestrator_request
from tests.slurm_cluster.cluster import SlurmCluster
from tests.test_slurm_jobs import assert_argv, closing_line, explain, split_records

pytestmark = pytest.mark.slurm


def _probe_for(cluster: SlurmCluster) -> dict[str, Any]:
    """The fixture probe (null arch and policy fields) with the test cluster's partitions."""
    env = json.loads((FIXTURES / "slurm_env_probe.json").read_text())
    env["partitions"][0]["name"] = cluster.partitions["gpu"]
    env["partitions"][1]["name"] = cluster.partitions["cpu"]
    env["pmix"]["available"] = [p for p in env["pmix"]["available"] if p in cluster.mpi_plugins]
    return env


@pytest.mark.parametrize("scenario", ["local_slurm", "remote_slurm"])
def test_orchestrator_custom_job_runs(
    slurm_cluster: SlurmCluster, tmp_path: Path, scenario: str
) -> None:
    env = make_build_env(tmp_path)
    home = tmp_path / "home"
    (home / "models" / "Qwen3-30B-A3B").mkdir(parents=True)
    request = orchestrator_request(env, scenario, "custom")
    request.update(
        partition=slurm_cluster.partitions["gpu"],
        checkpoint_path=str(home / "models" / "Qwen3-30B-A3B"),
        custom_cmd="record-argv 'a b' \"$LLM_MODELS_ROOT\"",
    )
    probe = _probe_for(slurm_cluster)
    remote_work_dir = env.repo / "work_dirs" / "work"
    if scenario == "remote_slurm":
        probe.update(ssh_host="login.example", slurm_user="asmith")
        earlier = json.loads((env.work_dir / "job_spec.json").read_text())
        earlier.update(remote_repo_path=str(env.repo), remote_work_dir=str(remote_work_dir))
        (env.work_dir / "job_spec.json").write_text(json.dumps(earlier))
    (env.work_dir / "slurm_env.json").write_text(json.dumps(probe))
    calls: list[list[str]] = []
    ssh = fake_ssh(calls)

    def home_ssh(argv: Any, timeout: float) -> str:
        ssh(argv, timeout)
        return str(home)

    built = env.build(request, environ={"HOME": str(home)}, ssh=home_ssh)
    built.write()
    spec = json.loads((env.work_dir / "job_spec.json").read_text())
    script = Path(spec["script_path"])
    log_dir = env.work_dir
    if scenario == "remote_slurm":
        assert len(calls) == 1 and spec["remote_work_dir"] == str(remote_work_dir)
        # What the remote executor does: copy the script and extra files to remote_work_dir.
        remote_work_dir.mkdir(parents=True)
        for name in (str(script), *spec["extra_files"]):
            shutil.copy(name, remote_work_dir)
        script = remote_work_dir / script.name
        log_dir = remote_work_dir
    assert spec["repo_url"] if scenario == "remote_slurm" else "repo_url" not in spec
    result = slurm_cluster.submit(script, env_extra={"HOME": str(home)}, timeout=180)
    assert result.ok, explain(result, script)
    log = log_dir / spec["log_file_pattern"].replace("%j", str(result.job_id))
    assert result.stdout_path == log and log.is_file(), explain(result)
    closing_line(result, 0)
    _, _, program = split_records(result, "custom")
    assert len(program) == spec["slurm_params"]["ntasks"] == 2, explain(result, script)
    for rec in program:
        assert_argv(rec, ["a b", request["llm_models_root"]], result)
