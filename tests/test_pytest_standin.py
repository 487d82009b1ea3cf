"""The pytest stand-ins fail and skip where pytest does (tests/fake_bin/pytest for bash-level
runs, tests/slurm_cluster/tools/pytest on the real Slurm)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
STANDINS = [TESTS / "fake_bin" / "pytest", TESTS / "slurm_cluster" / "tools" / "pytest"]


def run(standin: Path, cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("STANDIN_", "CUDA_"))}
    base.pop("RECORD_DIR", None)
    return subprocess.run(
        [str(standin), *args], cwd=cwd, env={**base, **env}, capture_output=True, text=True
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "accuracy").mkdir()
    (tmp_path / "accuracy" / "test_a.py").write_text("def test_a():\n    pass\n")
    (tmp_path / "accuracy" / "test_exact.py").write_text("def test_b():\n    pass\n")
    (tmp_path / "accuracy" / "test_exact.py.gpus").write_text("4\n")
    (tmp_path / "accuracy" / "test_min.py").write_text("def test_c():\n    pass\n")
    (tmp_path / "accuracy" / "test_min.py.gpus").write_text(">=4\n")
    return tmp_path


# (arguments, environment, exit code, text in the output)
CASES = [
    (["-v", "accuracy/test_a.py::test_a"], {}, 0, None),
    (["accuracy"], {}, 0, None),
    (["-k", "not here", "-m", "gpu2"], {}, 0, None),
    (["accuracy/test_a.py::test_a"], {"STANDIN_EXIT_CODE": "3"}, 3, None),
    (["-v", "test_a.py::test_a"], {}, 4, "ERROR: file or directory not found: test_a.py::test_a"),
    (["unittest/_torch"], {}, 4, "file or directory not found: unittest/_torch"),
    (["accuracy/test_exact.py"], {"CUDA_VISIBLE_DEVICES": "0,1,2,3"}, 0, None),
    (["accuracy/test_exact.py"], {"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}, 0, "1 skipped"),
    (["accuracy/test_exact.py"], {}, 0, "needs exactly 4 GPUs, sees 8"),
    (["accuracy/test_exact.py"], {"STANDIN_GPU_COUNT": "4"}, 0, None),
    (["accuracy/test_min.py"], {"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5"}, 0, None),
    (["accuracy/test_min.py"], {"CUDA_VISIBLE_DEVICES": "0,1"}, 0, "needs at least 4 GPUs"),
]  # fmt: skip


@pytest.mark.parametrize("standin", STANDINS, ids=["fake_bin", "slurm_tools"])
@pytest.mark.parametrize(("args", "env", "code", "text"), CASES, ids=[str(c[:2]) for c in CASES])
def test_standin_behaves_like_pytest(
    project: Path,
    standin: Path,
    args: list[str],
    env: dict[str, str],
    code: int,
    text: str | None,
) -> None:
    done = run(standin, project, *args, **env)
    out = done.stdout + done.stderr
    assert done.returncode == code, out
    if text is None:
        assert "skipped" not in out and "not found" not in out, out
    else:
        assert text in out, out


PERF_ID = "perf/test_perf_sanity.py::test_e2e[aggr-cfg-server]"


@pytest.mark.parametrize(
    ("lines", "folder", "code", "text"),
    [
        (None, "configs", 3, "INTERNALERROR> FileNotFoundError"),
        ([PERF_ID], "configs", 0, None),
        ([PERF_ID], "elsewhere", 5, f"ERROR: not found: {PERF_ID} (no "),
        (["perf/test_gone.py::test_x"], "configs", 5, "ERROR: not found: perf/test_gone.py"),
    ],
    ids=["list-missing", "found", "config-missing", "test-missing"],
)
def test_standin_reads_the_test_list(
    tmp_path: Path, lines: list[str] | None, folder: str, code: int, text: str | None
) -> None:
    """TensorRT-LLM's --test-list: the file, its tests and a perf id's config must exist."""
    (tmp_path / "perf").mkdir()
    (tmp_path / "perf" / "test_perf_sanity.py").write_text("def test_e2e():\n    pass\n")
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "cfg.yaml").write_text("hardware: {gpus_per_node: 1}\n")
    listed = tmp_path / "test_list.txt"
    if lines is not None:
        listed.write_text("\n".join(lines) + "\n")
    args = ["-v", "perf/test_perf_sanity.py", f"--test-list={listed}"]
    done = run(STANDINS[1], tmp_path, *args, AGG_CONFIG_FOLDER=str(tmp_path / folder))
    out = done.stdout + done.stderr
    assert done.returncode == code, out
    assert text is None or text in out, out
