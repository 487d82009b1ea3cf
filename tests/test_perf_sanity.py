"""Perf-sanity / benchmark (Category 4): submit.py's argv, preflight checks and runs.

The runs use the stand-in ``tests/data/trtllm_repo/jenkins/scripts/perf/local/submit.py``
(same flag set as TensorRT-LLM's). Review argv snapshot changes with
``git diff tests/snapshots``; accept them with ``--snapshot-update``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from syrupy.assertion import SnapshotAssertion

from scriptbuilder.errors import BuildError
from scriptbuilder.outputs.submit import run_submit
from scriptbuilder.workflows.perf_sanity import (
    LAUNCH_LOG_PATTERN,
    LAUNCH_SCRIPT_NAME,
    SUBMIT_PY_RELPATH,
    SubmitRequest,
    preflight,
    submit_argv,
    submit_py_path,
)

DATA = Path(__file__).parent / "data"
STANDIN = DATA / "trtllm_repo" / SUBMIT_PY_RELPATH
AGG_YAML = DATA / "trtllm" / "gpt_oss_120b_fp4_blackwell.yaml"
DISAGG_STEM = "b200_deepseek-r1-fp4_1k1k_con1_ctx1_dep4_gen1_tep8_eplb0_mtp3_ccb-UCX"
DISAGG_YAML = DATA / "trtllm" / f"{DISAGG_STEM}.yaml"
AGG_SERVER = "gpt_oss_fp4_tp2_mtp0_1k1k"
FAIL_LINE = "RuntimeError: submit.py stand-in: failure requested by SUBMIT_STANDIN_FAIL=1"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A checkout with submit.py and the two configs where a test id finds them."""
    root = tmp_path / "trtllm"
    target = root / SUBMIT_PY_RELPATH
    target.parent.mkdir(parents=True)
    shutil.copy2(STANDIN, target)
    agg = root / "tests/scripts/perf-sanity/aggregated"
    disagg = root / "tests/scripts/perf-sanity/disaggregated"
    agg.mkdir(parents=True)
    disagg.mkdir(parents=True)
    shutil.copy2(AGG_YAML, agg / AGG_YAML.name)
    shutil.copy2(DISAGG_YAML, disagg / DISAGG_YAML.name)
    return root


def request(work: Path, **overrides: object) -> SubmitRequest:
    fields: dict[str, object] = {
        "submit_py": STANDIN,
        "test_list": None,
        "config_file": str(AGG_YAML),
        "test_name": AGG_SERVER,
        "benchmark_mode": None,
        "partition": "batch",
        "account": "acct",
        "job_name": "gpt_oss_120b_fp4_benchmark",
        "image": "nvcr.io#nvidia/tensorrt-llm/devel:x86_64",
        "mounts": "/home/u:/home/u,/data/models:/models",
        "work_dir": str(work),
        "llm_src": str(DATA / "trtllm_repo"),
        "llm_models_root": "/models",
        "launch_sh": work / LAUNCH_SCRIPT_NAME,
        "time": "01:30:00",
        "mpi_type": None,
    }
    fields.update(overrides)
    return SubmitRequest(**fields)  # type: ignore[arg-type]


def portable(argv: list[str], tmp_path: Path) -> str:
    """The argv as JSON with machine-specific paths replaced by placeholders."""
    out = []
    for arg in argv:
        if arg == sys.executable:
            arg = "<python>"
        arg = arg.replace(str(tmp_path), "<tmp>").replace(str(DATA), "<tests/data>")
        out.append(arg)
    return json.dumps(out, indent=2) + "\n"


def run(argv: list[str], tmp_path: Path, **env: str) -> str:
    return run_submit(
        argv,
        cwd=tmp_path,
        timeout=60,
        output_log=tmp_path / "submit_py.log",
        env={**os.environ, **env},
    )


# --------------------------------------------------------------------------
# argv
# --------------------------------------------------------------------------


def test_argv_aggregated_config(tmp_path: Path, json_snapshot: SnapshotAssertion) -> None:
    argv = submit_argv(request(tmp_path / "work", mpi_type="pmix_v5"))
    assert argv[:2] == [sys.executable, str(STANDIN)]
    assert portable(argv, tmp_path) == json_snapshot


