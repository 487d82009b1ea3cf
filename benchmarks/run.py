"""Benchmarks and the speed guards: start-up of both command lines, and a sweep.

Standard library only (plus scriptbuilder itself). ``python benchmarks/run.py``
measures in about a minute; ``--smoke`` (CI) uses fewer runs and a smaller sweep
and finishes in well under a minute. Both print every figure with its floor or
ratio and name a missed guard; the full run then exits 1. The guards:

* the drop-in (``build_slurm_script``, each subcommand) and ``scriptbuilder
  build`` each take at most 1.5x the time of ``python -c`` importing click,
  pydantic and yaml and defining and using one pydantic model (the model floor);
* a sweep through ``scriptbuilder.build_many`` over a mix of the four workflows
  runs at least 1,000 builds/s.

Start-up commands run interleaved (one of each per round, the order rotating
every round); a figure is the ratio of the medians. The floors ``python -c
pass`` and ``python -c "import click, pydantic, yaml"`` are printed beside them.
``scriptbuilder build --many FILE`` over the sweep's requests, files written, is
printed as a ratio to the in-process sweep. ``--instructions`` counts each start-up
command once with valgrind's callgrind instead, the same figure on a busy machine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FIXED_CLOCK = dt.datetime(2026, 1, 2, 3, 4, 5)
IMAGE = "nvcr.io/nvidia/tensorrt-llm/release:1.0.0"
PYTEST_CMD = "pytest -v 'accuracy/test_llm_api_pytorch.py::TestQwen3::test_auto_dtype[tp4]'"
SLURM_ENV: dict[str, Any] = {
    "user": "alice",
    "default_account": "acct",
    "accounts": ["acct"],
    "default_partition": "gpu",
    "partitions": [
        {
            "name": "gpu",
            "state": "up",
            "time_limit": "04:00:00",
            "nodes": "4",
            "arch": "x86_64",
            "gres": "gpu:8",
            "gpus_per_node": 8,
            "requires_gres": True,
        }
    ],
    "pmix": {"available": ["pmix", "pmix_v4"], "preferred": "pmix_v4"},
    "errors": [],
    "cluster_name": "bench",
    "mounts": [],
}
TEST_FILE = '''"""A stand-in for accuracy/test_llm_api_pytorch.py."""
import pytest


@pytest.mark.skip_less_device(2)
class TestQwen3:
    @pytest.mark.parametrize(
        "tp_size",
        [
            pytest.param(1, id="tp1"),
            pytest.param(4, id="tp4", marks=pytest.mark.skip_less_device(4)),
        ],
    )
    def test_auto_dtype(self, tp_size):
        assert tp_size
'''

#: The guards.
START_UP_LIMIT = 1.5
SWEEP_MINIMUM = 1_000
LIBRARIES = "import click, pydantic, yaml"
ONE_MODEL = LIBRARIES + "\nclass M(pydantic.BaseModel):\n    x: int\nM(x=1)"
MODEL_FLOOR = "model floor: the libraries + one pydantic model"


@dataclass(frozen=True)
class Config:
    runs: int
    sweep: int
    batches: int


FULL = Config(runs=30, sweep=4_000, batches=3)
SMOKE = Config(runs=5, sweep=400, batches=3)


@dataclass
class Row:
    name: str
    samples: list[float]
    result: str
    guard: str = ""
    ok: bool | None = None

    @property
    def median(self) -> float:
        return statistics.median(self.samples)


def _timed(func: Callable[[], object]) -> float:
    start = time.perf_counter()
    func()
    return time.perf_counter() - start


def _request(root: Path, kind: str, index: int) -> dict[str, Any]:
    """Request ``index`` of the sweep, with its own work_dir (as every job of the
    orchestrator has) and the sandbox's slurm_env.json."""
    req: dict[str, Any] = {
        "workflow_type": kind,
        "execution_scenario": "local_slurm",
        "work_dir": str(root / "jobs" / f"{kind}-{index}"),
        "slurm_env_file": str(root / "slurm_env.json"),
        "repo_root": str(root / "TensorRT-LLM"),
        "partition": "gpu",
        "account": "acct",
        "models_path": str(root / "models"),
        "llm_models_root": "/models",
    }
    if kind == "pytest":
        req.update(test_cmd=PYTEST_CMD, model_name=f"qwen3_{index}")
    elif kind == "eval":
        req["eval_cmd"] = f"trtllm-eval --model /models/Llama-{index} --tp_size 2 gsm8k"
    elif kind == "bench":
        req["bench_cmd"] = (
            f"trtllm-bench --model meta-llama/Llama-{index} prepare-dataset --output "
            "/tmp/d.json token-norm-dist --num-requests 10 && trtllm-bench --model "
            f"meta-llama/Llama-{index} throughput --tp 2 --dataset /tmp/d.json"
        )
    else:
        req.update(custom_cmd=f"echo job {index} && nvidia-smi", model_name=f"demo_{index}")
    return req


