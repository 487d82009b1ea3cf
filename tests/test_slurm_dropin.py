"""The drop-in's accepted ``--gres`` forms reach a real sbatch in a form it takes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.script_runner import run_compat
from tests.slurm_cluster.cluster import SlurmCluster
from tests.test_compat_flags import base, with_flag

pytestmark = pytest.mark.slurm


@pytest.mark.parametrize("gres", ["gpu:2", "gres/gpu:2"])
def test_accepted_gres_is_accepted_by_sbatch(
    slurm_cluster: SlurmCluster, tmp_path: Path, gres: str
) -> None:
    args = with_flag(base("custom", tmp_path), "--partition", slurm_cluster.partitions["gpu"])
    result = run_compat([*args, "--gres", gres])
    assert result.exit_code == 0, result.stderr
    script = tmp_path / "job.sh"
    script.write_text(result.stdout)
    checked = slurm_cluster.test_only(script)
    assert checked.returncode == 0, checked.stderr
