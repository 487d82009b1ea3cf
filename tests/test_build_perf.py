"""The perf-sanity path (Category 4) and the eval multi-node fallback, through the
stand-in submit.py in tests/data/trtllm_repo."""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
from pathlib import Path

import pytest
import yaml
from syrupy.assertion import SnapshotAssertion

from scriptbuilder.errors import BuildError
from scriptbuilder.workflows.perf_sanity import SUBMIT_PY_RELPATH
from tests.build_env import REAL_FILES, BuildEnv

AGGR = REAL_FILES / "gpt_oss_120b_fp4_blackwell.yaml"
DISAGG = REAL_FILES / "b200_deepseek-r1-fp4_1k1k_con1_ctx1_dep4_gen1_tep8_eplb0_mtp3_ccb-UCX.yaml"
SERVER = "gpt_oss_fp4_tp2_mtp0_1k1k"


def argv_after_python(build_env: BuildEnv, argv: tuple[str, ...]) -> list[str]:
    return [build_env.scrub(a) for a in argv[1:]]


@pytest.mark.parametrize(
    ("config", "test_name", "devices", "nodes", "success"),
    [
        (AGGR, SERVER, 2, 1, "Aggregated test completed successfully"),
        (DISAGG, None, 12, 2, "Disagg server and benchmark completed successfully"),
    ],
    ids=["aggregated", "disaggregated"],
)
def test_config_file_runs_submit_py(
    build_env: BuildEnv,
    json_snapshot: SnapshotAssertion,
    config: Path,
    test_name: str | None,
    devices: int,
    nodes: int,
    success: str,
) -> None:
    local = build_env.root / config.name
    shutil.copy(config, local)
    req = build_env.request(
        "benchmark", perf_config_yaml=str(local), perf_test_name=test_name, model_name="demo"
    )
    job = build_env.build(req)
    assert job.submit is not None
    argv = argv_after_python(build_env, job.submit.argv)
    assert json.dumps(argv, indent=2) + "\n" == json_snapshot(name="submit_argv")
    data = json.loads(job.job_spec_json)
    assert (data["required_devices"], data["node_count"]) == (devices, nodes)
    assert data["slurm_params"]["nodes"] == nodes
    assert data["slurm_params"]["ntasks_per_node"] == 8
    assert data["script_name"] == "slurm_launch.sh"
    assert data["log_file_pattern"] == "slurm-%j.out"
    assert data["success_patterns"] == [success]
    # submit.py picks --mpi per step; the job spec still carries the cluster's plugin
    assert "--mpi-type" not in argv and "--benchmark-mode" not in argv
    assert data["slurm_params"]["mpi_plugin"] == "pmix_v5"
    assert argv[argv.index("--job-name") + 1] == "demo_benchmark"
    assert not (build_env.work_dir / "slurm_launch.sh").exists()  # pure until write()
    job.write()
    launch = build_env.work_dir / "slurm_launch.sh"
    assert launch.is_file()
    assert f'echo "{success}"' in launch.read_text()  # what the launch script prints last
    assert (build_env.work_dir / "submit_py.log").is_file()
    assert build_env.scrub(job.job_spec_json) == json_snapshot(name="job_spec")
    # as built, with the sha256 of the launch script submit.py wrote
    written = json.loads((build_env.work_dir / "job_spec.json").read_text())
    assert written.pop("script_sha256") == hashlib.sha256(launch.read_bytes()).hexdigest()
    assert written == json.loads(job.job_spec_json)


def test_perf_sanity_test_id_uses_test_list(build_env: BuildEnv) -> None:
    target = build_env.repo / "tests" / "scripts" / "perf-sanity" / "aggregated"
    target.mkdir(parents=True)
    shutil.copy(AGGR, target / AGGR.name)
    test_id = f"perf/test_perf_sanity.py::test_e2e[aggr-{AGGR.stem}-{SERVER}]"
    req = build_env.request("pytest", test_cmd=f"pytest '{test_id}'", model_name="gpt")
    job = build_env.build(req)
    assert job.submit is not None
    argv = list(job.submit.argv)
    assert argv[argv.index("--test-list") + 1] == test_id
    assert "--config-file" not in argv
    assert argv[argv.index("--job-name") + 1] == "gpt_perf"
    job.write()
    assert json.loads(job.job_spec_json)["workflow_type"] == "pytest"


def remote_request(build_env: BuildEnv) -> dict[str, str]:
    return build_env.request(
        "perf_sanity",
        execution_scenario="remote_slurm",
        perf_config_yaml=str(AGGR),
        perf_test_name=SERVER,
        model_name="m",
    )


def test_remote_runs_the_clusters_submit_py_in_remote_work_dir(build_env: BuildEnv) -> None:
    """remote_slurm: submit.py is the cluster's, runs in remote_work_dir on the login node
    with the config sent there; job_spec.json names the launch script's local copy."""
    job = build_env.build(remote_request(build_env))
    run = job.submit
    assert run is not None and run.login is not None
    remote = "/lustre/alice/TensorRT-LLM/work_dirs/work"
    assert (run.login.host, run.login.user) == ("login", "alice")
    assert str(run.cwd) == remote and run.login.launch_sh == f"{remote}/slurm_launch.sh"
    argv = list(run.argv)
    assert argv[:2] == ["python3", "/lustre/alice/TensorRT-LLM/" + SUBMIT_PY_RELPATH]
    assert argv[argv.index("--work-dir") + 1] == remote
    assert argv[argv.index("--llm-src") + 1] == "/lustre/alice/TensorRT-LLM"
    assert argv[argv.index("--launch-sh") + 1] == f"{remote}/slurm_launch.sh"
    assert argv[argv.index("--config-file") + 1] == f"{remote}/{AGGR.name}"
    assert [(i.path, i.text) for i in run.inputs] == [(f"{remote}/{AGGR.name}", AGGR.read_text())]
    spec = json.loads(job.job_spec_json)
    assert spec["script_path"] == str(build_env.work_dir / "slurm_launch.sh")
    assert spec["extra_files"] == []
    explained = "\n".join(job.explanation)
    assert f"ssh alice@login, in remote_work_dir {remote}" in explained
    assert f"{remote}/slurm_launch.sh -> {build_env.work_dir}/slurm_launch.sh" in explained
    assert run.display().startswith(f"ssh alice@login (in {remote}): python3 ")