def _test_db_list() -> str:
    """A test-db list as a checkout has them, read by every pytest build: stages of 1,
    2, 4 and 8 GPUs, the benchmark's test among the 4-GPU ones."""
    stages = []
    for gpus in (1, 2, 4, 8):
        tests = [
            f"  - accuracy/test_llm_api_pytorch.py::TestModel{i}::test_auto_dtype[tp{gpus}]"
            for i in range(40)
        ]
        if gpus == 4:
            tests.append("  - accuracy/test_llm_api_pytorch.py::TestQwen3::test_auto_dtype[tp4]")
        stages.append(
            "- condition:\n    ranges:\n      system_gpu_count:\n"
            f"        gte: {gpus}\n        lte: {gpus}\n  tests:\n" + "\n".join(tests)
        )
    return "version: 0.0.1\nl0_dgx_h100:\n" + "\n".join(stages) + "\n"


def make_sandbox(root: Path) -> None:
    """A TensorRT-LLM-like checkout, a models folder and slurm_env.json under ``root``."""
    repo = root / "TensorRT-LLM"
    (repo / "jenkins").mkdir(parents=True)
    (repo / "jenkins" / "current_image_tags.properties").write_text(
        f"LLM_DOCKER_IMAGE={IMAGE}\nLLM_SBSA_DOCKER_IMAGE={IMAGE}-sbsa\n"
    )
    tests = repo / "tests" / "integration" / "defs" / "accuracy"
    tests.mkdir(parents=True)
    (tests / "test_llm_api_pytorch.py").write_text(TEST_FILE)
    lists = repo / "tests" / "integration" / "test_lists" / "test-db"
    lists.mkdir(parents=True)
    (lists / "l0_dgx_h100.yml").write_text(_test_db_list())
    (root / "slurm_env.json").write_text(json.dumps(SLURM_ENV, indent=2))
    (root / "models" / "meta-llama").mkdir(parents=True)


# ---------------------------------------------------------------- start-up


def _dropin_args(subcommand: str, log_dir: Path) -> list[str]:
    args = [
        subcommand,
        *("--model-name", "llama", "--partition", "gpu", "--account", "acct"),
        *("--docker-image", IMAGE, "--project-path", "/code", "--log-dir", str(log_dir)),
        *("--container-mounts", "/lustre/models:/models,/home/alice/TensorRT-LLM:/code"),
    ]
    workload = {
        "pytest": ["--test-cmd", PYTEST_CMD],
        "custom": ["--custom-cmd", "python3 -c 'print(1)' && echo \"$HOME\""],
        "bench": [
            "--bench-cmd",
            "trtllm-bench --model m prepare-dataset --output /tmp/d.json && "
            "trtllm-bench --model m throughput --dataset /tmp/d.json",
            *("--ntasks", "2", "--ntasks-per-node", "2", "--mpi", "pmix_v4"),
        ],
        "eval": ["--eval-cmd", "trtllm-eval --model /models/m --tp_size 2 gsm8k"],
    }
    return args + workload[subcommand]


def _entry_point(name: str, module: str) -> list[str]:
    """The console script installed beside this interpreter, else ``python -m``."""
    for folder in (sysconfig.get_path("scripts"), str(Path(sys.executable).parent)):
        path = Path(folder) / name
        if path.is_file() and os.access(path, os.X_OK):
            return [str(path)]
    return [sys.executable, "-m", module]