def test_argv_disaggregated_config(tmp_path: Path, json_snapshot: SnapshotAssertion) -> None:
    req = request(
        tmp_path / "work",
        config_file=str(DISAGG_YAML),
        test_name=None,
        benchmark_mode="gen_only",
        job_name="deepseek_r1_benchmark",
    )
    argv = submit_argv(req, python="python3")
    assert "--test-name" not in argv and "--mpi-type" not in argv
    assert portable(argv, tmp_path) == json_snapshot


def test_argv_test_list_wins(tmp_path: Path, json_snapshot: SnapshotAssertion) -> None:
    test = (
        f"perf/test_perf_sanity.py::test_e2e[aggr_upload-gpt_oss_120b_fp4_blackwell-{AGG_SERVER}]"
    )
    req = request(tmp_path / "work", test_list=test, benchmark_mode="e2e", job_name="gpt_perf")
    argv = submit_argv(req, python="python3")
    assert "--config-file" not in argv and "--test-name" not in argv
    assert "--benchmark-mode" not in argv
    assert argv[2:4] == ["--test-list", test]
    assert portable(argv, tmp_path) == json_snapshot


def test_argv_value_starting_with_dash_is_joined(tmp_path: Path) -> None:
    argv = submit_argv(request(tmp_path, mounts="-odd", test_name="-srv"))
    assert "--mounts=-odd" in argv and "--test-name=-srv" in argv


# --------------------------------------------------------------------------
# Running the stand-in for real
# --------------------------------------------------------------------------


def test_run_aggregated_config(tmp_path: Path) -> None:
    work = tmp_path / "work"
    record = tmp_path / "record.json"
    argv = submit_argv(request(work, mpi_type="pmix_v5"))
    stdout = run(argv, tmp_path, SUBMIT_STANDIN_RECORD=str(record))

    launch = work / LAUNCH_SCRIPT_NAME
    assert f"sbatch {launch}" in stdout
    assert os.access(launch, os.X_OK)
    text = launch.read_text()
    for line in (
        "#SBATCH --nodes=1",
        "#SBATCH --ntasks=8",
        "#SBATCH --ntasks-per-node=8",
        "#SBATCH --partition=batch",
        "#SBATCH --account=acct",
        "#SBATCH --time=01:30:00",
        "#SBATCH --job-name=gpt_oss_120b_fp4_benchmark",
        f"#SBATCH --output={work}/{LAUNCH_LOG_PATTERN}",
    ):
        assert line in text.splitlines()
    assert "--mpi=pmix_v5" in text
    subprocess.run(["bash", "-n", str(launch)], check=True)
    tests = (work / "test_list.txt").read_text()
    assert tests == f"perf/test_perf_sanity.py::test_e2e[aggr-{AGG_YAML.stem}-{AGG_SERVER}]\n"
    assert json.loads(record.read_text())["argv"] == argv[1:]
    log = (tmp_path / "submit_py.log").read_text()
    assert "--- exit code 0 ---" in log and "sbatch" in log


def test_run_disaggregated_config(tmp_path: Path) -> None:
    work = tmp_path / "work"
    req = request(work, config_file=str(DISAGG_YAML), test_name=None, benchmark_mode="e2e")
    run(submit_argv(req), tmp_path)
    lines = (work / LAUNCH_SCRIPT_NAME).read_text().splitlines()
    assert "#SBATCH --nodes=2" in lines  # ctx tp4 (1 node) + gen tp8 (1 node)
    assert "#SBATCH --ntasks=16" in lines
    assert not any(line.startswith("#SBATCH --mpi") for line in lines)
    tests = (work / "test_list.txt").read_text()
    assert tests == f"perf/test_perf_sanity.py::test_e2e[disagg-e2e-{DISAGG_STEM}]\n"


def test_run_test_list_finds_config_under_llm_src(tmp_path: Path, repo: Path) -> None:
    work = tmp_path / "work"
    test = f"perf/test_perf_sanity.py::test_e2e[aggr_upload-{AGG_YAML.stem}-{AGG_SERVER}]"
    req = request(
        work,
        submit_py=submit_py_path(repo),
        test_list=test,
        config_file=str(tmp_path / "ignored.yaml"),
        llm_src=str(repo),
        partition="unspecified",
    )
    run(submit_argv(req), tmp_path)
    text = (work / LAUNCH_SCRIPT_NAME).read_text()
    assert "#SBATCH --partition" not in text  # 'unspecified' omits the line
    assert "aggregated/gpt_oss_120b_fp4_blackwell.yaml" in text
    tests = (work / "test_list.txt").read_text()
    assert tests == f"perf/test_perf_sanity.py::test_e2e[aggr-{AGG_YAML.stem}-{AGG_SERVER}]\n"


