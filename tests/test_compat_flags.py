"""Every flag of the drop-in CLI: its default, an explicit value, and the refusals."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.script_runner import run_compat

WORKLOAD = {
    "pytest": ["--test-cmd", "pytest -x"],
    "custom": ["--custom-cmd", "echo hi"],
    "bench": ["--bench-cmd", "trtllm-bench --model m throughput"],
    "eval": ["--eval-cmd", "trtllm-eval --model m gsm8k"],
}


def base(subcommand: str, tmp_path: Path, *, log_dir: bool = True) -> list[str]:
    args = [
        subcommand,
        "--model-name",
        "llama",
        "--partition",
        "batch",
        "--account",
        "acct",
        "--docker-image",
        "img:1",
        "--container-mounts",
        "/a:/a",
        "--project-path",
        "/proj",
        *WORKLOAD[subcommand],
    ]
    if log_dir:
        args += ["--log-dir", str(tmp_path / "logs")]
    return args


# (flag, value or None for the default, text expected in the script)
FLAG_TABLE = [
    ("--model-name", "qwen", "#SBATCH --job-name=qwen_auto_test"),
    ("--log-dir", None, "/logs/llama_auto_test_%j.out"),
    ("--partition", "gpu-long", "#SBATCH --partition=gpu-long"),
    ("--account", "team", "#SBATCH --account=team"),
    ("--time-limit", None, "#SBATCH --time=02:00:00"),
    ("--time-limit", "04:30:00", "#SBATCH --time=04:30:00"),
    ("--nodes", None, "#SBATCH --nodes=1"),
    ("--nodes", "2", "#SBATCH --nodes=2"),
    ("--ntasks", None, "#SBATCH --ntasks=1"),
    ("--ntasks", "8", "#SBATCH --ntasks=8"),
    ("--ntasks-per-node", None, "#SBATCH --ntasks-per-node=1"),
    ("--ntasks", "8", "#SBATCH --ntasks-per-node=8"),
    ("--ntasks-per-node", "4", "#SBATCH --ntasks-per-node=4"),
    ("--gres", "gpu:4", "#SBATCH --gres=gpu:4"),
    ("--docker-image", "nvcr.io#nv/x:1", "'--container-image=nvcr.io#nv/x:1'"),
    ("--container-mounts", "/m:/m,/n:/o", "--container-mounts=/m:/m,/n:/o"),
    ("--container-name", None, "--container-name=llama_pytest"),
    ("--container-name", "mine", "--container-name=mine"),
    ("--container-workdir", None, "--container-workdir=/proj"),
    ("--container-workdir", "/w d", "'--container-workdir=/w d'"),
    ("--project-path", "/p2", "--container-workdir=/p2"),
    ("--mpi", "pmix_v4", "--mpi=pmix_v4"),
    ("--mpi", "pmi2", "--mpi=pmi2"),
    ("--mpi", "pmix", "--mpi=pmix"),
    ("--mpi", "cray_shasta", "--mpi=cray_shasta"),
    ("--time-limit", "30", "#SBATCH --time=30\n"),
    ("--time-limit", "1-12:00", "#SBATCH --time=1-12:00\n"),
    ("--time-limit", "infinite", "#SBATCH --time=infinite\n"),
    ("--nodes", "10000", "#SBATCH --nodes=10000"),
    ("--ntasks-per-node", "512", "#SBATCH --ntasks-per-node=512"),
    ("--ntasks", "512", "#SBATCH --ntasks=512"),
    ("--llm-models-root", None, "export LLM_MODELS_ROOT=/scratch.trt_llm_data/llm-models/"),
    ("--llm-models-root", "/models", "export LLM_MODELS_ROOT=/models"),
    ("--test-cmd", "pytest -k 'a b'", "'pytest -k '\\''a b'\\'''"),
]


def with_flag(args: list[str], flag: str, value: str) -> list[str]:
    if flag in args:
        i = args.index(flag)
        return [*args[: i + 1], value, *args[i + 2 :]]
    return [*args, flag, value]


@pytest.mark.parametrize(("flag", "value", "expected"), FLAG_TABLE)
def test_flag(tmp_path: Path, flag: str, value: str | None, expected: str) -> None:
    args = base("pytest", tmp_path)
    if value is not None:
        args = with_flag(args, flag, value)
    result = run_compat(args)
    assert result.exit_code == 0, result.stderr
    assert expected in result.stdout


def test_gres_default_omits_the_line(tmp_path: Path) -> None:
    assert "--gres" not in run_compat(base("pytest", tmp_path)).stdout


def test_mpi_default_none_omits_mpi(tmp_path: Path) -> None:
    assert "--mpi" not in run_compat(base("pytest", tmp_path)).stdout


@pytest.mark.parametrize(
    ("subcommand", "suffix", "container"),
    [
        ("pytest", "auto_test", "llama_pytest"),
        ("custom", "custom", "llama_custom"),
        ("bench", "bench", "llama_bench"),
        ("eval", "eval", "llama_eval"),
    ],
)
def test_job_names_and_log_paths(
    tmp_path: Path, subcommand: str, suffix: str, container: str
) -> None:
    out = run_compat(base(subcommand, tmp_path)).stdout
    assert f"#SBATCH --job-name=llama_{suffix}\n" in out
    assert f"#SBATCH --output={tmp_path}/logs/llama_{suffix}_%j.out\n" in out
    assert f"#SBATCH --error={tmp_path}/logs/llama_{suffix}_%j.err\n" in out
    assert f"--container-name={container} " in out


@pytest.mark.parametrize("subcommand", ["bench", "eval"])
def test_bench_eval_log_dir_default_uses_the_clock(tmp_path: Path, subcommand: str) -> None:
    args = with_flag(base(subcommand, tmp_path, log_dir=False), "--project-path", str(tmp_path))
    out = run_compat(args).stdout
    log_dir = tmp_path / "work_dirs" / "llama_20260102_030405"
    assert f"#SBATCH --output={log_dir}/llama_{subcommand}_%j.out" in out
    assert log_dir.is_dir()


def test_local_log_dir_is_created_instead_of_log_dir(tmp_path: Path) -> None:
    args = [*base("pytest", tmp_path), "--local-log-dir", str(tmp_path / "local")]
    args = with_flag(args, "--log-dir", "/remote/never/created")
    result = run_compat(args)
    assert result.exit_code == 0
    assert (tmp_path / "local").is_dir()
    assert not Path("/remote/never/created").exists()
    assert "--output=/remote/never/created/llama_auto_test_%j.out" in result.stdout


def test_output_file_mode_and_message(tmp_path: Path) -> None:
    out = tmp_path / "job.slurm"
    result = run_compat([*base("pytest", tmp_path), "--output", str(out)])
    assert result.exit_code == 0
    assert result.stdout == ""
    assert result.stderr == f"Wrote {out}\n"
    assert stat.S_IMODE(out.stat().st_mode) == 0o755
    assert out.read_text().startswith("#!/bin/bash\n#SBATCH --job-name=llama_auto_test\n")


@pytest.mark.parametrize(("custom_env", "mode"), [("A=1", 0o755), ("A=1 HF_TOKEN=abc123", 0o700)])
def test_output_carrying_a_secret_is_private(tmp_path: Path, custom_env: str, mode: int) -> None:
    out = tmp_path / "job.slurm"
    args = [*base("custom", tmp_path), "--custom-env", custom_env, "--output", str(out)]
    assert run_compat(args).exit_code == 0
    assert stat.S_IMODE(out.stat().st_mode) == mode


def test_custom_run_script_and_workdir_flags(tmp_path: Path) -> None:
    args = [*base("custom", tmp_path), "--run-script", "/opt/run.sh", "--custom-workdir", "/wd"]
    args += ["--custom-env", "A=1"]
    out = run_compat(args).stdout
    assert "/opt/run.sh" in out
    assert "export CUSTOM_WORKDIR=/wd\n" in out
    assert "export CUSTOM_ENV=A=1\n" in out
    assert "export llmSrcNode=/proj\n" in out


REFUSALS = [
    ("pytest", ["--log-dir"], "--log-dir is required for pytest"),
    ("custom", ["--log-dir"], "--log-dir is required for custom"),
    ("eval", ["--nodes", "2"], "eval is single-node only"),
    ("bench", ["--bench-cmd", "a && b && c"], "--bench-cmd: more than one top-level '&&'"),
    ("bench", ["--bench-cmd", "trtllm-bench throughput &&"], "is not a command bash can run"),
    ("bench", ["--bench-cmd", "trtllm-bench 'unterminated"], "is not a command bash can run"),
    ("pytest", ["--test-cmd", "pytest -k 'a"], '--test-cmd "pytest -k \'a" is not a command bash'),
    ("eval", ["--eval-cmd", "trtllm-eval $(gsm8k"], "--eval-cmd 'trtllm-eval $(gsm8k' is not a"),
    ("custom", ["--custom-cmd", "echo 'x"], '--custom-cmd "echo \'x" is not a command bash'),
    ("custom", ["--custom-cmd", "   "], "--custom-cmd is empty; give the command to run"),
    ("pytest", ["--test-cmd", ""], "--test-cmd is empty"),
    ("custom", ["--custom-cmd", "# echo hi"], "--custom-cmd is empty (nothing but comments)"),
    ("custom", ["--custom-cmd", "x" * 140_000], "--custom-cmd is 140000 bytes, but the CUSTOM_"),
    ("custom", ["--custom-env", "A=1 B"], "--custom-env must be NAME=VALUE words, but 'B'"),
    ("custom", ["--custom-env", "A='1"], '--custom-env "A=\'1" cannot be read by bash'),
    ("pytest", ["--partition"], "Missing option '--partition'"),
    ("pytest", ["--nodes", "0"], "--nodes"),
    ("pytest", ["--ntasks", "4", "--ntasks-per-node", "2"], "does not fit --nodes 1"),
    ("pytest", ["--ntasks", "two"], "--ntasks"),
    ("pytest", ["--partition", "a\nb"], "--partition must be a single line"),
    ("pytest", ["--project-path", "/a\nb"], "--project-path must be a single line"),
    ("pytest", ["--container-mounts", "/a:/a\r"], "--container-mounts must be a single line"),
    ("pytest", ["--docker-image", "img\n:1"], "--docker-image 'img\\n:1' cannot be pulled"),
    ("pytest", ["--container-name", "n\nx"], "--container-name must be a single line"),
    ("pytest", ["--container-workdir", "/w\nx"], "--container-workdir must be a single line"),
    ("pytest", ["--llm-models-root", "/m\nx"], "--llm-models-root must be a single line"),
    ("custom", ["--custom-workdir", "/w\nx"], "--custom-workdir must be a single line"),
    ("custom", ["--run-script", "/r\nx.sh"], "--run-script must be a single line"),
    ("pytest", ["--model-name", "a\\b"], "--model-name 'a\\\\b' contains a backslash"),
    ("pytest", ["--bogus", "1"], "No such option '--bogus'"),
    ("pytest", ["--nodes", "100000"], "'--nodes': 100000 is not in the range 1<=x<=10000"),
    ("pytest", ["--ntasks", "513"], "--ntasks = 513 puts more than 512 tasks on each of 1 node"),
    ("pytest", ["--ntasks-per-node", "513"], "'--ntasks-per-node': 513 is not in the range"),
    ("pytest", ["--mpi", "bogus"], "--mpi 'bogus' is not a Slurm MPI plugin; pass none, pmi2"),
    ("bench", ["--mpi", "pmix_vx"], "--mpi 'pmix_vx' is not a Slurm MPI plugin"),
    ("eval", ["--mpi", "PMIX"], "--mpi 'PMIX' is not a Slurm MPI plugin"),
    ("pytest", ["--mpi", "openmpi"], "--mpi 'openmpi' is not a Slurm MPI plugin"),
    ("pytest", ["--time-limit", "2hours"], "--time-limit '2hours' is not a Slurm time limit"),
    ("custom", ["--time-limit", "1:2:3:4"], "write it as MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM"),
    ("pytest", ["--time-limit", ""], "--time-limit '' is not a Slurm time limit"),
    ("pytest", ["--model-name", "meta-llama/Llama"], "--model-name 'meta-llama/Llama' contains"),
    ("pytest", ["--docker-image", "docker://nvcr.io/x:1"], "pulled by pyxis: registry 'docker:'"),
    ("eval", ["--docker-image", "nvcr.io/NVIDIA/x:1"], "with IMAGE in lower-case letters"),
    ("pytest", ["--project-path", ""], "--project-path '' is not an absolute path; pass the"),
    ("pytest", ["--project-path", "proj"], "--project-path 'proj' is not an absolute path"),
    ("pytest", ["--container-workdir", "defs"], "--container-workdir 'defs' is not an absolute"),
    ("bench", ["--nodes", "1", "--log-dir", "logs"], "--log-dir 'logs' is not an absolute"),
]


@pytest.mark.parametrize(("subcommand", "change", "message"), REFUSALS)
def test_refusal(tmp_path: Path, subcommand: str, change: list[str], message: str) -> None:
    args = base(subcommand, tmp_path, log_dir=change[0] != "--log-dir")
    if change[0] == "--log-dir":
        pass
    elif change[0] in args and len(change) == 1:
        i = args.index(change[0])
        args = args[:i] + args[i + 2 :]
    else:
        for flag, value in zip(change[::2], change[1::2], strict=True):
            args = with_flag(args, flag, value)
    out = tmp_path / "out" / "job.slurm"
    out.parent.mkdir()
    before = sorted(os.listdir(tmp_path))
    result = run_compat([*args, "--output", str(out)])
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("build_slurm_script: error: ")
    assert message in lines[0]
    assert not out.exists()
    assert os.listdir(out.parent) == []
    assert sorted(os.listdir(tmp_path)) == before


def test_same_input_same_bytes(tmp_path: Path) -> None:
    for subcommand in WORKLOAD:
        args = base(subcommand, tmp_path, log_dir=subcommand in ("pytest", "custom"))
        assert run_compat(args).stdout == run_compat(args).stdout


def test_bench_split_ignores_quoted_and_and(tmp_path: Path) -> None:
    args = with_flag(
        base("bench", tmp_path), "--bench-cmd", "trtllm-bench --model 'a && b' throughput"
    )
    result = run_compat(args)
    assert result.exit_code == 0, result.stderr
    assert "prepare the dataset" not in result.stdout


@pytest.mark.parametrize("subcommand", ["pytest", "custom", "bench", "eval"])
def test_install_runs_in_the_project_path(tmp_path: Path, subcommand: str) -> None:
    """``pip install -e .`` needs the checkout, whatever --container-workdir says."""
    args = with_flag(base(subcommand, tmp_path), "--container-workdir", "/proj/tests/defs")
    out = run_compat(args).stdout
    workdirs = [line.strip().rstrip(" \\") for line in out.splitlines() if "-workdir=" in line]
    assert workdirs == ["--container-workdir=/proj", "--container-workdir=/proj/tests/defs"]


@pytest.mark.parametrize(
    ("subcommand", "ntasks", "mpi", "expected"),
    [
        ("bench", "1", "pmix_v5", None),
        ("bench", "2", "none", "--mpi=pmix"),
        ("bench", "2", "pmix_v5", "--mpi=pmix_v5"),
        ("bench", "2", "pmi2", "--mpi=pmix"),
        ("eval", "1", "pmix_v5", "--mpi=pmix_v5"),  # the old script dropped it
        ("eval", "1", "none", "--mpi=pmix"),
        ("eval", "2", "pmix_v4", "--mpi=pmix_v4"),
        ("pytest", "2", "pmi2", "--mpi=pmi2"),
        ("custom", "1", "none", None),
    ],
)
def test_mpi_plugin_rules(
    tmp_path: Path, subcommand: str, ntasks: str, mpi: str, expected: str | None
) -> None:
    args = [
        *base(subcommand, tmp_path),
        "--ntasks",
        ntasks,
        "--ntasks-per-node",
        ntasks,
        "--mpi",
        mpi,
    ]
    out = run_compat(args).stdout
    mpis = [line.strip().rstrip(" \\") for line in out.splitlines() if "--mpi=" in line]
    assert mpis == ([expected] if expected else [])


def test_every_subcommand_takes_the_common_flags_in_one_order() -> None:
    from scriptbuilder.cli.dropin import COMMON_OPTIONS, cli

    expected = [
        "--model-name",
        "--log-dir",
        "--local-log-dir",
        "--partition",
        "--account",
        "--time-limit",
        "--nodes",
        "--ntasks",
        "--ntasks-per-node",
        "--gres",
        "--docker-image",
        "--container-mounts",
        "--container-name",
        "--container-workdir",
        "--project-path",
        "--mpi",
        "--llm-models-root",
        "--output",
    ]
    assert len(COMMON_OPTIONS) == len(expected)
    for name, command in cli.commands.items():
        flags = [opt for param in command.params for opt in param.opts]
        assert flags[: len(expected)] == expected, name
        own = {"custom": 4, "pytest": 2}.get(name, 1)  # pytest: --test-cmd, --record-tests
        assert len(flags) == len(expected) + own


def refused(message: str) -> tuple[str, str]:
    return ("refused", message)


def accepted(text: str) -> tuple[str, str]:
    return ("accepted", text)


# Values Slurm or pyxis would reject or misuse after the queue wait, each beside valid
# neighbours: (flag, value, (refused, part of the one-line error) or (accepted, text
# expected in the script)).
VALUE_TABLE = [
    ("--model-name", "", refused("--model-name is empty; pass the model's name (for example")),
    ("--model-name", "   ", refused("--model-name is empty; pass the model's name (for example")),
    ("--model-name", "llama 8b", refused("--model-name 'llama 8b' contains whitespace")),
    ("--model-name", "llama\t8b", refused("whitespace, but it names the job and its log files")),
    ("--model-name", " llama", refused("files; use '_' or '-' instead")),
    ("--model-name", "llama_8b", accepted("#SBATCH --job-name=llama_8b_")),
    ("--model-name", "Llama-3.1-8B", accepted("/logs/Llama-3.1-8B_")),
    ("--partition", "", refused("--partition is empty; pass the Slurm partition")),
    ("--partition", " ", refused("--partition is empty")),
    ("--partition", "gpu", accepted("#SBATCH --partition=gpu\n")),
    ("--account", "", refused("--account is empty; pass the Slurm account")),
    ("--account", "team-a", accepted("#SBATCH --account=team-a\n")),
    ("--docker-image", "", refused("--docker-image is empty; pass the container image")),
    ("--docker-image", "img:2", accepted("--container-image=img:2 ")),
    ("--container-mounts", "", refused("--container-mounts is empty; pass the mounts as SRC:DST")),
    ("--container-mounts", "/data", accepted("--container-mounts=/data ")),
    ("--container-name", "a/b", refused("--container-name 'a/b' contains a '/'")),
    ("--container-name", "/abs", refused("--container-name '/abs' contains a '/'")),
    ("--container-name", "a_b-c.d", accepted("--container-name=a_b-c.d ")),
    ("--gres", "gpu", refused("--gres 'gpu' is not in Slurm's GRES form; pass gpu:N or")),
    ("--gres", "4", refused("--gres '4' is not in Slurm's GRES form")),
    ("--gres", "gpu:", refused("is not in Slurm's GRES form")),
    ("--gres", "gpu:0", refused("is not in Slurm's GRES form")),
    ("--gres", "gpu:-1", refused("is not in Slurm's GRES form")),
    ("--gres", "gpu:a100", refused("is not in Slurm's GRES form")),
    ("--gres", "gpu:4:2", refused("is not in Slurm's GRES form")),
    ("--gres", "GPU:4", refused("is not in Slurm's GRES form")),
    ("--gres", "gpu:4 ", refused("is not in Slurm's GRES form")),
    ("--gres", "gpu=4", refused("is not in Slurm's GRES form")),
    ("--gres", "gpu:4,nic:1", refused("is not in Slurm's GRES form")),
    ("--gres", "gres/gpu", refused("is not in Slurm's GRES form")),
    ("--gres", "tres/gpu:4", refused("is not in Slurm's GRES form")),
    ("--gres", "gpu:4", accepted("#SBATCH --gres=gpu:4\n")),
    ("--gres", "gpu:12", accepted("#SBATCH --gres=gpu:12\n")),
    ("--gres", "gpu:a100:8", accepted("#SBATCH --gres=gpu:a100:8\n")),
    ("--gres", "gpu:h100_80gb.x-1:2", accepted("#SBATCH --gres=gpu:h100_80gb.x-1:2\n")),
    ("--gres", "gres/gpu:4", accepted("#SBATCH --gres=gpu:4\n")),
    ("--gres", "gres/gpu:b200:4", accepted("#SBATCH --gres=gpu:b200:4\n")),
    ("--gres", "", accepted("#SBATCH --ntasks-per-node=1\n#SBATCH --output=")),
]


@pytest.mark.parametrize("subcommand", list(WORKLOAD))
@pytest.mark.parametrize(("flag", "value", "outcome"), VALUE_TABLE)
def test_values_slurm_would_misuse_are_refused(
    tmp_path: Path, subcommand: str, flag: str, value: str, outcome: tuple[str, str]
) -> None:
    kind, text = outcome
    out = tmp_path / "out" / "job.slurm"
    out.parent.mkdir()
    args = [*with_flag(base(subcommand, tmp_path), flag, value), "--output", str(out)]
    result = run_compat(args)
    if kind == "accepted":
        assert result.exit_code == 0, result.stderr
        assert text in out.read_text()
        return
    assert (result.exit_code, result.stdout) == (2, "")
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"build_slurm_script: error: {flag}")
    assert text in line
    assert os.listdir(out.parent) == []
    assert not (tmp_path / "logs").exists()


def test_record_tests_is_opt_in(tmp_path: Path) -> None:
    """``--record-tests`` ships the recording plugin into the log folder, mounts it and
    loads it in the test step; without it the script records nothing."""
    plain = run_compat(base("pytest", tmp_path))
    assert "SB_TEST_RECORDS" not in plain.stdout
    assert not (tmp_path / "logs" / "sb_test_records.py").exists()
    result = run_compat([*base("pytest", tmp_path), "--record-tests"])
    assert result.exit_code == 0
    logs = tmp_path / "logs"
    assert (logs / "sb_test_records.py").is_file()
    assert f'SB_TEST_RECORDS="{logs}/llama_auto_test_${{SLURM_JOB_ID}}.tests.jsonl"' in (
        result.stdout
    )
    assert f"--container-mounts=/a:/a,{logs}:{logs}" in result.stdout
    assert "-p sb_test_records${PYTEST_ADDOPTS:+ ${PYTEST_ADDOPTS}}" in result.stdout