#: The environment of measured commands: with byte-code caching, as users have it.
_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _warm_up(commands: dict[str, list[str]]) -> None:
    """Run each command once (its modules compiled, the caches warm); a failure stops here."""
    for name, argv in commands.items():
        proc = subprocess.run(argv, capture_output=True, env=_ENV, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"{name} exited {proc.returncode}: {proc.stderr.decode()}")


def _interleaved(commands: dict[str, list[str]], runs: int) -> dict[str, list[float]]:
    _warm_up(commands)
    names = list(commands)
    times: dict[str, list[float]] = {name: [] for name in names}
    for i in range(runs):
        shift = i % len(names)
        for name in names[shift:] + names[:shift]:
            argv = commands[name]
            times[name].append(
                _timed(lambda argv=argv: subprocess.run(argv, capture_output=True, env=_ENV))  # type: ignore[misc]
            )
    return times


def startup_commands(root: Path) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """The floors (the model floor last) and the guarded start-up commands."""
    py = sys.executable
    floors = {
        "python -c pass": [py, "-c", "pass"],
        f'python -c "{LIBRARIES}"': [py, "-c", LIBRARIES],
        MODEL_FLOOR: [py, "-c", ONE_MODEL],
    }
    dropin = _entry_point("build_slurm_script", "scriptbuilder.cli.dropin")
    guarded = {
        f"build_slurm_script {sub}": [*dropin, *_dropin_args(sub, root / "logs")]
        for sub in ("pytest", "custom", "bench", "eval")
    }
    request = root / "request.json"
    request.write_text(json.dumps(_request(root, "pytest", 0)))
    (root / "jobs").mkdir(exist_ok=True)  # a work_dir's parent exists, as in the orchestrator
    cli = _entry_point("scriptbuilder", "scriptbuilder")
    guarded["scriptbuilder build (pytest)"] = [*cli, "build", str(request)]
    return floors, guarded


def bench_startup(cfg: Config, root: Path) -> list[Row]:
    floors, guarded = startup_commands(root)
    times = _interleaved({**floors, **guarded}, cfg.runs)
    base = statistics.median(times[MODEL_FLOOR])
    rows = []
    for name, samples in times.items():
        ratio = statistics.median(samples) / base
        if name in guarded:
            ok = ratio <= START_UP_LIMIT
            rows.append(Row(name, samples, f"{ratio:.2f}x", f"<= {START_UP_LIMIT}x", ok))
        else:
            rows.append(Row(name, samples, f"{ratio:.2f}x"))
    return rows


def instructions(argv: list[str]) -> int:
    """Instructions ``argv`` executes, counted by callgrind: repeatable to a thousandth,
    whatever else the machine is doing."""
    with tempfile.TemporaryDirectory() as out:
        proc = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}/callgrind", *argv],
            capture_output=True,
            text=True,
            env={**_ENV, "PYTHONHASHSEED": "0"},  # string hashing varies the count else
            check=False,
        )
    found = re.search(r"I\s+refs:\s+([\d,]+)", proc.stderr)
    if proc.returncode != 0 or found is None:
        raise RuntimeError(f"callgrind of {argv[0]} failed: {proc.stderr[-500:]}")
    return int(found[1].replace(",", ""))


def instruction_table(root: Path) -> str:
    """Start-up counted in instructions, each as its ratio to the model floor's count."""
    floors, guarded = startup_commands(root)
    commands = {**floors, **guarded}
    _warm_up(commands)
    counts = {name: instructions(argv) for name, argv in commands.items()}
    lines = ["| start-up | instructions | ratio |", "| --- | ---: | ---: |"]
    for name, count in counts.items():
        lines.append(f"| {name} | {count / 1e6:,.0f}M | {count / counts[MODEL_FLOOR]:.2f}x |")
    return "\n".join(lines)


# ------------------------------------------------------------------- sweep