def standin(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(STANDIN), *args], capture_output=True, text=True, check=False
    )


REQUIRED = [
    "--partition=p",
    "--account=a",
    "--job-name=j",
    "--image=i",
    "--llm-models-root=/m",
]


def test_standin_refuses_unknown_flag(tmp_path: Path) -> None:
    done = standin(*REQUIRED, f"--config-file={AGG_YAML}", "--nodes=2")
    assert done.returncode == 2
    assert "unrecognized arguments: --nodes=2" in done.stderr


def test_standin_refuses_missing_required_flag() -> None:
    done = standin(*[a for a in REQUIRED if not a.startswith("--account")])
    assert done.returncode == 2
    assert "the following arguments are required: --account" in done.stderr


def test_standin_refuses_bad_choice() -> None:
    done = standin(*REQUIRED, "--benchmark-mode=fast")
    assert done.returncode == 2


def test_run_submit_reports_argparse_error(tmp_path: Path) -> None:
    argv = [*submit_argv(request(tmp_path / "work")), "--bogus"]
    with pytest.raises(BuildError, match=r"exit 2\): .*unrecognized arguments: --bogus"):
        run(argv, tmp_path)


def test_run_submit_failure_names_last_error_line(tmp_path: Path) -> None:
    argv = submit_argv(request(tmp_path / "work"))
    log = tmp_path / "submit_py.log"
    with pytest.raises(BuildError) as caught:
        run(argv, tmp_path, SUBMIT_STANDIN_FAIL="1")
    message = str(caught.value)
    assert "\n" not in message
    assert f"submit.py failed (exit 1): {FAIL_LINE}; full output in {log}" == message
    kept = log.read_text()
    assert "Traceback (most recent call last)" in kept and "--- exit code 1 ---" in kept
    assert not (tmp_path / "work" / LAUNCH_SCRIPT_NAME).exists()


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"config_file": "/nonexistent/x.yaml"}, "FileNotFoundError"),
        ({"test_name": "nope"}, "ValueError: Server config not found for test_name: nope"),
        ({"test_name": None}, "ValueError: --test-name is required for aggregated config"),
        ({"test_list": "perf/test_perf_sanity.py::test_e2e[agg-x-y]"}, "Invalid test name prefix"),
        ({"config_file": "NO_GPN"}, "Missing gpus_per_node in hardware configuration"),
    ],
    ids=["missing-yaml", "unknown-server", "no-server", "bad-prefix", "no-gpus-per-node"],
)
def test_standin_failures_surface_as_build_errors(
    tmp_path: Path, change: dict[str, object], error: str
) -> None:
    if change.get("config_file") == "NO_GPN":
        bad = tmp_path / "no_gpn.yaml"
        bad.write_text(AGG_YAML.read_text().replace("gpus_per_node: 8", "gpus: 8"))
        change = {"config_file": str(bad)}
    with pytest.raises(BuildError, match=r"submit\.py failed \(exit 1\): .*" + error):
        run(submit_argv(request(tmp_path / "work", **change)), tmp_path)


def test_run_submit_timeout_kills_the_process_group(tmp_path: Path) -> None:
    hang = tmp_path / "hang.py"
    marker = tmp_path / "child-alive"
    hang.write_text(
        "import subprocess, sys, time\n"
        "print('starting', flush=True)\n"
        # A grandchild holding the pipes open: killed with the group.
        f"subprocess.Popen(['sh', '-c', 'sleep 30; touch {marker}'])\n"
        "time.sleep(30)\n"
    )
    log = tmp_path / "logs" / "submit_py.log"
    start = time.monotonic()
    with pytest.raises(BuildError) as caught:
        run_submit([sys.executable, str(hang)], cwd=tmp_path, timeout=1, output_log=log)
    assert time.monotonic() - start < 20
    assert str(caught.value) == (
        f"submit.py did not finish within 1 s and was killed; full output in {log}"
    )
    kept = log.read_text()
    assert "starting" in kept and "--- killed after 1 s ---" in kept
    assert not marker.exists()


def test_run_submit_missing_interpreter(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match=r"cannot run submit\.py"):
        run_submit(
            [str(tmp_path / "no-python"), str(STANDIN)],
            cwd=tmp_path,
            timeout=5,
            output_log=tmp_path / "log",
        )
    assert (tmp_path / "log").exists()


