"""#SBATCH values that need quoting reach Slurm unchanged (real sbatch)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.script_runner import run_compat
from tests.slurm_cluster.cluster import SlurmCluster

pytestmark = pytest.mark.slurm


@pytest.mark.parametrize(
    ("model", "log_folder"),
    [
        ("plain", "logs"),
        ("with_underscore", "log dir"),
        ("q\"uote's", "a#hash"),
        ("dots.and-dashes", "100%"),
        ("ünïcode", "x%jy"),
    ],
)
def test_directive_values_reach_slurm(
    slurm_cluster: SlurmCluster, tmp_path: Path, model: str, log_folder: str
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    log_dir = tmp_path / log_folder
    result = run_compat(
        [
            "custom",
            "--model-name",
            model,
            "--log-dir",
            str(log_dir),
            "--partition",
            slurm_cluster.partitions["cpu"],
            "--account",
            "acct",
            "--docker-image",
            "img:1",
            "--container-mounts",
            str(tmp_path),
            "--container-name",
            "standin",
            "--project-path",
            str(project),
            "--custom-cmd",
            "record-argv ok",
        ]
    )
    assert result.exit_code == 0, result.stderr
    script = tmp_path / "job.sh"
    script.write_text(result.stdout)
    job = slurm_cluster.submit(script)
    assert job.ok, job.describe()
    assert job.info["JobName"] == f"{model}_custom"
    expected_out = log_dir / f"{model}_custom_{job.job_id}.out"
    assert expected_out.is_file(), sorted(p.name for p in log_dir.iterdir())
    assert "with exit code 0" in expected_out.read_text()
