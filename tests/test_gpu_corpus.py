"""The GPU counts of real TensorRT-LLM test ids (the shared corpus beside the
checkout, counts derived by hand) as ``benchmarks/gpu_counts.py`` measures them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "fixtures" / "trtllm-tests"


def test_real_test_ids_get_their_gpu_counts() -> None:
    if not (CORPUS / "cases.py").is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(f"the shared corpus is missing: {CORPUS}")
        pytest.skip(f"the shared corpus is not beside this checkout ({CORPUS})")
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_counts.py")],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    found = re.search(r"exact: (\d+)/(\d+)  at least the need: (\d+)/(\d+)", done.stdout)
    assert found, done.stdout
    exact, total, enough, _ = map(int, found.groups())
    assert exact >= total - 2 and enough == total, done.stdout
