"""local_docker through the docker stand-in (tests/fake_bin/docker): submit runs
docker_cmd.sh detached with its own log and keeps the container's exit status;
cancel (and a hang) stops that container by its own name, no other of the image."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.build_env import BuildEnv
from tests.lifecycle_cli import Done, scriptbuilder
from tests.script_runner import FAKE_BIN


@pytest.fixture
def docker_env(build_env: BuildEnv, tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PATH": f"{FAKE_BIN}{os.pathsep}{os.environ['PATH']}",
        "FAKE_DOCKER_STATE": str(tmp_path / "docker-state"),
        "STANDIN_STOP_TIMEOUT": "2",
    }


def sb(*args: str, env: dict[str, str]) -> Done:
    return scriptbuilder(*args, env=env)


def docker_job(build_env: BuildEnv, command: str) -> Path:
    request = build_env.request(
        "custom",
        execution_scenario="local_docker",
        custom_cmd=command,
        custom_env="HF_TOKEN=s3cr3t-value LEVEL=3",
    )
    build_env.build(request).write()
    return build_env.work_dir


def running(env: dict[str, str]) -> list[str]:
    done = subprocess.run(
        ["docker", "ps", "--format", "{{.Names}}"], capture_output=True, text=True, env=env
    )
    return done.stdout.split()


@pytest.mark.parametrize(("code", "verdict", "rc"), [(0, "PASSED", 0), (3, "FAILED", 1)])
def test_exit_status_is_kept(
    build_env: BuildEnv, docker_env: dict[str, str], code: int, verdict: str, rc: int
) -> None:
    work_dir = docker_job(
        build_env, f'echo "from the container, token $HF_TOKEN"; sleep 1; exit {code}'
    )
    submitted = sb("submit", str(work_dir), env=docker_env)
    assert submitted.returncode == 0, submitted.stderr
    record = json.loads(submitted.stdout)
    assert record["container_name"] == "demo_custom" and record["job_id"] == "docker:demo_custom"
    done = sb("watch", str(work_dir), "--interval", "0.2s", env=docker_env)
    result = json.loads(done.stdout)
    assert (result["verdict"], result["job_exit_code"], done.returncode) == (verdict, code, rc)
    log = Path(record["stdout_path"])
    assert log.parent == work_dir and "from the container" in log.read_text()
    assert "s3cr3t-value" in log.read_text()  # the job had its secret; no output shows it
    assert "from the container, token ***" in result["excerpt"]["out_last_100"]
    assert "s3cr3t" not in done.stdout + done.stderr + submitted.stdout
    status = sb("status", str(work_dir), "--json", env=docker_env)
    assert json.loads(status.stdout)["verdict"] == verdict and status.returncode == rc


@pytest.mark.parametrize(
    ("command", "how", "verdict", "rc"),
    [
        ("sleep 300", "cancel", "CANCELLED", 6),
        ('echo "Hang detected after 300 seconds"; sleep 300', "watch", "HANG_DETECTED", 5),
    ],
)
def test_stopping_touches_only_its_own_container(
    build_env: BuildEnv, docker_env: dict[str, str], command: str, how: str, verdict: str, rc: int
) -> None:
    work_dir = docker_job(build_env, command)
    spec_image = json.loads((work_dir / "job_spec.json").read_text())["container_image"]
    other = subprocess.Popen(
        ["docker", "run", "--rm", "--name=other", spec_image, "sleep", "300"], env=docker_env
    )
    try:
        assert sb("submit", str(work_dir), env=docker_env).returncode == 0
        watch = subprocess.Popen(
            [sys.executable, "-m", "scriptbuilder", "watch", str(work_dir), "--interval", "0.2s"],
            stdout=subprocess.PIPE,
            text=True,
            env=docker_env,
        )
        deadline = time.monotonic() + 30
        while "demo_custom" not in running(docker_env) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert sorted(running(docker_env)) == ["demo_custom", "other"]
        if how == "cancel":
            look = sb("status", str(work_dir), env=docker_env)
            assert look.returncode == 10 and " RUNNING " in look.stdout, look  # not finished
            cancelled = sb("cancel", str(work_dir), env=docker_env)
            assert cancelled.returncode == 0, cancelled.stderr
        out, _ = watch.communicate(timeout=60)
        result = json.loads(out)
        assert (result["verdict"], watch.returncode) == (verdict, rc), result
        assert running(docker_env) == ["other"] and other.poll() is None
    finally:
        other.terminate()
        subprocess.run(["docker", "stop", "other"], env=docker_env, capture_output=True)
        other.wait(timeout=30)


def test_the_stand_in_fails_where_docker_fails(docker_env: dict[str, str]) -> None:
    stop = subprocess.run(
        ["docker", "stop", "nobody"], capture_output=True, text=True, env=docker_env
    )
    assert stop.returncode == 1 and "No such container: nobody" in stop.stderr
    first = subprocess.Popen(
        ["docker", "run", "--rm", "--name=twice", "img", "sleep", "30"], env=docker_env
    )
    try:
        deadline = time.monotonic() + 10
        while "twice" not in running(docker_env) and time.monotonic() < deadline:
            time.sleep(0.05)
        again = subprocess.run(
            ["docker", "run", "--name=twice", "img", "true"],
            capture_output=True,
            text=True,
            env=docker_env,
        )
        assert again.returncode == 125 and "already in use" in again.stderr
    finally:
        subprocess.run(["docker", "stop", "twice"], env=docker_env, capture_output=True)
        assert first.wait(timeout=30) == 143


def test_after_needs_slurm(build_env: BuildEnv, docker_env: dict[str, str]) -> None:
    work_dir = docker_job(build_env, "true")
    done = sb("submit", str(work_dir), "--after", "12", env=docker_env)
    assert done.returncode == 2 and "--after needs Slurm" in done.stderr, done
    assert not (work_dir / "run.json").exists() and running(docker_env) == []