def test_remote_perf_sanity_needs_a_login_host(build_env: BuildEnv) -> None:
    build_env.slurm_env(ssh_host=None)
    with pytest.raises(BuildError, match=r"^ssh_host is required .*login node; pass ssh_host"):
        build_env.build(remote_request(build_env))


def test_failing_submit_py_stops_with_its_error_line(
    build_env: BuildEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUBMIT_STANDIN_FAIL", "1")
    req = build_env.request(
        "benchmark", perf_config_yaml=str(AGGR), perf_test_name=SERVER, model_name="m"
    )
    job = build_env.build(req)
    with pytest.raises(BuildError) as err:
        job.write()
    message = str(err.value)
    assert "RuntimeError: submit.py stand-in: failure requested" in message
    assert "\n" not in message
    assert (build_env.work_dir / "submit_py.log").is_file()
    assert not (build_env.work_dir / "job_spec.json").exists()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"perf_test_name": "no_such_server"}, "no_such_server"),
        ({"perf_config_yaml": "/no/such.yaml"}, "/no/such.yaml"),
        ({"perf_config_yaml": None}, "perf_config_yaml is required"),
    ],
)
def test_perf_preflight_stops(
    build_env: BuildEnv, changes: dict[str, str | None], message: str
) -> None:
    fields: dict[str, str | None] = {
        "perf_config_yaml": str(AGGR),
        "perf_test_name": SERVER,
        "model_name": "m",
        **changes,
    }
    req = build_env.request("benchmark", **fields)
    with pytest.raises(BuildError, match=message.replace(".", r"\.")):
        build_env.build(req)


def test_missing_submit_py_stops(build_env: BuildEnv) -> None:
    (build_env.repo / "jenkins" / "scripts" / "perf" / "local" / "submit.py").unlink()
    req = build_env.request(
        "benchmark", perf_config_yaml=str(AGGR), perf_test_name=SERVER, model_name="m"
    )
    with pytest.raises(BuildError, match=r"submit\.py"):
        build_env.build(req)


def test_eval_multi_node_falls_back_to_accuracy_benchmark(build_env: BuildEnv) -> None:
    req = build_env.request(
        "eval",
        eval_cmd="trtllm-eval --model /m/Big-Model --tp_size 16 mmlu",
        perf_config_yaml=str(AGGR),
        perf_test_name=SERVER,
    )
    job = build_env.build(req)
    assert job.submit is not None
    assert any("accuracy benchmark" in w for w in job.warnings)
    argv = list(job.submit.argv)
    derived = Path(argv[argv.index("--config-file") + 1])
    assert derived == build_env.work_dir / "big_model_accuracy.yaml"
    assert not derived.exists()
    job.write()
    data = yaml.safe_load(derived.read_text())
    assert data["accuracy"]["enable_accuracy_test"] is True
    assert data["server_configs"] == yaml.safe_load(AGGR.read_text())["server_configs"]
    assert json.loads(job.job_spec_json)["workflow_type"] == "eval"


def test_remote_eval_fallback_sends_the_derived_config(build_env: BuildEnv) -> None:
    req = build_env.request(
        "eval",
        execution_scenario="remote_slurm",
        eval_cmd="trtllm-eval --model /m/Big-Model --tp_size 16 mmlu",
        perf_config_yaml=str(AGGR),
        perf_test_name=SERVER,
    )
    run = build_env.build(req).submit
    assert run is not None and run.login is not None
    remote = "/lustre/alice/TensorRT-LLM/work_dirs/work/big_model_accuracy.yaml"
    argv = list(run.argv)
    assert argv[argv.index("--config-file") + 1] == remote
    ((path, text),) = [(i.path, i.text) for i in run.inputs]
    assert path == remote
    assert yaml.safe_load(text)["accuracy"]["enable_accuracy_test"] is True


def test_eval_fallback_without_base_config_stops(build_env: BuildEnv) -> None:
    req = build_env.request("eval", eval_cmd="trtllm-eval --model /m/x --tp_size 16 mmlu")
    with pytest.raises(BuildError, match="perf_config_yaml is required: eval world size"):
        build_env.build(req)


def test_remote_perf_sanity_with_an_unreachable_login_node(build_env: BuildEnv) -> None:
    """ssh's own failure stops the build with its one line; nothing is written."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    build_env.slurm_env(ssh_host="127.0.0.1")
    job = build_env.build(remote_request(build_env), ssh_options=[f"Port={port}"])
    with pytest.raises(BuildError) as err:
        job.write()
    assert str(err.value).startswith("ssh alice@127.0.0.1: ") and "Connection refused" in str(
        err.value
    )
    assert "\n" not in str(err.value)
    assert not (build_env.work_dir / "job_spec.json").exists()
