"""What the job tells its watcher: the time-limit closing line, step banners, secrets.

Scripts run with bash and the stand-in srun of ``tests/fake_bin`` (the real-Slurm
checks are in tests/test_slurm_signals.py).
"""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest

from scriptbuilder.scenarios.base import BANNER_PREFIX
from scriptbuilder.scenarios.time_limit import TIMEOUT_PATTERN, TIMEOUT_STATUS, warning_seconds
from tests.build_env import BuildEnv
from tests.quoting_corpus import CORPUS, CORPUS_ENV, Case
from tests.script_runner import FAKE_BIN, run_compat, run_script
from tests.test_build_stops import run_cli

REACHED = re.compile(r"Job 4242 reached its time limit \((?P<limit>[^)]*)\) during (?P<step>.+)")


def custom_job(build_env: BuildEnv, command: str, **fields: object) -> str:
    job = build_env.build(build_env.request("custom", custom_cmd=command, **fields))
    return job.script_text


def env_for(workdir: Path, **extra: str) -> dict[str, str]:
    return {
        "PATH": f"{FAKE_BIN}{os.pathsep}{os.environ['PATH']}",
        "RECORD_DIR": str(workdir / "records"),
        "SLURM_JOB_ID": "4242",
        "LANG": "C.UTF-8",
        **extra,
    }


# ------------------------------------------------------------------ the warning


@pytest.mark.parametrize(
    ("limit", "wanted", "expected"),
    [
        ("02:00:00", 300, 300),
        ("00:10:00", 120, 120),
        ("00:01:00", 300, 30),  # at most half the limit
        ("1", 300, 30),
        ("30-00:00:00", 99999, 65535),  # at most what sbatch takes
        ("infinite", 300, None),
        ("0", 300, None),
        ("not a limit", 300, None),
    ],
)
def test_warning_seconds(limit: str, wanted: int, expected: int | None) -> None:
    assert warning_seconds(limit, wanted) == expected


def test_directive_trap_and_pattern(build_env: BuildEnv) -> None:
    job = build_env.build(
        build_env.request("custom", time_limit="00:10:00", timeout_warning_seconds=120)
    )
    text = job.script_text
    assert "#SBATCH --signal=B:USR1@120\n" in text
    assert "\ntrap time_limit_reached USR1\n" in text
    assert job.job_spec_data["timeout_patterns"] == [TIMEOUT_PATTERN]


def test_no_limit_no_warning(tmp_path: Path) -> None:
    argv = [
        *("custom", "--model-name", "m", "--log-dir", str(tmp_path), "--partition", "p"),
        *("--account", "a", "--docker-image", "img", "--container-mounts", "/a:/a"),
        *("--project-path", "/code", "--custom-cmd", "true", "--time-limit", "infinite"),
    ]
    outcome = run_compat(argv)
    assert outcome.exit_code == 0, outcome.stderr
    assert "--signal" not in outcome.stdout
    assert "trap" not in outcome.stdout


def test_docker_has_no_timeout_patterns(build_env: BuildEnv) -> None:
    job = build_env.build(build_env.request("custom", execution_scenario="local_docker"))
    assert job.job_spec_data["timeout_patterns"] == []


def _sleeping(build_env: BuildEnv, tmp_path: Path) -> Path:
    """A custom job whose command sleeps (its output away from the test's pipes)."""
    text = custom_job(build_env, "sleep 20 </dev/null >/dev/null 2>&1", time_limit="00:10:00")
    script = tmp_path / "job.sh"
    script.write_text(text)
    (tmp_path / "records").mkdir()
    return script


def _closing(stdout: str, status: int) -> re.Match[str]:
    lines = [line for line in stdout.splitlines() if line.strip()]
    reached = REACHED.fullmatch(lines[-2])
    assert reached, stdout
    assert re.fullmatch(rf"Job 4242 finished at .+ with exit code {status}", lines[-1]), stdout
    assert re.search(TIMEOUT_PATTERN, stdout)
    return reached


