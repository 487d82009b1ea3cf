"""The ``scriptbuilder`` CLI: build, dry run, explain, stdin, schema; the entry points."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.build_env import BuildEnv
from tests.test_build_stops import run_cli


def write_request(
    build_env: BuildEnv, tmp_path: Path, workflow: str = "pytest", suffix: str = ".json"
) -> Path:
    req = build_env.request(workflow)
    path = tmp_path / f"request{suffix}"
    path.write_text(json.dumps(req) if suffix == ".json" else yaml.safe_dump(req))
    return path


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_build_writes_script_spec_and_prints_report(
    build_env: BuildEnv, tmp_path: Path, suffix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", "/home/alice")
    code, out, err = run_cli(["build", str(write_request(build_env, tmp_path, suffix=suffix))])
    assert code == 0, err
    script = build_env.work_dir / "qwen3_30b_auto_test.slurm"
    assert out.splitlines()[:2] == [
        f"Generated: {build_env.work_dir}/job_spec.json",
        f"Script: {script}",
    ]
    assert out.splitlines()[-1] == "Devices: 4 GPUs across 1 nodes"
    assert os.access(script, os.X_OK)
    spec = json.loads((build_env.work_dir / "job_spec.json").read_text())
    assert spec["script_path"] == str(script)


def test_dry_run_writes_nothing(build_env: BuildEnv, tmp_path: Path) -> None:
    before = sorted(build_env.work_dir.iterdir())
    code, out, _ = run_cli(["build", "--dry-run", str(write_request(build_env, tmp_path))])
    assert code == 0
    assert sorted(build_env.work_dir.iterdir()) == before
    assert "#SBATCH --job-name=qwen3_30b_auto_test" in out
    assert '"workflow_type": "pytest"' in out


def test_explain_names_the_rule_of_each_value(build_env: BuildEnv, tmp_path: Path) -> None:
    code, out, _ = run_cli(
        ["build", "--dry-run", "--explain", str(write_request(build_env, tmp_path))]
    )
    assert code == 0
    assert "required_devices  4  <- skip_less_device(4) on TestQwen3_30B_A3B" in out
    assert "models mount" in out and "models_path (rule 2)" in out
    assert "mpi_plugin" in out and "slurm_env pmix.preferred" in out


def test_request_on_stdin(build_env: BuildEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO(yaml.safe_dump(build_env.request("custom"))))
    code, out, err = run_cli(["build", "--dry-run", "-"])
    assert code == 0, err
    assert "#SBATCH --job-name=demo_custom" in out


def test_relative_paths_are_read_from_the_request_folder(build_env: BuildEnv) -> None:
    req = build_env.request()
    req["work_dir"] = "work"
    req["repo_root"] = "TensorRT-LLM"
    path = build_env.root / "request.json"
    path.write_text(json.dumps(req))
    code, out, err = run_cli(["build", "--dry-run", str(path)])
    assert code == 0, err
    assert f"#SBATCH --output={build_env.work_dir}/qwen3_30b_auto_test_%j.out" in out


@pytest.mark.parametrize("which", ["request", "slurm-env", "job-spec"])
def test_schema(which: str) -> None:
    code, out, _ = run_cli(["schema", which])
    assert code == 0
    schema = json.loads(out)
    assert schema["type"] == "object"
    if which == "request":
        assert schema["additionalProperties"] is False
        assert {"workflow_type", "work_dir", "env_check", "remote_work_dir"} <= set(
            schema["properties"]
        )


def test_console_scripts_and_module_entry_points(tmp_path: Path) -> None:
    args = [
        "pytest",
        "--model-name",
        "m",
        "--log-dir",
        str(tmp_path),
        "--partition",
        "p",
        "--account",
        "a",
        "--docker-image",
        "i",
        "--container-mounts",
        "/a",
        "--project-path",
        "/p",
        "--test-cmd",
        "pytest -x",
    ]
    outputs = []
    commands = [[sys.executable, "-m", "scriptbuilder.cli.dropin", *args]]
    console = shutil.which("build_slurm_script")
    if console:
        commands.append([console, *args])
    for command in commands:
        proc = subprocess.run(command, capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stderr
        outputs.append(proc.stdout)
    assert all(o == outputs[0] for o in outputs)
    proc = subprocess.run(
        [sys.executable, "-m", "scriptbuilder", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0
    listed = [line.split()[0] for line in proc.stdout.split("Commands:")[1].splitlines() if line]
    assert listed == [
        "build",
        "cancel",
        "release",
        "rerun",
        "results",
        "schema",
        "status",
        "submit",
        "watch",
    ]


def test_env_info_file_supplies_arch_and_models(build_env: BuildEnv, tmp_path: Path) -> None:
    build_env.slurm_env(errors=["SLURM client tools not found"])
    info = tmp_path / "env_info.json"
    info.write_text(
        json.dumps(
            {"partitions": {"gpu": {"arch": "aarch64"}}, "default_models_repo_host": "/info/models"}
        )
    )
    req = build_env.request(models_path=None)
    path = tmp_path / "request.json"
    path.write_text(json.dumps(req))
    code, out, err = run_cli(
        ["build", "--dry-run", "--explain", "--env-info", str(info), str(path)]
    )
    assert code == 0, err
    assert "arch              aarch64  <- internal-env-info" in out
    assert "sbsa-tritondevel" in out
    assert "/info/models:/models" in out


def test_env_info_file_unreadable(build_env: BuildEnv, tmp_path: Path) -> None:
    path = tmp_path / "request.json"
    path.write_text(json.dumps(build_env.request()))
    code, _, err = run_cli(["build", "--env-info", str(tmp_path / "none.json"), str(path)])
    assert code == 2 and "--env-info" in err and len(err.splitlines()) == 1