# --------------------------------------------------------------------------
# preflight
# --------------------------------------------------------------------------


def test_preflight_aggregated() -> None:
    found = preflight(STANDIN, config_file=AGG_YAML, test_name=AGG_SERVER)
    assert (found.server_name, found.benchmark_mode) == (AGG_SERVER, None)
    assert (found.topology.devices, found.topology.nodes) == (2, 1)


def test_preflight_disaggregated() -> None:
    found = preflight(STANDIN, config_file=DISAGG_YAML, test_name="ignored")
    assert found.benchmark_mode == "e2e"
    assert (found.topology.devices, found.topology.nodes) == (12, 2)
    ctx = preflight(STANDIN, config_file=DISAGG_YAML, benchmark_mode="ctx_only")
    assert (ctx.topology.devices, ctx.topology.nodes) == (4, 1)


def test_preflight_test_list(repo: Path) -> None:
    test = f"perf/test_perf_sanity.py::test_e2e[disagg_upload-gen_only-{DISAGG_STEM}]"
    found = preflight(submit_py_path(repo), test_list=test, config_file="/ignored.yaml")
    assert found.config.path == repo / "tests/scripts/perf-sanity/disaggregated" / DISAGG_YAML.name
    assert found.benchmark_mode == "gen_only" and found.topology.nodes == 2
    agg = f"perf/test_perf_sanity.py::test_e2e[aggr-{AGG_YAML.stem}-gpt_oss_fp4_tp1_mtp0_8k1k]"
    assert preflight(submit_py_path(repo), test_list=agg).topology.devices == 1


def no_gpn(tmp_path: Path) -> Path:
    bad = tmp_path / "no_gpn.yaml"
    bad.write_text(AGG_YAML.read_text().replace("gpus_per_node: 8", "gpus: 8"))
    return bad


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        (
            {"submit_py": "MISSING"},
            r"MISSING not found: the checkout at .* lacks jenkins/scripts/perf/local/submit\.py",
        ),
        ({"config_file": "/nope/c.yaml"}, r"perf_config_yaml: /nope/c\.yaml does not exist"),
        ({"config_file": "NO_GPN"}, r"perf_config_yaml: .*hardware\.gpus_per_node is missing"),
        ({"test_name": None}, r"perf_test_name is required for the aggregated config .*tp1"),
        ({"test_name": "nope"}, r"perf_test_name 'nope' is not a server in gpt_oss"),
        ({"test_list": "perf/test_perf_sanity.py::test_e2e[agg-x-y]"}, r"not a perf-sanity"),
        (
            {"test_list": "perf/test_perf_sanity.py::test_e2e[aggr-missing_cfg-srv]"},
            r"test aggr-missing_cfg-srv needs .*/aggregated/missing_cfg\.yaml, which does not",
        ),
        (
            {"test_list": f"perf/test_perf_sanity.py::test_e2e[aggr-{AGG_YAML.stem}-x]"},
            r"server 'x' of test .* is not in gpt_oss_120b_fp4_blackwell\.yaml",
        ),
        (
            {"test_list": f"perf/test_perf_sanity.py::test_e2e[aggr-{AGG_YAML.stem}]"},
            r"names no server of gpt_oss_120b_fp4_blackwell\.yaml",
        ),
    ],
    ids=[
        "no-submit-py",
        "no-yaml",
        "no-gpus-per-node",
        "no-server",
        "unknown-server",
        "bad-test-id",
        "test-config-missing",
        "test-unknown-server",
        "test-without-server",
    ],
)
def test_preflight_errors(
    tmp_path: Path, repo: Path, kwargs: dict[str, object], pattern: str
) -> None:
    args: dict[str, object] = {
        "submit_py": submit_py_path(repo),
        "config_file": AGG_YAML,
        "test_name": AGG_SERVER,
        **kwargs,
    }
    if args["submit_py"] == "MISSING":
        args["submit_py"] = tmp_path / "empty_checkout" / SUBMIT_PY_RELPATH
        pattern = pattern.replace("MISSING", ".*empty_checkout/" + SUBMIT_PY_RELPATH)
    if args["config_file"] == "NO_GPN":
        args["config_file"] = no_gpn(tmp_path)
    submit_py = args.pop("submit_py")
    with pytest.raises(BuildError, match=pattern) as caught:
        preflight(submit_py, **args)  # type: ignore[arg-type]
    assert "\n" not in str(caught.value)
