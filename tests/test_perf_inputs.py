"""Perf-sanity requests as the orchestrator writes them, and the architecture rule for
partitions whose arch the probe could not read."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from scriptbuilder.api import BuiltJob
from scriptbuilder.errors import BuildError
from tests.build_env import REAL_FILES, BuildEnv
from tests.test_build_stops import run_cli

AGGR = REAL_FILES / "gpt_oss_120b_fp4_blackwell.yaml"
DISAGG = REAL_FILES / "b200_deepseek-r1-fp4_1k1k_con1_ctx1_dep4_gen1_tep8_eplb0_mtp3_ccb-UCX.yaml"
SERVER = "gpt_oss_fp4_tp2_mtp0_1k1k"
PERF_FILE = "tests/integration/defs/perf/test_perf_sanity.py"
AGGR_DONE = "Aggregated test completed successfully"
DISAGG_DONE = "Disagg server and benchmark completed successfully"


@pytest.fixture
def perf_env(build_env: BuildEnv) -> BuildEnv:
    """The checkout with both configs where a perf-sanity test id finds them."""
    base = build_env.repo / "tests" / "scripts" / "perf-sanity"
    for kind, config in (("aggregated", AGGR), ("disaggregated", DISAGG)):
        (base / kind).mkdir(parents=True)
        shutil.copy(config, base / kind / config.name)
    return build_env


def argv_of(job: BuiltJob) -> list[str]:
    assert job.submit is not None
    return list(job.submit.argv)


def value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def spec(job: BuiltJob) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(job.job_spec_json)
    return data


# ------------------------------------------------------------------ the test id apart from its file

SEPARATE = [
    (f"aggr-{AGGR.stem}-{SERVER}", 2, 1, AGGR_DONE),
    (f"disagg-e2e-{DISAGG.stem}", 12, 2, DISAGG_DONE),
    (f"disagg-gen_only-{DISAGG.stem}", 12, 2, DISAGG_DONE),
    (f"aggr-ctx_only-{DISAGG.stem}", 4, 1, AGGR_DONE),
]


@pytest.mark.parametrize(
    ("case", "devices", "nodes", "success"), SEPARATE, ids=[s[0][:16] for s in SEPARATE]
)
def test_test_id_as_a_separate_word(
    perf_env: BuildEnv, case: str, devices: int, nodes: int, success: str
) -> None:
    test_cmd = f'pytest {PERF_FILE} -v "test_e2e[{case}]"'
    job = perf_env.build(perf_env.request("pytest", test_cmd=test_cmd, model_name="m"))
    argv = argv_of(job)
    assert value(argv, "--test-list") == f"{PERF_FILE}::test_e2e[{case}]"
    assert "--config-file" not in argv and "--mpi-type" not in argv
    data = spec(job)
    assert (data["required_devices"], data["node_count"]) == (devices, nodes)
    assert data["success_patterns"] == [success]
    job.write()  # the submit.py stand-in reads the test id as the real one does
    launch = (perf_env.work_dir / "slurm_launch.sh").read_text()
    assert f'echo "{success}"' in launch
    listed = (perf_env.work_dir / "test_list.txt").read_text()
    assert f"test_e2e[{case.replace('_upload', '')}]" in listed


def test_separate_word_with_upload_prefix_and_explain(perf_env: BuildEnv, tmp_path: Path) -> None:
    case = f"aggr_upload-{AGGR.stem}-{SERVER}"
    req = perf_env.request("pytest", test_cmd=f"pytest -v {PERF_FILE} 'test_e2e[{case}]'")
    req["model_name"] = "m"
    path = tmp_path / "request.json"
    path.write_text(json.dumps(req))
    code, out, err = run_cli(["build", "--dry-run", "--explain", str(path)])
    assert code == 0, err
    assert f"{PERF_FILE}::test_e2e[{case}]  <- test_e2e[{case}] given after the file" in out


def test_full_id_is_unchanged(perf_env: BuildEnv) -> None:
    test_id = f"perf/test_perf_sanity.py::test_e2e[aggr-{AGGR.stem}-{SERVER}]"
    job = perf_env.build(perf_env.request("pytest", test_cmd=f"pytest '{test_id}'"))
    assert value(argv_of(job), "--test-list") == test_id


def test_file_without_any_test_id_stops(perf_env: BuildEnv) -> None:
    req = perf_env.request("pytest", test_cmd=f"pytest -v {PERF_FILE}", model_name="m")
    with pytest.raises(BuildError, match="is not a perf-sanity test id"):
        perf_env.build(req)


# ------------------------------------------------------------------ perf_benchmark_mode


@pytest.mark.parametrize(
    ("mode", "devices", "nodes", "success"),
    [
        ("e2e", 12, 2, DISAGG_DONE),
        ("gen_only", 12, 2, DISAGG_DONE),
        ("ctx_only", 4, 1, AGGR_DONE),
    ],
)
def test_benchmark_mode_is_passed(
    perf_env: BuildEnv, mode: str, devices: int, nodes: int, success: str
) -> None:
    req = perf_env.request(
        "benchmark", perf_config_yaml=str(DISAGG), perf_benchmark_mode=mode, model_name="m"
    )
    job = perf_env.build(req)
    argv = argv_of(job)
    assert value(argv, "--benchmark-mode") == mode
    assert "--mpi-type" not in argv
    data = spec(job)
    assert (data["required_devices"], data["node_count"]) == (devices, nodes)
    assert data["success_patterns"] == [success]
    job.write()
    assert f'echo "{success}"' in (perf_env.work_dir / "slurm_launch.sh").read_text()


def test_benchmark_mode_default_is_left_to_submit_py(perf_env: BuildEnv) -> None:
    req = perf_env.request("benchmark", perf_config_yaml=str(DISAGG), model_name="m")
    assert "--benchmark-mode" not in argv_of(perf_env.build(req))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {
                "workflow_type": "benchmark",
                "perf_config_yaml": str(AGGR),
                "perf_test_name": SERVER,
                "perf_benchmark_mode": "gen_only",
            },
            "perf_benchmark_mode 'gen_only' applies to disaggregated configs, and "
            f"{AGGR.name} is aggregated; drop perf_benchmark_mode",
        ),
        (
            {
                "test_cmd": f'pytest {PERF_FILE} "test_e2e[disagg-e2e-{DISAGG.stem}]"',
                "perf_benchmark_mode": "gen_only",
            },
            "perf_benchmark_mode 'gen_only' disagrees with test id",
        ),
        ({"perf_benchmark_mode": "both"}, "'perf_benchmark_mode'"),
    ],
    ids=["aggregated-config", "test-id-disagrees", "unknown-mode"],
)
def test_benchmark_mode_stops(
    perf_env: BuildEnv, tmp_path: Path, changes: dict[str, Any], message: str
) -> None:
    req = perf_env.request(changes.pop("workflow_type", "pytest"), model_name="m", **changes)
    path = tmp_path / "request.json"
    path.write_text(json.dumps(req))
    code, out, err = run_cli(["build", str(path)])
    assert (code, out) == (2, ""), err
    assert len(err.splitlines()) == 1 and message in err, err
    assert sorted(p.name for p in perf_env.work_dir.iterdir()) == ["slurm_env.json"]


def test_benchmark_mode_agreeing_with_test_id(perf_env: BuildEnv) -> None:
    test_cmd = f'pytest {PERF_FILE} "test_e2e[disagg-gen_only-{DISAGG.stem}]"'
    req = perf_env.request("pytest", test_cmd=test_cmd, perf_benchmark_mode="gen_only")
    argv = argv_of(perf_env.build(req))
    assert "--benchmark-mode" not in argv  # the test id names it for submit.py


# ------------------------------------------------------------------ architecture


SBSA = "sbsa-tritondevel"
X86 = "x86_64-tritondevel"


class EnvInfo:
    def __init__(self, arch: str | None) -> None:
        self._arch = arch

    def arch(self, partition: str | None) -> str | None:
        return self._arch

    def default_models_repo_host(self) -> str | None:
        return None


@pytest.mark.parametrize(
    ("scenario", "device", "env_info", "machine", "image", "rule"),
    [
        ("remote_slurm", "GB200", None, "x86_64", SBSA, "device_type GB200"),
        ("remote_slurm", "gh200", None, "x86_64", SBSA, "device_type gh200"),
        ("local_slurm", "GB300", None, "x86_64", SBSA, "device_type GB300"),
        # before internal-env-info and uname
        ("local_slurm", "GB200", EnvInfo("x86_64"), "x86_64", SBSA, "device_type GB200"),
        ("remote_slurm", "B200", None, "aarch64", X86, "device_type B200"),
        ("remote_slurm", "H100", EnvInfo("aarch64"), "x86_64", SBSA, "internal-env-info"),
        ("local_slurm", "B200", None, "aarch64", SBSA, "uname -m"),
    ],
)
def test_arch_from_device_type(
    build_env: BuildEnv,
    scenario: str,
    device: str,
    env_info: EnvInfo | None,
    machine: str,
    image: str,
    rule: str,
) -> None:
    req = build_env.request(execution_scenario=scenario, partition="unprobed", device_type=device)
    req["test_cmd"] = "pytest -v tests/unittest/_torch/test_moe.py"
    job = build_env.build(req, env_info=env_info, machine=lambda: machine)
    assert image in spec(job)["docker_image"]
    arch_rule = next(c.rule for c in job.trace.choices if c.field == "arch")
    assert rule in arch_rule
    assert job.warnings == ()


def test_arch_from_device_type_when_client_tools_are_missing(build_env: BuildEnv) -> None:
    build_env.slurm_env(errors=["SLURM client tools not found"])
    req = build_env.request(execution_scenario="remote_slurm", device_type="GB200")
    assert SBSA in spec(build_env.build(req))["docker_image"]


def test_partition_arch_wins_over_device_type(build_env: BuildEnv) -> None:
    req = build_env.request(partition="gpu", device_type="GB200")
    assert X86 in spec(build_env.build(req))["docker_image"]


def test_remote_x86_default_with_nothing_to_go_on_warns(build_env: BuildEnv) -> None:
    req = build_env.request(execution_scenario="remote_slurm", partition="unprobed")
    req["test_cmd"] = "pytest -v tests/unittest/_torch/test_moe.py"
    job = build_env.build(req)
    assert X86 in spec(job)["docker_image"]
    assert len(job.warnings) == 1
    assert "architecture of partition unprobed is unknown" in job.warnings[0]
    assert "pass device_type or container_image" in job.warnings[0]
    assert f"Warning: {job.warnings[0]}" in job.report
    assert spec(job)["warnings"] == list(job.warnings)


def test_no_arch_warning_when_the_image_is_given(build_env: BuildEnv) -> None:
    req = build_env.request(
        execution_scenario="remote_slurm", partition="unprobed", container_image="nvcr.io#x/y:1"
    )
    req["test_cmd"] = "pytest -v tests/unittest/_torch/test_moe.py"
    assert build_env.build(req).warnings == ()
