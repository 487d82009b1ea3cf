"""Scenario behaviour: local Docker, remote Slurm and persistent mode."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from scriptbuilder.api import BuiltJob
from scriptbuilder.workflows import registry
from tests.build_env import BuildEnv
from tests.quoting_corpus import CORPUS, CORPUS_ENV, Case
from tests.script_runner import FAKE_BIN, run_script

WORKFLOWS = list(registry.WORKFLOWS)
# The pytest workflow runs record-argv on the quoting corpus: the stand-in pytest, like
# pytest, exits 4 for arguments that name no file or folder.
PROGRAM = {
    "pytest": "record-argv",
    "custom": "record-argv",
    "bench": "trtllm-bench",
    "eval": "trtllm-eval",
}


def command_field(workflow: str, command: str) -> dict[str, str | None]:
    if workflow == "pytest":
        return {"test_cmd": command, "model_name": "m", "allow_missing_tests": True}
    if workflow == "custom":
        return {"custom_cmd": command, "model_name": "m"}
    if workflow == "bench":
        return {"bench_cmd": command, "model_name": "m"}
    return {"eval_cmd": command, "model_name": "m"}


def docker_job(build_env: BuildEnv, workflow: str, command: str) -> BuiltJob:
    req = build_env.request(
        workflow, execution_scenario="local_docker", **command_field(workflow, command)
    )
    return build_env.build(req)


# ------------------------------------------------------------------ local Docker


@pytest.mark.parametrize("workflow", WORKFLOWS)
def test_docker_cli_parses_every_docker_cmd(
    build_env: BuildEnv, tmp_path: Path, workflow: str
) -> None:
    docker = shutil.which("docker")
    if docker is None:
        if os.environ.get("CI") == "true":
            pytest.fail("the docker CLI is needed in CI to parse docker_cmd.sh")
        pytest.skip("no docker CLI on this machine")
    job = build_env.build(build_env.request(workflow, execution_scenario="local_docker"))
    job.write()
    env = {
        **os.environ,
        "DOCKER_HOST": f"unix://{tmp_path}/no-daemon.sock",
        "DOCKER_CONFIG": str(tmp_path),
    }
    proc = subprocess.run(
        ["bash", str(build_env.work_dir / "docker_cmd.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode != 0
    assert "Cannot connect to the Docker daemon" in proc.stderr, proc.stderr
    for bad in ("unknown flag", "invalid argument", "flag needs", "Usage:"):
        assert bad not in proc.stderr


@pytest.mark.parametrize("workflow", WORKFLOWS)
def test_docker_cmd_has_no_tty_and_matches_job_spec(build_env: BuildEnv, workflow: str) -> None:
    job = docker_job(build_env, workflow, f"{PROGRAM[workflow]} --x")
    spec = job.job_spec
    assert spec.docker_cmd is not None and spec.docker_cmd.startswith("docker run --rm ")
    for flag in (" -t ", " -it ", "--tty", "--interactive"):
        assert flag not in spec.docker_cmd
    for option in (
        "--network=host",
        "--ipc=host",
        "--runtime=nvidia",
        "--cap-add=SYS_PTRACE",
        "--security-opt=seccomp=unconfined",
        "--env=LLM_MODELS_ROOT=/models",
    ):
        assert option in spec.docker_cmd
    assert spec.log_file == str(build_env.work_dir / "m_local.log")
    assert job.script_name == "docker_cmd.sh"


#: Each corpus entry through one workflow, the workflows in turn.
ROTATION = [(WORKFLOWS[i % len(WORKFLOWS)], case) for i, case in enumerate(CORPUS)]


@pytest.mark.parametrize(
    ("workflow", "case"), ROTATION, ids=[f"{w}-{case.id}" for w, case in ROTATION]
)
def test_docker_payload_runs_commands_unchanged(
    build_env: BuildEnv, workflow: str, case: Case
) -> None:
    program = PROGRAM[workflow]
    command = f"{program} {case.tail}"
    if workflow == "bench":
        command = f"trtllm-bench --model m prepare-dataset --output d && {command}"
    job = docker_job(build_env, workflow, command)
    run = run_script(job.script_text, build_env.root, env=CORPUS_ENV)
    assert run.exit_code == 0, run.stdout + run.stderr
    calls = run.calls(program)
    if workflow == "bench":
        assert calls[0] == ["--model", "m", "prepare-dataset", "--output", "d"]
        calls = calls[1:]
    assert calls == [case.argv]
    assert run.calls("pip")[0] == ["install", "-e", "."]


@pytest.mark.parametrize("workflow", WORKFLOWS)
def test_docker_step_goes_on_after_a_failing_command(build_env: BuildEnv, workflow: str) -> None:
    """As at a prompt (and in a Slurm step): ``false; prog`` runs prog; no errexit."""
    program = PROGRAM[workflow]
    job = docker_job(build_env, workflow, f"false; {program} --x")
    run = run_script(job.script_text, build_env.root)
    assert run.exit_code == 0, run.stdout + run.stderr
    assert run.calls(program) == [["--x"]]


@pytest.mark.parametrize("workflow", ["pytest", "custom"])
def test_docker_runs_the_longest_commands_it_takes(build_env: BuildEnv, workflow: str) -> None:
    """Each argument of ``docker run`` within Linux's 128 KiB, the step banner included."""
    from scriptbuilder.inputs.command_check import CUSTOM_COMMAND_BYTES

    program = PROGRAM[workflow]
    if workflow == "custom":  # one word, as long as CUSTOM_COMMAND can carry
        args = ["x" * (CUSTOM_COMMAND_BYTES - len(program) - 1)]
    else:  # 300 kB of words: the command travels in pieces
        args = ["y" * 999] * 300
    job = docker_job(build_env, workflow, " ".join([program, *args]))
    run = run_script(job.script_text, build_env.root)
    assert run.exit_code == 0, run.stderr[-500:]
    assert run.calls(program) == [args]


