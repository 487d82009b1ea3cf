"""Benchmarks: CLI start-up, in-process and one-process sweeps, the scaling of the file walks.

Standard library only (plus scriptbuilder itself). ``python benchmarks/run.py``
runs the full set in a few minutes; ``--smoke`` runs tiny sizes and few runs in
seconds (CI calls it so the benchmark keeps working; its timings mean little).
Timings are printed, never asserted: the ``check`` column compares each figure
with its target, and the exit status is non-zero only when a benchmarked
command fails.

Sections
--------
* start-up: each drop-in CLI subcommand, through ``python -m
  scriptbuilder.cli.dropin`` and through the installed ``build_slurm_script``
  console script, against the floor ``python -c pass``; ``scriptbuilder build``
  on a JSON pytest request against the library floor ``python -c "import
  click, pydantic, yaml"``; with ``--reference PATH``, an old
  ``build_slurm_script.py`` with the same arguments, and the drop-in's ratio to
  it. Commands run interleaved (one of each per round, the order rotating
  every round); the figure is the ratio of the medians.
* throughput: scripts rendered per second (scenario + workflow -> tree -> text);
  a sweep through ``scriptbuilder.build_many`` (request -> script and
  job_spec.json, nothing written) over a mix of the four workflows; the same
  requests through ``scriptbuilder build --many FILE`` in one process, start-up
  and file writes included, against the in-process sweep.
* scaling: the Hugging Face model lookup on a models root whose first three
  levels hold 1,000 folders and whose deeper levels hold 10k, 50k and 100k more;
  the device inspection of a 10,000-line test file.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT))

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
    MODEL_NAME = "Qwen3/Qwen3-30B-A3B"

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


@dataclass(frozen=True)
class Config:
    cli_runs: int
    render_jobs: int
    build_jobs: int
    batches: int
    lookup_shape: tuple[int, int, int]
    deep_sizes: tuple[int, ...]
    lookup_repeats: int
    test_lines: int
    inspect_repeats: int


FULL = Config(
    cli_runs=30,
    render_jobs=10_000,
    build_jobs=10_000,
    batches=5,
    lookup_shape=(10, 9, 10),  # 10 + 90 + 900 = 1,000 folders in the first three levels
    deep_sizes=(10_000, 50_000, 100_000),
    lookup_repeats=15,
    test_lines=10_000,
    inspect_repeats=15,
)
SMOKE = Config(
    cli_runs=3,
    render_jobs=200,
    build_jobs=100,
    batches=1,
    lookup_shape=(2, 3, 4),
    deep_sizes=(100, 500, 1_000),
    lookup_repeats=3,
    test_lines=500,
    inspect_repeats=3,
)


@dataclass
class Row:
    """One line of the results table. ``unit`` says how to read the timings."""

    section: str
    name: str
    samples: list[float] = field(repr=False)
    result: str
    target: str = ""
    ok: bool | None = None
    value: float | None = None

    @property
    def median(self) -> float:
        return statistics.median(self.samples)


# ------------------------------------------------------------------ helpers


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def _check(ok: bool | None) -> str:
    return "" if ok is None else ("ok" if ok else "MISSED")


def _timed(func: Callable[[], object]) -> float:
    start = time.perf_counter()
    func()
    return time.perf_counter() - start


@contextmanager
def _scratch(prefix: str, *, fast: bool = False) -> Iterator[Path]:
    """A temporary folder, on tmpfs when ``fast`` and /dev/shm is writable."""
    shm = Path("/dev/shm")
    where = str(shm) if fast and shm.is_dir() and os.access(shm, os.W_OK) else None
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=where))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


# ---------------------------------------------------------------- sandbox


@dataclass(frozen=True)
class Sandbox:
    """A TensorRT-LLM-like checkout, a models folder and a work_dir with slurm_env.json."""

    root: Path
    repo: Path
    work_dir: Path
    models: Path

    @property
    def jobs(self) -> Path:
        """The folder of the sweeps' work_dirs."""
        return self.root / "jobs"

    def request(self, kind: str, index: int = 0) -> dict[str, Any]:
        """Request ``index`` of a sweep: its own work_dir, as the orchestrator gives
        every job one (a sweep into one work_dir would leave only its last job),
        and the sandbox's slurm_env.json."""
        req: dict[str, Any] = {
            "workflow_type": kind,
            "execution_scenario": "local_slurm",
            "work_dir": str(self.jobs / f"{kind}-{index}"),
            "slurm_env_file": str(self.work_dir / "slurm_env.json"),
            "repo_root": str(self.repo),
            "partition": "gpu",
            "account": "acct",
            "models_path": str(self.models),
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


def make_sandbox(root: Path) -> Sandbox:
    repo = root / "TensorRT-LLM"
    (repo / "jenkins").mkdir(parents=True)
    (repo / "jenkins" / "current_image_tags.properties").write_text(
        f"LLM_DOCKER_IMAGE={IMAGE}\nLLM_SBSA_DOCKER_IMAGE={IMAGE}-sbsa\n"
    )
    tests = repo / "tests" / "integration" / "defs" / "accuracy"
    tests.mkdir(parents=True)
    (tests / "test_llm_api_pytorch.py").write_text(TEST_FILE)
    work_dir = root / "work"
    work_dir.mkdir()
    (work_dir / "slurm_env.json").write_text(json.dumps(SLURM_ENV, indent=2))
    models = root / "models"
    (models / "meta-llama").mkdir(parents=True)
    return Sandbox(root, repo, work_dir, models)


# ---------------------------------------------------------------- start-up


def _compat_args(subcommand: str, log_dir: Path) -> list[str]:
    args = [
        subcommand,
        "--model-name",
        "llama",
        "--partition",
        "gpu",
        "--account",
        "acct",
        "--docker-image",
        IMAGE,
        "--container-mounts",
        "/lustre/models:/models,/home/alice/TensorRT-LLM:/code",
        "--project-path",
        "/code",
        "--log-dir",
        str(log_dir),
    ]
    workload = {
        "pytest": ["--test-cmd", PYTEST_CMD],
        "custom": ["--custom-cmd", "python3 -c 'print(1)' && echo \"$HOME\""],
        "bench": [
            "--bench-cmd",
            "trtllm-bench --model m prepare-dataset --output /tmp/d.json && "
            "trtllm-bench --model m throughput --dataset /tmp/d.json",
            "--ntasks",
            "2",
            "--ntasks-per-node",
            "2",
            "--mpi",
            "pmix_v4",
        ],
        "eval": ["--eval-cmd", "trtllm-eval --model /models/m --tp_size 2 gsm8k"],
    }
    return args + workload[subcommand]


def console_script(name: str) -> Path | None:
    """The entry point installed beside this interpreter (never a PATH shim)."""
    for folder in (sysconfig.get_path("scripts"), str(Path(sys.executable).parent)):
        path = Path(folder) / name
        if path.is_file() and os.access(path, os.X_OK):
            return path
    return None


def _interleaved(commands: dict[str, list[str]], runs: int) -> dict[str, list[float]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHONPROFILE")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    names = list(commands)
    for name in names:  # warm the caches; a failing command stops the benchmark
        proc = subprocess.run(commands[name], capture_output=True, env=env, check=False)
        if proc.returncode != 0:
            raise RuntimeError(
                f"{name} exited {proc.returncode}: {proc.stderr.decode(errors='replace')}"
            )
    times: dict[str, list[float]] = {name: [] for name in names}
    for i in range(runs):
        shift = i % len(names)
        for name in names[shift:] + names[:shift]:
            argv = commands[name]
            times[name].append(
                _timed(
                    lambda argv=argv: subprocess.run(  # type: ignore[misc]
                        argv,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                        env=env,
                        check=True,
                    )
                )
            )
    return times


#: Start-up targets: the drop-in against ``python -c pass``, ``scriptbuilder build``
#: against the libraries it is built on.
DROP_IN_LIMIT = 2.2
BUILD_LIMIT = 1.5
LIBRARIES = "import click, pydantic, yaml"
#: What no drop-in can do without: the library its command line is declared with.
CLICK_ONLY = "import click"
#: The libraries and the least a pydantic validator needs: one model, defined and used.
ONE_MODEL = LIBRARIES + "\nclass M(pydantic.BaseModel):\n    x: int\nM(x=1)"


def bench_startup(cfg: Config, sandbox: Sandbox, reference: Path | None = None) -> list[Row]:
    py = sys.executable
    floor = "python -c pass (floor)"
    lib_floor = f'python -c "{LIBRARIES}" (library floor)'
    click_floor = f'python -c "{CLICK_ONLY}" (under the drop-in target)'
    model_floor = "python -c <the libraries + one pydantic model> (under the build target)"
    commands: dict[str, list[str]] = {
        floor: [py, "-c", "pass"],
        lib_floor: [py, "-c", LIBRARIES],
        click_floor: [py, "-c", CLICK_ONLY],
        model_floor: [py, "-c", ONE_MODEL],
    }
    drop_in = console_script("build_slurm_script")
    for sub in ("pytest", "custom", "bench", "eval"):
        args = _compat_args(sub, sandbox.root / "logs")
        commands[f"python -m scriptbuilder.cli.dropin {sub}"] = [
            py,
            "-m",
            "scriptbuilder.cli.dropin",
            *args,
        ]
        if drop_in:
            commands[f"build_slurm_script {sub}"] = [str(drop_in), *args]
        if reference:
            commands[f"reference {reference.name} {sub}"] = [py, str(reference), *args]
    request = sandbox.root / "request.json"
    request.write_text(json.dumps(sandbox.request("pytest")))
    commands["python -m scriptbuilder build (pytest)"] = [
        py,
        "-m",
        "scriptbuilder",
        "build",
        str(request),
    ]
    cli = console_script("scriptbuilder")
    if cli:
        commands["scriptbuilder build (pytest)"] = [str(cli), "build", str(request)]
    times = _interleaved(commands, cfg.cli_runs)
    base = statistics.median(times[floor])
    libs = statistics.median(times[lib_floor])
    rows = []
    for name, samples in times.items():
        median = statistics.median(samples)
        if name == model_floor:
            ratio, against, limit = median / libs, "library floor", None
        elif " build " in name:
            ratio, against, limit = median / libs, "library floor", BUILD_LIMIT
        elif name.startswith(("python -m scriptbuilder.cli.dropin", "build_slurm_script")):
            ratio, against, limit = median / base, "floor", DROP_IN_LIMIT
        else:
            ratio, against, limit = median / base, "floor", None
        rows.append(
            Row(
                "start-up",
                name,
                samples,
                f"{ratio:.2f}x {against}",
                "" if limit is None else f"<= {limit}x",
                None if limit is None else ratio <= limit,
                ratio,
            )
        )
    if reference:
        for sub in ("pytest", "custom", "bench", "eval"):
            ours = (
                times.get(f"build_slurm_script {sub}")
                or times[f"python -m scriptbuilder.cli.dropin {sub}"]
            )
            old = times[f"reference {reference.name} {sub}"]
            ratio = statistics.median(ours) / statistics.median(old)
            rows.append(
                Row(
                    "start-up",
                    f"drop-in {sub} vs reference {reference.name}",
                    ours,
                    f"{ratio:.2f}x reference",
                    value=ratio,
                )
            )
    return rows


# -------------------------------------------------------------- throughput


def _render_inputs(count: int) -> list[tuple[Any, ...]]:
    """Per job: scenario, workflow and shape, as the drop-in CLI would make them."""
    from scriptbuilder.scenarios.slurm import LocalSlurm
    from scriptbuilder.script.plan import Container, SlurmAllocation, TaskShape
    from scriptbuilder.workflows.bench import BenchWorkflow
    from scriptbuilder.workflows.custom import CustomWorkflow
    from scriptbuilder.workflows.eval import EvalWorkflow
    from scriptbuilder.workflows.pytest_workflow import PytestWorkflow

    jobs = []
    for i in range(count):
        kind = ("pytest", "custom", "bench", "eval")[i % 4]
        ntasks = 1 + i % 4 if kind in ("bench", "eval") else 1
        mpi = "pmix_v4" if ntasks > 1 else None
        workflow: Any
        if kind == "pytest":
            workflow = PytestWorkflow(f"pytest -v 'test_x.py::TestM::test_{i}[tp{ntasks}]'")
        elif kind == "custom":
            workflow = CustomWorkflow(
                f"python3 -c 'print({i})' && echo \"$HOME\"",
                custom_workdir="/code",
                project_path="/code",
            )
        elif kind == "bench":
            workflow = BenchWorkflow(
                f"trtllm-bench --model m{i} prepare-dataset --output /tmp/d{i}.json",
                f"trtllm-bench --model m{i} throughput --tp {ntasks} --dataset /tmp/d{i}.json",
            )
        else:
            workflow = EvalWorkflow(f"trtllm-eval --model /models/m{i} --tp_size {ntasks} gsm8k")
        model = f"model_{i}"
        allocation = SlurmAllocation(
            job_name=workflow.job_name(model),
            partition="gpu",
            account="acct",
            time_limit="02:00:00",
            tasks=TaskShape(1, ntasks, ntasks),
            gres=f"gpu:{ntasks}",
            log_dir=f"/lustre/logs/run {i}",
        )
        container = Container(IMAGE, f"{model}_{kind}", "/lustre:/lustre", "/code")
        scenario = LocalSlurm(
            allocation,
            container,
            models_root="/models",
            header=("Generated by the benchmark.",),
        )
        jobs.append((scenario, workflow, TaskShape(1, ntasks, ntasks, mpi)))
    return jobs


def _sweep(cfg: Config, sandbox: Sandbox, requests: Sequence[dict[str, Any]]) -> list[Row]:
    """``build_many`` in this process against ``scriptbuilder build --many`` in one."""
    import scriptbuilder

    options: dict[str, Any] = {
        "environ": {"HOME": "/home/alice"},
        "machine": lambda: "x86_64",
        "clock": lambda: FIXED_CLOCK,
    }

    def build_many(reqs: Sequence[dict[str, Any]]) -> None:
        for result in scriptbuilder.build_many(reqs, **options):
            if result.job is None or not result.job.script_text:
                raise RuntimeError(f"sweep build failed: {result.error}")

    def fresh(func: Callable[[], object]) -> float:
        """``func`` timed with no job folder left by an earlier batch (the folder
        holding them is there, as a work_dir's parent must be)."""
        shutil.rmtree(sandbox.jobs, ignore_errors=True)
        sandbox.jobs.mkdir()
        return _timed(func)

    build_many(requests[:8])  # warm-up: lazy imports
    samples = [fresh(lambda: build_many(requests)) for _ in range(cfg.batches)]
    in_process = statistics.median(samples)
    rate = len(requests) / in_process
    rows = [
        Row(
            "throughput",
            f"sweep: build_many, {len(requests):,} mixed requests (in process, nothing written)",
            samples,
            f"{rate:,.0f} builds/s",
            ">= 5,000/s",
            rate >= 5_000,
            rate,
        )
    ]
    sweep = sandbox.root / "sweep.jsonl"
    sweep.write_text("".join(json.dumps(r) + "\n" for r in requests))
    cli = console_script("scriptbuilder")
    base = [str(cli)] if cli else [sys.executable, "-m", "scriptbuilder"]
    for label, extra, target in (
        ("files written", [], True),
        ("--dry-run", ["--dry-run"], False),
    ):
        argv = [*base, "build", "--many", str(sweep), *extra]

        def run(argv: list[str] = argv) -> None:
            proc = subprocess.run(argv, capture_output=True, check=False)
            if proc.returncode != 0 or proc.stdout.count(b"\n") != len(requests):
                raise RuntimeError(f"build --many exited {proc.returncode}: {proc.stderr[-500:]!r}")

        samples = [fresh(run) for _ in range(cfg.batches)]
        ratio = statistics.median(samples) / in_process
        rows.append(
            Row(
                "throughput",
                f"sweep: scriptbuilder build --many, {len(requests):,} requests ({label})",
                samples,
                f"{len(requests) / statistics.median(samples):,.0f} builds/s, "
                f"{ratio:.2f}x build_many",
                "<= 1.5x build_many" if target else "",
                ratio <= 1.5 if target else None,
                ratio,
            )
        )
    for kind in ("pytest", "eval", "bench", "custom"):
        subset = [r for r in requests if r["workflow_type"] == kind]
        samples = [
            fresh(lambda subset=subset: build_many(subset))  # type: ignore[misc]
            for _ in range(cfg.batches)
        ]
        rate = len(subset) / statistics.median(samples)
        rows.append(
            Row(
                "throughput",
                f"sweep: build_many, {len(subset):,} {kind} requests",
                samples,
                f"{rate:,.0f} builds/s",
                value=rate,
            )
        )
    return rows


def bench_throughput(cfg: Config, sandbox: Sandbox) -> list[Row]:
    from scriptbuilder.job.builder import JobBuilder

    jobs = _render_inputs(cfg.render_jobs)

    def render_all() -> None:
        for scenario, workflow, shape in jobs:
            JobBuilder(scenario, workflow, shape).render()

    samples = [_timed(render_all) for _ in range(cfg.batches)]
    rate = cfg.render_jobs / statistics.median(samples)
    rows = [
        Row(
            "throughput",
            f"render {cfg.render_jobs:,} scripts (tree + text)",
            samples,
            f"{rate:,.0f} scripts/s",
            value=rate,
        )
    ]
    kinds = ("pytest", "eval", "bench", "custom")
    requests = [sandbox.request(kinds[i % 4], i) for i in range(cfg.build_jobs)]
    return rows + _sweep(cfg, sandbox, requests)


# ----------------------------------------------------------------- scaling


def _make_top(root: Path, shape: tuple[int, int, int]) -> list[Path]:
    """The first three levels (org / family / model); returns the level-3 folders."""
    leaves = []
    for a in range(shape[0]):
        for b in range(shape[1]):
            for c in range(shape[2]):
                leaf = root / f"org{a:02d}" / f"family{b:02d}" / f"Model-{a}-{b}-{c}"
                leaf.mkdir(parents=True)
                leaves.append(leaf)
    return leaves


def _grow(leaves: Sequence[Path], start: int, stop: int) -> None:
    """Folders ``start..stop`` of the deep levels: snapshots/<n> under the models."""
    for n in range(start, stop):
        snapshots = leaves[n % len(leaves)] / "snapshots"
        if n < len(leaves):
            snapshots.mkdir()
        else:
            os.mkdir(snapshots / f"rev{n:06d}")


def bench_model_lookup(cfg: Config) -> list[Row]:
    from scriptbuilder.inputs.model_lookup import find_model_dir

    rows = []
    with _scratch("scriptbuilder-bench-models-", fast=True) as root:
        leaves = _make_top(root, cfg.lookup_shape)
        last = leaves[-1].name.upper()  # the last folder in walk order, case-insensitive
        top = sum(1 for _ in root.rglob("*"))
        made = 0
        medians: dict[int, float] = {}
        for size in cfg.deep_sizes:
            _grow(leaves, made, size)
            made = size
            for label, name, expect in (("miss", "no-such-model", False), ("hit", last, True)):
                if (find_model_dir(root, name) is not None) is not expect:
                    raise RuntimeError(f"model lookup of {name} went wrong")
                samples = [
                    _timed(lambda name=name: find_model_dir(root, name))  # type: ignore[misc]
                    for _ in range(cfg.lookup_repeats)
                ]
                if label == "miss":
                    medians[size] = statistics.median(samples)
                rows.append(
                    Row(
                        "scaling",
                        f"model lookup ({label}), {top:,} + {size:,} deeper folders",
                        samples,
                        _ms(statistics.median(samples)),
                        value=statistics.median(samples),
                    )
                )
        small, large = medians[cfg.deep_sizes[0]], medians[cfg.deep_sizes[-1]]
        ratio = large / small
        rows.append(
            Row(
                "scaling",
                f"model lookup (miss): {cfg.deep_sizes[-1]:,} vs {cfg.deep_sizes[0]:,} deeper",
                [large],
                f"{ratio:.2f}x",
                "<= 1.5x",
                ratio <= 1.5,
                ratio,
            )
        )
    return rows


def write_test_file(path: Path, lines: int) -> str:
    """A test module of about ``lines`` lines; returns the class::function of its last test."""
    out = ['"""Generated for the benchmark."""', "import pytest", "", "EIGHT = 8", ""]
    i = 0
    while len(out) < lines:
        out += [
            "",
            "@pytest.mark.skip_less_device_memory(80000)",
            f"@pytest.mark.skip_less_device({1 + i % 2})",
            f"class TestModel{i}:",
            f'    """Accuracy of model {i}."""',
            "",
            f"    MODEL_PATH = 'models/m{i}'",
            "",
            "    @pytest.mark.skip_less_device(4)",
            "    @pytest.mark.parametrize('backend', ['TRTLLM', 'FLASHINFER'])",
            "    @pytest.mark.parametrize(",
            "        'tp,pp',",
            "        [",
            "            pytest.param(2, 1, id='tp2'),",
            "            pytest.param(",
            "                4, 2, id='tp4pp2', marks=pytest.mark.skip_less_device(EIGHT)",
            "            ),",
            "        ],",
            "    )",
            f"    def test_case_{i}(self, tp, pp, backend):",
            "        with open(self.MODEL_PATH) as handle:",
            "            data = {'tp': tp, 'pp': pp, 'rows': [1, 2, 3]}",
            "            assert handle.read() != str(data), f'mismatch {tp} {pp}'",
            "",
            "    def test_plain(self):",
            '        """Runs on the class default."""',
            "        assert True",
        ]
        i += 1
    path.write_text("\n".join(out) + "\n")
    return f"TestModel{i - 1}::test_case_{i - 1}"


def _cold(inspect: Any, cmd: str) -> Any:
    """``inspect(cmd, [])``: every call reads the file."""
    return inspect(cmd, [])


def bench_inspection(cfg: Config) -> list[Row]:
    from scriptbuilder.inputs.tests import required_devices

    rows = []
    with _scratch("scriptbuilder-bench-tests-") as root:
        path = root / "test_big.py"
        target = write_test_file(path, cfg.test_lines)
        count = len(path.read_text().splitlines())
        cls = target.split("::")[0]
        cases = [
            ("one case", f"{path}::{target}[tp4pp2-TRTLLM]", 8, True),
            ("one function", f"{path}::{target}", 8, True),
            ("one class", f"{path}::{cls}", 8, False),
            ("whole file", str(path), 8, False),
        ]
        for label, selector, expected, targeted in cases:
            cmd = f"pytest -v {selector} --timeout 3600"
            found = required_devices(cmd, [])
            if found.requirement is None or found.requirement.devices != expected:
                raise RuntimeError(f"device inspection of {label} went wrong: {found}")
            # Cold: the file is read and outlined again each time, as in a new process.
            samples = [
                _timed(lambda cmd=cmd: _cold(required_devices, cmd))  # type: ignore[misc]
                for _ in range(cfg.inspect_repeats)
            ]
            median = statistics.median(samples)
            rows.append(
                Row(
                    "scaling",
                    f"device inspection (cold), {count:,}-line file, {label}",
                    samples,
                    _ms(median),
                    "< 50 ms" if targeted else "",
                    median < 0.050 if targeted else None,
                    median,
                )
            )
    return rows


# ------------------------------------------------------------------- report


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "date": dt.date.today().isoformat(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "executable": sys.executable,
        "platform": platform.platform(),
        "cpu": cpu,
        "cores": os.cpu_count(),
    }


def table(rows: Sequence[Row]) -> str:
    lines = [
        "| section | benchmark | median | min | max | result | target | check |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r.section} | {r.name} | {_ms(r.median)} | {_ms(min(r.samples))} | "
            f"{_ms(max(r.samples))} | {r.result} | {r.target} | {_check(r.ok)} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, few runs (CI)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--runs", type=int, help="start-up runs per command (default 30)")
    parser.add_argument(
        "--reference",
        metavar="PATH",
        type=Path,
        help="an old build_slurm_script.py, run side by side with the drop-in (start-up)",
    )
    parser.add_argument(
        "--only",
        choices=["start-up", "throughput", "scaling"],
        action="append",
        help="run only this section (repeatable)",
    )
    args = parser.parse_args(argv)
    cfg = SMOKE if args.smoke else FULL
    if args.runs:
        cfg = Config(**{**asdict(cfg), "cli_runs": args.runs})
    sections = set(args.only or ["start-up", "throughput", "scaling"])
    info = machine()
    mode = "smoke" if args.smoke else "full"
    print(
        f"scriptbuilder benchmarks ({mode}): Python {info['python']} on {info['cores']} cores, "
        f"{info['cpu']}, {info['date']}",
        flush=True,
    )
    rows: list[Row] = []
    # On tmpfs when there is one, so the disk's write-back does not decide the
    # figures of the sweep that writes 10,000 work_dirs.
    with _scratch("scriptbuilder-bench-", fast=True) as root:
        sandbox = make_sandbox(root)
        if "start-up" in sections:
            rows += bench_startup(cfg, sandbox, args.reference)
        if "throughput" in sections:
            rows += bench_throughput(cfg, sandbox)
    if "scaling" in sections:
        rows += bench_model_lookup(cfg)
        rows += bench_inspection(cfg)
    if args.smoke:  # tiny sizes and three runs: the figures say nothing about the targets
        for row in rows:
            row.target, row.ok = "", None
    print(table(rows))
    if args.json:
        payload = {
            "mode": mode,
            "machine": info,
            "results": [
                {
                    "section": r.section,
                    "name": r.name,
                    "median_s": r.median,
                    "min_s": min(r.samples),
                    "max_s": max(r.samples),
                    "runs": len(r.samples),
                    "result": r.result,
                    "value": r.value,
                    "target": r.target or None,
                    "ok": r.ok,
                }
                for r in rows
            ],
        }
        Path(args.json).write_text(json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
