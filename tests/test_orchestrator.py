"""Requests shaped exactly as the orchestrator sends them, with its probe's
slurm_env.json and its earlier job_spec.json, build; the written job_spec.json
holds every field each executor reads (contract.md), with absolute paths, and
every key the orchestrator wrote."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from scriptbuilder.errors import BuildError
from scriptbuilder.inputs import remote_home
from tests.build_env import BuildEnv
from tests.orchestrator_env import (
    FIXTURES,
    REMOTE_HOME,
    SCENARIOS,
    WORKLOADS,
    fake_ssh,
    fixture,
    orchestrator_request,
)
from tests.test_build_stops import run_cli, snapshot_tree

EVERY_EXECUTOR = ("work_dir", "model_name", "workflow_type", "success_patterns", "failure_patterns")
#: What each executor reads from job_spec.json (contract.md), besides EVERY_EXECUTOR.
EXECUTOR_READS: dict[str, tuple[str, ...]] = {
    "local_slurm": (
        "scenario",
        "script_path",
        "log_file_pattern",
        "persistent_mode",
        "docker_image",
        "container_name",
        "container_mounts",
        "repo_root",
        "slurm_params.partition",
        "slurm_params.account",
        "slurm_params.nodes",
        "slurm_params.ntasks",
        "slurm_params.ntasks_per_node",
        "slurm_params.gpus_per_node",
        "slurm_params.time_limit",
        "slurm_params.mpi_plugin",
        "slurm_env.partitions",
        "build_project",
        "device_type",
    ),
    "remote_slurm": (
        "scenario",
        "script_path",
        "script_name",
        "log_file_pattern",
        "remote_work_dir",
        "remote_repo_path",
        "extra_files",
        "container_image",
        "node_count",
        "required_devices_per_node",
        "total_required_devices",
        "job_name",
        "device_type",
        "build_project",
        "ssh_host",
        "slurm_user",
        "repo_url",
        "repo_branch",
    ),
    "local_docker": (
        "scenario",
        "docker_cmd",
        "log_file",
        "repo_root",
        "container_image",
        "build_project",
        "gpu_type",
    ),
}
PATH_FIELDS = (
    "work_dir",
    "repo_root",
    "script_path",
    "remote_work_dir",
    "remote_repo_path",
    "log_file",
)
PATTERNS = {
    "pytest": (["passed"], ["FAILED", "ERROR"]),
    "eval": (["accuracy:", "score:"], ["FAILED", "ERROR"]),
    "bench": (["token/s", "throughput"], ["FAILED", "ERROR"]),
    "custom": ([], ["Error", "Traceback"]),
}
CASES = [(s, w) for s in SCENARIOS for w in WORKLOADS]


def _get(doc: dict[str, Any], dotted: str) -> Any:
    value: Any = doc
    for part in dotted.split("."):
        assert isinstance(value, dict) and part in value, f"job_spec.json has no {dotted}"
        value = value[part]
    return value


def _build_and_write(env: BuildEnv, request: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    calls: list[list[str]] = []
    job = env.build(request, ssh=fake_ssh(calls), **kwargs)
    job.write()
    return json.loads((env.work_dir / "job_spec.json").read_text())


@pytest.mark.parametrize(("scenario", "workflow"), CASES, ids=[f"{s}-{w}" for s, w in CASES])
def test_orchestrator_request_builds_with_every_executor_field(
    build_env: BuildEnv, scenario: str, workflow: str
) -> None:
    request = orchestrator_request(build_env, scenario, workflow)
    earlier = json.loads((build_env.work_dir / "job_spec.json").read_text())
    spec = _build_and_write(build_env, request)
    for field in (*EVERY_EXECUTOR, *EXECUTOR_READS[scenario]):
        _get(spec, field)
    assert spec["scenario"] == spec["execution_scenario"] == scenario
    for field in PATH_FIELDS:
        if field in spec:
            assert spec[field].startswith("/"), (field, spec[field])
    assert all(path.startswith("/") for path in spec["extra_files"])
    assert spec["work_dir"] == str(build_env.work_dir)
    assert spec["container_image"] == request["container_image"]
    pyxis = request["container_image"].replace("urm.nvidia.com/", "urm.nvidia.com#", 1)
    assert spec["docker_image"] == (
        request["container_image"] if scenario == "local_docker" else pyxis
    )
    devices = WORKLOADS[workflow]["devices"]
    assert (spec["total_required_devices"], spec["required_devices_per_node"]) == (devices, devices)
    assert spec["node_count"] == 1
    assert (spec["success_patterns"], spec["failure_patterns"]) == PATTERNS[workflow]
    for key, value in earlier.items():
        assert spec[key] == value, key
    for key in ("build_project", "skip_install", "monitor_timeout", "device_type", "user_name"):
        assert spec[key] == request[key], key
    if scenario != "local_docker":
        assert all("arch" in p for p in spec["slurm_env"]["partitions"])
        # arch is null in the probe: the procedure's fallback path, bare pmix.
        assert spec["slurm_params"]["mpi_plugin"] == "pmix"
    if scenario == "remote_slurm":
        assert spec["remote_repo_path"] == earlier["remote_repo_path"]
        assert (spec["ssh_host"], spec["slurm_user"]) == ("login.example", "asmith")
        assert spec["job_name"].startswith("qwen3_30b_")
    text = (build_env.work_dir / "job_spec.json").read_text()
    assert "never-written" not in text
    assert "slurm_password" not in text


def test_remote_home_is_asked_with_ssh(build_env: BuildEnv) -> None:
    request = orchestrator_request(build_env, "remote_slurm", "pytest")
    calls: list[list[str]] = []
    job = build_env.build(request, ssh=fake_ssh(calls))
    assert calls == [
        [
            "ssh",
            "-l",
            "asmith",
            "-o",
            "BatchMode=yes",
            "-o",
            "ConnectTimeout=10",
            "login.example",
            "echo $HOME",
        ]
    ]
    assert f"{REMOTE_HOME}:{REMOTE_HOME}" in job.script_text
    assert any("ssh login.example 'echo $HOME'" in line for line in job.explanation)


def test_remote_cwd_in_the_request_wins_over_ssh(build_env: BuildEnv) -> None:
    request = orchestrator_request(build_env, "remote_slurm", "pytest")
    request["remote_cwd"] = "/home/other/work"
    calls: list[list[str]] = []
    job = build_env.build(request, ssh=fake_ssh(calls))
    assert calls == []
    assert "/home/other:/home/other" in job.script_text
    assert job.job_spec_data["remote_cwd"] == "/home/other/work"


def test_remote_home_without_ssh_host_stops(build_env: BuildEnv) -> None:
    request = orchestrator_request(build_env, "remote_slurm", "pytest")
    del request["ssh_host"]
    env = json.loads((build_env.work_dir / "slurm_env.json").read_text())
    env["ssh_host"] = None
    (build_env.work_dir / "slurm_env.json").write_text(json.dumps(env))
    with pytest.raises(BuildError, match="no ssh_host is known"):
        build_env.build(request)


def _fake_ssh_on_path(tmp_path: Path, body: str, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    ssh = bin_dir / "ssh"
    ssh.write_text(f"#!/bin/sh\n{body}\n")
    ssh.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")


def test_real_runner_reads_home_and_bounds_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_ssh_on_path(tmp_path, 'test "$1" = -l && test "$2" = bob && echo /home/bob', monkeypatch)
    assert remote_home.remote_home("h", "bob") == "/home/bob"
    with pytest.raises(BuildError, match=r"failed \(exit code 1\); set remote_cwd"):
        remote_home.remote_home("h", "carol")
    _fake_ssh_on_path(tmp_path / "slow", "exec sleep 30", monkeypatch)
    with pytest.raises(BuildError, match=r"did not answer within 0\.3 s"):
        remote_home.run_ssh(remote_home.ssh_argv("h", None), 0.3)
    _fake_ssh_on_path(tmp_path / "odd", "echo relative/home", monkeypatch)
    with pytest.raises(BuildError, match="not an absolute path"):
        remote_home.remote_home("h", None)


def test_the_request_wins_over_the_earlier_job_spec(build_env: BuildEnv) -> None:
    request = orchestrator_request(build_env, "remote_slurm", "pytest")
    request["remote_repo_path"] = "/lustre/fsw/asmith/other"
    request["remote_work_dir"] = "/lustre/fsw/asmith/other/work_dirs/work"
    job = build_env.build(request, ssh=fake_ssh([]))
    assert job.job_spec_data["remote_repo_path"] == "/lustre/fsw/asmith/other"
    assert "--container-workdir=/lustre/fsw/asmith/other" in job.script_text
    lines = [line for line in job.explanation if line.startswith("remote_repo_path")]
    assert lines and "input (wins over job_spec.json" in lines[0]


def test_remote_paths_come_from_the_earlier_job_spec(build_env: BuildEnv) -> None:
    request = orchestrator_request(build_env, "remote_slurm", "pytest")
    job = build_env.build(request, ssh=fake_ssh([]))
    assert job.request.remote_repo_path == "/lustre/fsw/asmith/TensorRT-LLM"
    assert "--container-workdir=/lustre/fsw/asmith/TensorRT-LLM" in job.script_text
    lines = [line for line in job.explanation if line.startswith("remote_work_dir")]
    assert lines and lines[0].endswith("<- <work_dir>/job_spec.json")


def test_stale_owned_keys_are_dropped_unknown_keys_kept(build_env: BuildEnv) -> None:
    request = orchestrator_request(build_env, "local_slurm", "pytest")
    earlier = {"persistent_mode": True, "container_name": "old", "docker_cmd": "x", "mine": [1]}
    (build_env.work_dir / "job_spec.json").write_text(json.dumps(earlier))
    spec = _build_and_write(build_env, {**request, "persistent_mode": False})
    assert "persistent_mode" not in spec and "container_name" not in spec
    assert "docker_cmd" not in spec
    assert list(spec)[-1] == "mine" and spec["mine"] == [1]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "is not valid JSON"),
        ("[1]", "must hold a JSON object"),
        ('{"remote_repo_path": 5}', "field 'remote_repo_path': expected a string, got 5"),
        ('{"remote_work_dir": "/a\\nb"}', "field 'remote_work_dir': holds a newline"),
    ],
)
def test_malformed_earlier_job_spec_stops_and_is_kept(
    build_env: BuildEnv, tmp_path: Path, content: str, message: str
) -> None:
    request = orchestrator_request(build_env, "remote_slurm", "pytest")
    (build_env.work_dir / "job_spec.json").write_text(content)
    before = snapshot_tree(build_env.work_dir)
    path = tmp_path / "request.json"
    path.write_text(json.dumps(request))
    code, out, err = run_cli(["build", str(path)])
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and message in err and "job_spec.json" in err
    assert snapshot_tree(build_env.work_dir) == before


@pytest.mark.parametrize(
    ("field", "value", "derived"),
    [("total_required_devices", 8, 2), ("required_devices_per_node", 1, 2), ("node_count", 2, 1)],
)
def test_the_callers_counts_must_match(
    build_env: BuildEnv, tmp_path: Path, field: str, value: int, derived: int
) -> None:
    request = orchestrator_request(build_env, "local_slurm", "custom")
    request[field] = value
    path = tmp_path / "request.json"
    path.write_text(json.dumps(request))
    before = snapshot_tree(build_env.work_dir)
    code, _, err = run_cli(["build", str(path)])
    assert code == 2 and len(err.splitlines()) == 1
    assert f"{field} = {value} from the request, but this build needs {derived}" in err
    assert snapshot_tree(build_env.work_dir) == before


def test_custom_counts_across_two_nodes_are_checked(build_env: BuildEnv) -> None:
    request = orchestrator_request(build_env, "local_slurm", "custom")
    request.update(required_devices=4, total_required_devices=4, required_devices_per_node=4)
    assert build_env.build(request).job_spec_data["required_devices_per_node"] == 4


def test_a_misspelt_orchestrator_field_is_still_refused(
    build_env: BuildEnv, tmp_path: Path
) -> None:
    request = orchestrator_request(build_env, "local_slurm", "pytest")
    request["monitor_timout"] = request.pop("monitor_timeout")
    path = tmp_path / "request.json"
    path.write_text(json.dumps(request))
    before = snapshot_tree(build_env.work_dir)
    code, _, err = run_cli(["build", str(path)])
    assert code == 2
    assert "'monitor_timout' is unknown; did you mean 'monitor_timeout'?" in err
    assert snapshot_tree(build_env.work_dir) == before


def test_job_name_names_the_slurm_job_and_logs_keep_the_model_name(build_env: BuildEnv) -> None:
    request = orchestrator_request(build_env, "remote_slurm", "pytest")
    job = build_env.build(request, ssh=fake_ssh([]))
    spec = job.job_spec_data
    assert spec["job_name"] == "qwen3_30b_remote"
    assert "#SBATCH --job-name=qwen3_30b_remote\n" in job.script_text
    assert spec["log_file_pattern"] == "qwen3_30b_auto_test_%j.out"
    assert "/qwen3_30b_auto_test_%j.out\n" in job.script_text
    assert "--container-name=qwen3_30b_auto_test " in job.script_text
    assert not any("job_name" in w for w in job.warnings)
    assert ("job_name", "qwen3_30b_remote", "job_name input") in job.trace.choices


def test_password_is_never_shown(build_env: BuildEnv) -> None:
    request = orchestrator_request(build_env, "remote_slurm", "custom")
    job = build_env.build(request, ssh=fake_ssh([]))
    shown = [job.job_spec_json, job.script_text, job.report, repr(job.request), *job.explanation]
    shown += [f.text for f in job.files]
    assert not any("never-written" in text for text in shown)
    assert "never-written" not in json.dumps(job.request.model_dump(mode="json"))


def test_all_null_probe_fields_build(build_env: BuildEnv) -> None:
    """mounts null, no accounts/pmix/errors, null requires_gres: nothing is an error."""
    env = json.loads((FIXTURES / "slurm_env_probe.json").read_text())
    for key in ("accounts", "pmix", "errors", "mounts"):
        env[key] = None
    env["partitions"][0]["requires_gres"] = None
    request = orchestrator_request(build_env, "local_slurm", "pytest")
    (build_env.work_dir / "slurm_env.json").write_text(json.dumps(env))
    job = build_env.build(request)
    assert job.job_spec_data["slurm_params"]["mpi_plugin"] == "pmix"
    del request["checkpoint_path"]
    with pytest.raises(BuildError, match="models mount: none of"):
        build_env.build(request)


@pytest.mark.parametrize("workflow", ["pytest", "custom"])
def test_probe_without_slurm_tools(build_env: BuildEnv, tmp_path: Path, workflow: str) -> None:
    """Nothing is known about the partition: pytest builds from its markers (no --gres
    line), custom cannot tell its node count and stops in one line."""
    request = orchestrator_request(build_env, "local_slurm", workflow)
    (build_env.work_dir / "slurm_env.json").write_text(
        (FIXTURES / "slurm_env_no_tools.json").read_text()
    )
    path = tmp_path / "request.json"
    path.write_text(json.dumps(request))
    code, _, err = run_cli(["build", str(path)])
    if workflow == "pytest":
        assert code == 0, err
        spec = json.loads((build_env.work_dir / "job_spec.json").read_text())
        assert spec["slurm_params"]["gres"] is None and spec["slurm_params"]["mpi_plugin"] == "pmix"
    else:
        assert code == 2 and len(err.splitlines()) == 1, err
        assert "gpus_per_node is unknown" in err


def test_unprobed_partition_is_a_one_line_stop(build_env: BuildEnv) -> None:
    request = orchestrator_request(build_env, "local_slurm", "custom")
    request["partition"] = "debug"
    with pytest.raises(BuildError, match="gpus_per_node is unknown"):
        build_env.build(request)


def test_fixture_placeholders_are_all_filled(build_env: BuildEnv) -> None:
    for path in FIXTURES.glob("*.json"):
        text = json.dumps(fixture(path.name, build_env, **{"@WORKFLOW@": "pytest"}))
        assert "@" not in text.replace("@users", ""), path.name