@pytest.mark.parametrize("code", [1, 42])
def test_docker_payload_exit_code(build_env: BuildEnv, code: int) -> None:
    job = docker_job(build_env, "pytest", "pytest -x")
    run = run_script(job.script_text, build_env.root, env={"STANDIN_EXIT_CODE": str(code)})
    assert run.exit_code == code


# ------------------------------------------------------------------ remote Slurm


@pytest.mark.parametrize("workflow", WORKFLOWS)
def test_remote_script_holds_no_local_path(build_env: BuildEnv, workflow: str) -> None:
    req = build_env.request(workflow, execution_scenario="remote_slurm")
    job = build_env.build(req)
    assert str(build_env.root) not in job.script_text
    assert "#SBATCH --output=/lustre/alice/TensorRT-LLM/work_dirs/work/" in job.script_text
    paths = job.write()
    assert all(str(p).startswith(str(build_env.work_dir)) for p in paths)
    assert not Path("/lustre").exists()
    if workflow == "custom":
        assert job.job_spec.extra_files == [str(build_env.work_dir / "slurm_run_custom.sh")]
        assert (
            'bash "$1"\' step /lustre/alice/TensorRT-LLM/work_dirs/work/slurm_run_custom.sh'
            in job.script_text
        )
        assert (build_env.work_dir / "slurm_run_custom.sh").stat().st_mode & 0o111


def test_remote_run_script_outside_mounts_stops(build_env: BuildEnv) -> None:
    from scriptbuilder.errors import BuildError

    req = build_env.request(
        "custom", execution_scenario="remote_slurm", remote_work_dir="/scratch/elsewhere/work"
    )
    with pytest.raises(BuildError, match="remote_work_dir /scratch/elsewhere/work is not inside"):
        build_env.build(req)


# ------------------------------------------------------------------ persistent mode


@pytest.mark.parametrize("workflow", WORKFLOWS)
def test_persistent_mode_script_runs_with_bash_in_an_allocation(
    build_env: BuildEnv, workflow: str
) -> None:
    """The persistent executor runs the script with bash, SLURM_* exported by hand."""
    job = build_env.build(
        build_env.request(workflow, **command_field(workflow, f"{PROGRAM[workflow]} 'a b'"))
    )
    assert job.job_spec.persistent_mode is True
    env = {
        "SLURM_JOB_ID": "77",
        "SLURM_JOBID": "77",
        "SLURM_NNODES": "1",
        "SLURM_NTASKS": "8",
        "SLURM_NODELIST": "node1",
        "SLURM_CPUS_ON_NODE": "8",
        "PATH": f"{FAKE_BIN}{os.pathsep}{os.environ['PATH']}",
    }
    run = run_script(job.script_text, build_env.root, env=env)
    assert run.exit_code == 0, run.stdout + run.stderr
    ntasks = job.job_spec.slurm_params.ntasks if job.job_spec.slurm_params else 1
    assert run.calls(PROGRAM[workflow]) == [["a b"]] * ntasks
    closing = run.stdout.rstrip().splitlines()[-1]
    assert closing.startswith("Job 77 finished at ") and closing.endswith("with exit code 0")