def bench_sweep(cfg: Config, root: Path) -> list[Row]:
    import scriptbuilder

    kinds = ("pytest", "eval", "bench", "custom")
    requests = [_request(root, kinds[i % 4], i) for i in range(cfg.sweep)]
    options: dict[str, Any] = {
        "environ": {"HOME": "/home/alice"},
        "machine": lambda: "x86_64",
        "clock": lambda: FIXED_CLOCK,
    }

    def build_many() -> None:
        for result in scriptbuilder.build_many(requests, **options):
            if result.job is None:
                raise RuntimeError(f"sweep build failed: {result.error}")

    build_many()  # warm-up
    samples = [_timed(build_many) for _ in range(cfg.batches)]
    rate = cfg.sweep / statistics.median(samples)
    rows = [
        Row(
            f"build_many, {cfg.sweep:,} mixed requests (nothing written)",
            samples,
            f"{rate:,.0f} builds/s",
            f">= {SWEEP_MINIMUM:,}/s",
            rate >= SWEEP_MINIMUM,
        )
    ]
    sweep = root / "sweep.jsonl"
    sweep.write_text("".join(json.dumps(r) + "\n" for r in requests))
    argv = [*_entry_point("scriptbuilder", "scriptbuilder"), "build", "--many", str(sweep)]

    def many() -> None:
        shutil.rmtree(root / "jobs", ignore_errors=True)
        (root / "jobs").mkdir()
        subprocess.run(argv, capture_output=True, check=True)

    many_samples = [_timed(many) for _ in range(cfg.batches)]
    ratio = statistics.median(many_samples) / statistics.median(samples)
    rows.append(
        Row(
            f"scriptbuilder build --many, the same {cfg.sweep:,} requests (files written)",
            many_samples,
            f"{cfg.sweep / statistics.median(many_samples):,.0f} builds/s, {ratio:.2f}x build_many",
        )
    )
    return rows


# ------------------------------------------------------------------ report


def table(rows: Sequence[Row]) -> str:
    lines = [
        "| benchmark | median | min | max | result | guard | check |",
        "| --- | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for r in rows:
        check = "" if r.ok is None else ("ok" if r.ok else "MISSED")
        lines.append(
            f"| {r.name} | {r.median * 1000:.2f} ms | {min(r.samples) * 1000:.2f} ms | "
            f"{max(r.samples) * 1000:.2f} ms | {r.result} | {r.guard} | {check} |"
        )
    return "\n".join(lines)


def measure(cfg: Config) -> list[Row]:
    """Every benchmark once, in a fresh sandbox (on tmpfs when there is one)."""
    shm = Path("/dev/shm")
    where = str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None
    root = Path(tempfile.mkdtemp(prefix="scriptbuilder-bench-", dir=where))
    try:
        make_sandbox(root)
        return bench_startup(cfg, root) + bench_sweep(cfg, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="fewer runs, a smaller sweep (CI)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--runs", type=int, help="start-up runs per command")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="only count each start-up command's instructions with valgrind's callgrind",
    )
    args = parser.parse_args(argv)
    if args.instructions:
        with tempfile.TemporaryDirectory(prefix="scriptbuilder-bench-") as root:
            make_sandbox(Path(root))
            print(instruction_table(Path(root)))
        return 0
    cfg = SMOKE if args.smoke else FULL
    if args.runs:
        cfg = Config(args.runs, cfg.sweep, cfg.batches)
    print(
        f"scriptbuilder benchmarks ({'smoke' if args.smoke else 'full'}): Python "
        f"{platform.python_version()} on {os.cpu_count()} cores, {dt.date.today()}",
        flush=True,
    )
    rows = measure(cfg)
    if any(r.ok is False for r in rows):
        # A guard is judged on a second measurement too: one busy moment of a shared
        # machine is not a slower build.
        print(table(rows))
        print("a guard was missed; measuring once more", flush=True)
        rows = measure(cfg)
    print(table(rows))
    if args.json:
        results = [
            {"name": r.name, "median_s": r.median, "result": r.result, "ok": r.ok} for r in rows
        ]
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    missed = [f"{r.name}: {r.result} (guard {r.guard})" for r in rows if r.ok is False]
    for line in missed:
        print(f"guard missed: {line}", file=sys.stderr)
    # The smoke run in CI reports misses; the full run on a quiet machine judges them.
    return 1 if missed and not args.smoke else 0


if __name__ == "__main__":
    sys.exit(main())
