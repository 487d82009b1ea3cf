"""Every workload command reaches its program exactly as bash would parse it.

For each corpus entry (through one subcommand, the subcommands in turn), the
drop-in CLI generates a script,
bash runs it with a stand-in srun, and the recorded argv must equal the argv
bash gives for the same line typed at a prompt.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.quoting_corpus import CORPUS, CORPUS_ENV, Case
from tests.script_runner import run_compat, run_script

# The pytest workflow runs record-argv on the quoting corpus: the stand-in pytest, like
# pytest, exits 4 for arguments that name no file or folder.
PROGRAM = {
    "pytest": "record-argv",
    "custom": "record-argv",
    "bench": "trtllm-bench",
    "eval": "trtllm-eval",
}
PREP = "trtllm-bench --model m prepare-dataset --output /tmp/d.json token-norm-dist"


def common_args(tmp_path: Path, subcommand: str) -> list[str]:
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    return [
        subcommand,
        "--model-name",
        "model",
        "--log-dir",
        str(tmp_path / "logs"),
        "--partition",
        "batch",
        "--account",
        "acct",
        "--docker-image",
        "nvcr.io#nvidia/pytorch:24.01-py3",
        "--container-mounts",
        f"{tmp_path}:{tmp_path}",
        "--project-path",
        str(project),
    ]


def workload_args(subcommand: str, command: str) -> list[str]:
    if subcommand == "pytest":
        return ["--test-cmd", command]
    if subcommand == "custom":
        return ["--custom-cmd", command]
    if subcommand == "bench":
        return ["--bench-cmd", f"{PREP} && {command}"]
    return ["--eval-cmd", command]


def generate(tmp_path: Path, subcommand: str, command: str, *extra: str) -> str:
    result = run_compat(
        [*common_args(tmp_path, subcommand), *workload_args(subcommand, command), *extra]
    )
    assert result.exit_code == 0, result.stderr
    return result.stdout


#: Each corpus entry through one subcommand, the subcommands in turn.
ROTATION = [(list(PROGRAM)[i % len(PROGRAM)], case) for i, case in enumerate(CORPUS)]


@pytest.mark.parametrize(
    ("subcommand", "case"), ROTATION, ids=[f"{sub}-{case.id}" for sub, case in ROTATION]
)
def test_command_reaches_program_unchanged(tmp_path: Path, subcommand: str, case: Case) -> None:
    program = PROGRAM[subcommand]
    text = generate(tmp_path, subcommand, f"{program} {case.tail}")
    run = run_script(text, tmp_path, env=CORPUS_ENV)
    assert run.exit_code == 0, run.stdout + run.stderr
    calls = run.calls(program)
    if subcommand == "bench":
        assert calls[0] == PREP.split()[1:]
        calls = calls[1:]
    assert calls == [case.argv]


@pytest.mark.parametrize("subcommand", list(PROGRAM))
def test_multi_task_command_reaches_every_rank(tmp_path: Path, subcommand: str) -> None:
    case = next(c for c in CORPUS if c.id == "single-quotes")
    program = PROGRAM[subcommand]
    text = generate(
        tmp_path, subcommand, f"{program} {case.tail}", "--ntasks", "2", "--ntasks-per-node", "2"
    )
    run = run_script(text, tmp_path, env=CORPUS_ENV)
    assert run.exit_code == 0, run.stdout + run.stderr
    calls = run.calls(program)
    if subcommand == "bench":
        calls = calls[1:]
    assert calls == [case.argv, case.argv]
    if subcommand in ("bench", "eval"):
        launched = run.calls("trtllm-llmapi-launch")
        assert len(launched) == 2
        assert [call[:2] + call[3:] for call in launched] == [
            ["bash", "-c", "workload", f"{program} {case.tail}"]
        ] * 2


@pytest.mark.parametrize("code", [0, 1, 3, 42])
@pytest.mark.parametrize("subcommand", list(PROGRAM))
def test_exit_code_and_closing_line(tmp_path: Path, subcommand: str, code: int) -> None:
    text = generate(tmp_path, subcommand, f"{PROGRAM[subcommand]} --run")
    run = run_script(text, tmp_path, env={"STANDIN_EXIT_CODE": str(code)})
    assert run.exit_code == code
    assert run.stdout.rstrip().splitlines()[-1].startswith("Job 4242 finished at ")
    assert run.stdout.rstrip().endswith(f"with exit code {code}")


def test_failing_prepare_step_skips_the_benchmark(tmp_path: Path) -> None:
    text = generate(tmp_path, "bench", "false-prep-never-runs")
    text = generate(tmp_path, "bench", "trtllm-bench --model m throughput")
    run = run_script(text, tmp_path, env={"STANDIN_EXIT_CODE": "7"})
    assert run.exit_code == 7
    assert len(run.calls("trtllm-bench")) == 1  # the prepare step only
    assert run.stdout.rstrip().endswith("with exit code 7")


def test_failing_install_skips_the_workload(tmp_path: Path) -> None:
    text = generate(tmp_path, "pytest", "pytest -x")
    fake_pip = tmp_path / "bin"
    fake_pip.mkdir()
    (fake_pip / "pip").write_text("#!/bin/bash\nexit 5\n")
    (fake_pip / "pip").chmod(0o755)
    import os

    from tests.script_runner import FAKE_BIN

    run = run_script(text, tmp_path, env={"PATH": f"{fake_pip}:{FAKE_BIN}:{os.environ['PATH']}"})
    assert run.exit_code == 5
    assert run.calls("pytest") == []
    assert run.stdout.rstrip().endswith("with exit code 5")


def test_custom_env_and_workdir_are_applied(tmp_path: Path) -> None:
    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    text = generate(
        tmp_path,
        "custom",
        'record-argv "$GREETING" "$(pwd)"',
        "--custom-env",
        "GREETING='hello world' OTHER=1",
        "--custom-workdir",
        str(workdir),
    )
    run = run_script(text, tmp_path)
    assert run.exit_code == 0, run.stderr
    assert run.calls("record-argv") == [["hello world", str(workdir)]]
    assert "Rank0 Custom command finished with exit code 0" in run.stdout


def test_custom_run_script_flag_overrides_packaged_script(tmp_path: Path) -> None:
    own = tmp_path / "own_run.sh"
    own.write_text('#!/bin/bash\nrecord-argv own "$CUSTOM_COMMAND"\n')
    text = generate(tmp_path, "custom", "echo 'a b'", "--run-script", str(own))
    run = run_script(text, tmp_path)
    assert run.exit_code == 0, run.stderr
    assert run.calls("record-argv") == [["own", "echo 'a b'"]]


def test_command_longer_than_one_argument_reaches_program_whole(tmp_path: Path) -> None:
    # 1 MB: eight times what Linux lets one argument carry (128 KiB)
    words = [f"w{i:06d}-" + "é" * 60 for i in range(8000)]
    command = "trtllm-eval " + " ".join(words)
    assert len(command.encode("utf-8")) > 1_000_000
    text = generate(tmp_path, "eval", command, "--ntasks", "2", "--ntasks-per-node", "2")
    run = run_script(text, tmp_path, timeout=120)
    assert run.exit_code == 0, run.stderr[-2000:]
    assert run.calls("trtllm-eval") == [words, words]  # through the launcher, on two tasks
