"""The drop-in's accepted ``--gres`` forms reach a real sbatch in a form it takes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.script_runner import run_compat
from tests.slurm_cluster.cluster import SlurmCluster

pytestmark = pytest.mark.slurm


@pytest.mark.parametrize("gres", ["gpu:2", "gres/gpu:2"])
def test_accepted_gres_is_accepted_by_sbatch(
    slurm_cluster: SlurmCluster, tmp_path: Path, gres: str
) -> None:
    result = run_compat(
        [
            "custom",
            "--model-name",
            "gres-check",
            "--log-dir",
            str(tmp_path / "logs"),
            "--partition",
            slurm_cluster.partitions["gpu"],
            "--account",
            "acct",
            "--gres",
            gres,
            "--docker-image",
            "img:1",
            "--container-mounts",
            str(tmp_path),
            "--project-path",
            str(tmp_path),
            "--custom-cmd",
            "record-argv ok",
        ]
    )
    assert result.exit_code == 0, result.stderr
    script = tmp_path / "job.sh"
    script.write_text(result.stdout)
    checked = slurm_cluster.test_only(script)
    assert checked.returncode == 0, checked.stderr