def _start(script: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        ["bash", str(script)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=script.parent,
    )


def _read_until_closing(proc: subprocess.Popen[str]) -> str:
    """The job's output up to its closing line (the stand-in srun leaves the
    step's processes behind when it is stopped, so the pipe stays open)."""
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if " finished at " in line:
            break
    assert proc.wait(timeout=30) == TIMEOUT_STATUS, "".join(lines)
    return "".join(lines)


def test_persistent_mode_timer_sends_the_warning(build_env: BuildEnv, tmp_path: Path) -> None:
    """Run with bash (no sbatch): the timer fires before SLURM_JOB_END_TIME."""
    script = _sleeping(build_env, tmp_path)
    end = int(time.time()) + 300 + 2  # the warning is due in two seconds
    started = time.monotonic()
    proc = _start(script, env_for(tmp_path, SLURM_JOB_END_TIME=str(end)))
    out = _read_until_closing(proc)
    assert time.monotonic() - started < 15
    reached = _closing(out, TIMEOUT_STATUS)
    assert reached["limit"] == "00:10:00"
    assert reached["step"] == "run the custom command"


def test_batch_mode_waits_for_slurms_signal(build_env: BuildEnv, tmp_path: Path) -> None:
    """Under sbatch (ENVIRONMENT=BATCH) no timer runs; Slurm's USR1 ends the job."""
    script = _sleeping(build_env, tmp_path)
    env = env_for(tmp_path, ENVIRONMENT="BATCH", SLURM_JOB_END_TIME=str(int(time.time())))
    proc = _start(script, env)
    assert proc.stdout is not None
    head = []
    for line in proc.stdout:
        head.append(line)
        if line.startswith(BANNER_PREFIX + "run the custom command"):
            break
    time.sleep(0.5)
    assert proc.poll() is None, "the job ended without a warning"
    proc.send_signal(signal.SIGUSR1)
    _closing(_read_until_closing(proc), TIMEOUT_STATUS)


def test_a_job_that_ends_in_time_stops_its_timer(build_env: BuildEnv, tmp_path: Path) -> None:
    text = custom_job(build_env, "true", time_limit="00:10:00")
    run = run_script(text, tmp_path, env={"SLURM_JOB_END_TIME": str(int(time.time()) + 900)})
    assert run.exit_code == 0, run.stderr
    assert TIMEOUT_PATTERN not in run.stdout


# ------------------------------------------------------------------ banners


def banners(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith(BANNER_PREFIX)]


def test_every_step_starts_with_its_banner(build_env: BuildEnv, tmp_path: Path) -> None:
    bench = "trtllm-bench --model m prepare-dataset --output /tmp/d.json && trtllm-bench -m x"
    job = build_env.build(build_env.request("bench", bench_cmd=bench, model_name="m"))
    run = run_script(job.script_text, tmp_path)
    assert run.exit_code == 0, run.stderr
    lines = [line for line in run.stdout.splitlines() if line.strip()]
    assert lines[1] == f"{BANNER_PREFIX}install the project: " + (
        "set -e; pip install -e .; pip install -r requirements-dev.txt"
    )
    assert banners(run.stdout)[1:] == [
        f"{BANNER_PREFIX}prepare the dataset: trtllm-bench --model m prepare-dataset "
        "--output /tmp/d.json",
        f"{BANNER_PREFIX}run the benchmark: trtllm-bench -m x",
    ]


@pytest.mark.parametrize("case", CORPUS, ids=[c.id for c in CORPUS])
def test_banner_command_pasted_into_bash_runs_the_same_argv(
    build_env: BuildEnv, tmp_path: Path, case: Case
) -> None:
    request = build_env.request("custom", custom_cmd=f"record-argv {case.tail}", required_devices=1)
    run = run_script(build_env.build(request).script_text, tmp_path, env=CORPUS_ENV)
    assert run.exit_code == 0, run.stderr
    (banner,) = [b for b in banners(run.stdout) if "run the custom command" in b]
    assert banner in run.stdout.split("\n")  # one line
    command = banner.split(": ", 1)[1]
    records = tmp_path / "records"
    for old in records.iterdir():
        old.unlink()
    pasted = subprocess.run(
        ["bash", "-c", command],
        env={**env_for(tmp_path), **CORPUS_ENV},
        cwd=tmp_path,
        capture_output=True,
        check=False,
    )
    assert pasted.returncode == 0, pasted.stderr
    (path,) = records.iterdir()
    name, *args = path.read_bytes().decode("utf-8").split("\0")[:-1]
    assert (name, args) == ("record-argv", case.argv)
    assert run.calls("record-argv") == [case.argv]


def test_launcher_banner_shows_the_wrapped_command(build_env: BuildEnv, tmp_path: Path) -> None:
    cmd = "trtllm-eval --model /models/x --tp_size 2 gsm8k"
    job = build_env.build(build_env.request("eval", eval_cmd=cmd))
    run = run_script(job.script_text, tmp_path)
    expected = f"run the evaluation: trtllm-llmapi-launch bash -c '{cmd}' workload"
    assert f"{BANNER_PREFIX}{expected}" in banners(run.stdout)


# ------------------------------------------------------------------ secrets


SECRET = "abc123"


def files(folder: Path) -> list[Path]:
    """Every file below ``folder``."""
    return [p for p in folder.rglob("*") if p.is_file()]


def _printouts(build_env: BuildEnv, request: dict[str, object], tmp_path: Path) -> str:
    path = tmp_path / "request.json"
    path.write_text(json.dumps(request))
    out = []
    for flags in (["--dry-run"], ["--explain", "--dry-run"], ["--explain"]):
        code, stdout, stderr = run_cli(["build", *flags, str(path)])
        assert code == 0, stderr
        out += [stdout, stderr]
    return "\n".join(out)


@pytest.mark.parametrize("scenario", ["local_slurm", "local_docker"])
def test_secret_in_custom_env_is_in_no_printout(
    build_env: BuildEnv, tmp_path: Path, scenario: str
) -> None:
    request = build_env.request(
        "custom",
        execution_scenario=scenario,
        custom_env=f"HF_TOKEN={SECRET} OTHER=1",
        custom_cmd='record-argv "$HF_TOKEN" "$OTHER"',
    )
    job = build_env.build(request)
    assert SECRET not in job.report + job.job_spec_json + "".join(job.explanation)
    assert SECRET not in job.shown_script and "HF_TOKEN=***" in job.shown_script
    assert SECRET not in _printouts(build_env, request, tmp_path)
    assert SECRET in job.script_text  # the script must carry it
    holders = [f for f in build_env.work_dir.iterdir() if f.is_file() and SECRET in f.read_text()]
    (script,) = holders
    assert script.name == job.script_name
    assert stat.S_IMODE(script.stat().st_mode) == 0o700
    spec = json.loads((build_env.work_dir / "job_spec.json").read_text())
    assert SECRET not in json.dumps(spec)


def test_script_without_secrets_stays_0755(build_env: BuildEnv) -> None:
    job = build_env.build(build_env.request("custom", custom_env="OTHER=1"))
    job.write()
    script = build_env.work_dir / job.script_name
    assert stat.S_IMODE(script.stat().st_mode) == 0o755


def test_the_job_still_gets_the_secret(build_env: BuildEnv, tmp_path: Path) -> None:
    job = build_env.build(
        build_env.request(
            "custom", custom_env=f"HF_TOKEN='{SECRET}'", custom_cmd='record-argv "$HF_TOKEN"'
        )
    )
    assert f"'{SECRET}'" not in job.shown_script
    run = run_script(job.script_text, tmp_path)
    assert run.exit_code == 0, run.stderr
    assert {tuple(c) for c in run.calls("record-argv")} == {(SECRET,)}
    assert SECRET not in "\n".join(banners(run.stdout))


def test_marked_secret_values_are_masked_in_the_banner(build_env: BuildEnv) -> None:
    job = build_env.build(
        build_env.request("pytest", test_cmd="pytest --token s3cr3t-v", secret_values=["s3cr3t-v"])
    )
    assert "run the tests: pytest --token ***'" in job.script_text  # the banner's literal
    assert "s3cr3t-v" not in job.shown_script
    assert "s3cr3t-v" in job.script_text


def test_secret_name_patterns_are_configurable(build_env: BuildEnv) -> None:
    request = build_env.request(
        "custom", custom_env="MY_CREDENTIAL=zzz999 HF_TOKEN=plain", secret_name_patterns=["*CRED*"]
    )
    job = build_env.build(request)
    assert "zzz999" not in job.shown_script
    assert "HF_TOKEN=plain" in job.shown_script


def test_secrets_from_environment_leave_no_file_holding_them(
    build_env: BuildEnv, tmp_path: Path
) -> None:
    request = build_env.request(
        "custom",
        custom_env=f"HF_TOKEN={SECRET} OTHER=1",
        custom_cmd='record-argv "$HF_TOKEN" "$OTHER"',
        secrets_from_environment=True,
    )
    job = build_env.build(request)
    job.write()
    for path in files(build_env.work_dir):
        assert SECRET not in path.read_text(), path
    script = build_env.work_dir / job.script_name
    assert stat.S_IMODE(script.stat().st_mode) == 0o755
    run = run_script(job.script_text, tmp_path, env={"HF_TOKEN": SECRET})
    assert run.exit_code == 0, run.stderr
    assert {tuple(c) for c in run.calls("record-argv")} == {(SECRET, "1")}
    missing = run_script(job.script_text, tmp_path)
    assert missing.exit_code != 0
    assert "HF_TOKEN is not set in the job environment" in missing.stderr


def test_docker_passes_environment_secrets_through(build_env: BuildEnv) -> None:
    request = build_env.request(
        "custom",
        execution_scenario="local_docker",
        custom_env=f"HF_TOKEN={SECRET}",
        secrets_from_environment=True,
    )
    job = build_env.build(request)
    assert SECRET not in job.script_text
    assert "--env=HF_TOKEN \\" in job.script_text
