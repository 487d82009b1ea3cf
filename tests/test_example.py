"""The README's first command: the bundled example builds in a fresh checkout."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_bundled_example_builds_in_a_fresh_checkout(tmp_path: Path) -> None:
    copy = tmp_path / "checkout"
    for part in ("examples", "tests/data/trtllm_repo"):
        shutil.copytree(ROOT / part, copy / part)
    # scripts/env.sh makes the virtualenv; here the one running these tests serves.
    (copy / "scripts").mkdir()
    (copy / "scripts" / "env.sh").write_text(
        f'export PATH={Path(sys.executable).parent}:"$PATH"\ncd "{copy}"\n'
    )
    result = subprocess.run(
        ["bash", "examples/run_example.sh"], cwd=copy, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    work_dir = copy / "build" / "example"
    assert (work_dir / "job_spec.json").is_file()
    assert "srun" in (work_dir / "qwen3_30b_auto_test.slurm").read_text()
