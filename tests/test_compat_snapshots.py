"""Snapshots of the drop-in CLI's scripts: subcommand x tasks x gres x mpi.

Review a change with ``git diff tests/snapshots``; accept it with
``pytest tests/test_compat_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from syrupy.assertion import SnapshotAssertion

from tests.script_runner import check_syntax, run_compat

COMMANDS = {
    "pytest": ["--test-cmd", "pytest -v 'accuracy/test_llm_api.py::TestLlama::test_auto[tp4-a=b]'"],
    "custom": ["--custom-cmd", 'python3 run.py --name "it\'s $USER"', "--custom-env", "A=1"],
    "bench": [
        "--bench-cmd",
        "trtllm-bench --model m prepare-dataset --output /tmp/d.json token-norm-dist "
        "&& trtllm-bench --model m throughput --tp 4 --dataset /tmp/d.json",
    ],
    "eval": ["--eval-cmd", "trtllm-eval --model /models/llama --tp_size 4 gsm8k"],
}


def snapshot_args(subcommand: str, ntasks: int, gres: bool, mpi: str, tmp_path: Path) -> list[str]:
    args = [
        subcommand,
        "--model-name",
        "llama",
        "--log-dir",
        "/lustre/logs/llama",
        "--local-log-dir",
        str(tmp_path),
        "--partition",
        "batch",
        "--account",
        "trtllm",
        "--docker-image",
        "nvcr.io#nvidia/tensorrt-llm:1.0",
        "--container-mounts",
        "/home/user:/home/user,/lustre/models:/models",
        "--project-path",
        "/home/user/TensorRT-LLM",
        "--llm-models-root",
        "/models",
        "--ntasks",
        str(ntasks),
        "--ntasks-per-node",
        str(ntasks),
        "--mpi",
        mpi,
        *COMMANDS[subcommand],
    ]
    if gres:
        args += ["--gres", f"gpu:{ntasks}"]
    return args


@pytest.mark.parametrize("mpi", ["none", "pmix_v5"])
@pytest.mark.parametrize("gres", [False, True], ids=["nogres", "gres"])
@pytest.mark.parametrize("ntasks", [1, 4], ids=["1task", "4tasks"])
@pytest.mark.parametrize("subcommand", list(COMMANDS))
def test_script_snapshot(
    script_snapshot: SnapshotAssertion,
    tmp_path: Path,
    subcommand: str,
    ntasks: int,
    gres: bool,
    mpi: str,
) -> None:
    result = run_compat(snapshot_args(subcommand, ntasks, gres, mpi, tmp_path))
    assert result.exit_code == 0, result.stderr
    script = tmp_path / "script.sh"
    script.write_text(result.stdout)
    check_syntax(script)
    assert result.stdout == script_snapshot
