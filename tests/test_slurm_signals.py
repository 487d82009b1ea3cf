"""On the real one-node Slurm: the time-limit closing line, step banners and secrets.

A job with a one-minute limit whose command sleeps ends with ``Job <id> reached its
time limit (00:01:00) during <step>`` and exit code 124 before Slurm kills it, under
sbatch (Slurm's ``--signal=B:USR1@30``) and in persistent mode (bash inside an
salloc, where the script's own timer sends the warning).
"""

from __future__ import annotations

import json
import platform
import re
import shlex
import stat
import subprocess
from pathlib import Path

import pytest

from scriptbuilder.api import BuiltJob
from scriptbuilder.scenarios.base import BANNER_PREFIX
from scriptbuilder.scenarios.time_limit import TIMEOUT_STATUS
from tests.build_env import make_build_env
from tests.slurm_cluster.cluster import SlurmCluster, tools_dir
from tests.test_slurm_jobs import Sandbox, cluster_slurm_env, explain, generate

pytestmark = pytest.mark.slurm

SLEEP = 'echo "ENVIRONMENT=${ENVIRONMENT:-}"; sleep 600'


def reached_then_closed(out: str, job_id: str, spec_patterns: list[str]) -> str:
    """The step the time limit was reached in; checks the two closing lines."""
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) >= 2, out
    reached = re.fullmatch(
        rf"Job {job_id} reached its time limit \(00:01:00\) during (.+)", lines[-2]
    )
    assert reached, out
    assert re.fullmatch(
        rf"Job {job_id} finished at .+ with exit code {TIMEOUT_STATUS}", lines[-1]
    ), out
    assert spec_patterns and all(re.search(p, out) for p in spec_patterns), spec_patterns
    return reached.group(1)


def api_job(cluster: SlurmCluster, tmp_path: Path, **fields: object) -> BuiltJob:
    """A custom job built by the API for the test cluster (home and models exist)."""
    env = make_build_env(tmp_path)
    env.slurm_env(**cluster_slurm_env(cluster))
    home, models = tmp_path / "home", tmp_path / "models"
    home.mkdir()
    models.mkdir()
    request = env.request(
        "custom",
        partition=cluster.partitions["gpu"],
        models_path=str(models),
        required_devices=1,
        **fields,
    )
    return env.build(request, environ={"HOME": str(home)}, machine=platform.machine)


def test_time_limit_line_under_sbatch(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    job = api_job(slurm_cluster, tmp_path, custom_cmd=SLEEP, time_limit="00:01:00")
    job.write()
    env_work = Path(job.request.work_dir)
    spec = json.loads((env_work / "job_spec.json").read_text())
    script = Path(spec["script_path"])
    assert "#SBATCH --signal=B:USR1@30\n" in script.read_text()
    result = slurm_cluster.submit(script, timeout=240)
    out = result.stdout()
    # ended by its own closing line (exit 124), not killed at the limit
    assert result.state != "TIMEOUT" and result.exit_code == TIMEOUT_STATUS, explain(result)
    step = reached_then_closed(out, str(result.job_id), spec["timeout_patterns"])
    assert step in ("install the project", "run the custom command"), out
    if step == "run the custom command":
        # the batch shell runs without the timer: the warning was Slurm's signal
        assert "ENVIRONMENT=BATCH" in out, out


def test_time_limit_line_in_persistent_mode(
    slurm_cluster: SlurmCluster, tmp_path: Path, standin_record: Path
) -> None:
    box = Sandbox.make(tmp_path)
    script = generate(box, "custom", SLEEP, "persistent", "--time-limit", "00:01:00")
    done = slurm_cluster.run_in_allocation(
        script,
        f"--partition={slurm_cluster.partitions['gpu']}",
        "--time=1",
        record_file=standin_record,
        timeout=200,
    )
    message = f"salloc rc={done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert done.returncode == TIMEOUT_STATUS, message
    job_id = re.search(r"Job (\d+) started", done.stdout)
    assert job_id, message
    step = reached_then_closed(done.stdout, job_id.group(1), ["reached its time limit"])
    assert step == "run the custom command", message
    assert "ENVIRONMENT=\n" in done.stdout or "ENVIRONMENT=" in done.stdout, message


def test_banners_and_secret_on_slurm(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    """Each step's first log line is its banner; pasted into bash the banner's command
    runs the same argv; HF_TOKEN's value is only in the 0700 script."""
    command = "record-argv 'a b' \"$HF_TOKEN\" x\\ y"
    job = api_job(slurm_cluster, tmp_path, custom_cmd=command, custom_env="HF_TOKEN=abc123")
    written = job.write()
    holders = [p for p in written if "abc123" in p.read_text()]
    assert [p.name for p in holders] == [job.script_name]
    assert stat.S_IMODE(holders[0].stat().st_mode) == 0o700
    result = slurm_cluster.submit(holders[0], timeout=180)
    assert result.ok, explain(result, holders[0])
    out = result.stdout()
    assert "abc123" not in out
    lines = [line for line in out.splitlines() if line.strip()]
    banner_lines = [i for i, line in enumerate(lines) if line.startswith(BANNER_PREFIX)]
    assert [lines[i].split(":", 1)[0] for i in banner_lines] == [
        f"{BANNER_PREFIX}install the project",
        f"{BANNER_PREFIX}run the custom command",
    ], out
    assert banner_lines[0] == 1, out  # right after the start line
    banner = lines[banner_lines[1]]
    assert banner == f"{BANNER_PREFIX}run the custom command: {command}", out
    (record,) = [r for r in result.tool_records() if r["tool"] == "record-argv"]
    assert record["argv"][1:] == ["a b", "abc123", "x y"], explain(result)
    pasted_record = tmp_path / "pasted.jsonl"
    pasted = subprocess.run(
        ["bash", "-c", banner.split(": ", 1)[1]],
        env={
            "PATH": f"{tools_dir()}:/usr/bin:/bin",
            "STANDIN_RECORD": str(pasted_record),
            "HF_TOKEN": "abc123",
        },
        capture_output=True,
        text=True,
        check=False,
    )
    assert pasted.returncode == 0, pasted.stderr
    (again,) = [json.loads(line) for line in pasted_record.read_text().splitlines() if line]
    assert again["argv"][1:] == record["argv"][1:], shlex.join(again["argv"])
