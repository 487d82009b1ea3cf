"""The one-node Slurm harness itself: directives, pyxis stand-in, pmix, exit codes, --test-only."""

from __future__ import annotations

import os
import shlex
import textwrap
from pathlib import Path

import pytest

from tests.slurm_cluster.cluster import SbatchError, SlurmCluster, read_jsonl

pytestmark = pytest.mark.slurm

IMAGE = "nvcr.io#nvidia/pytorch:24.01-py3"
AWKWARD_ARGS = [
    "plain",
    "two words",
    "it's",
    'say "hi"',
    "$HOME",
    "${PATH}",
    "`id`",
    "$(id)",
    "back\\slash",
    "new\nline",
    "tab\there",
    "",
    "*",
    "a && b",
    "a;b|c",
    "--flag=x y",
    "-k 'a and not b'",
    "ünïcödé",
    "!bang",
    "#hash",
    "~",
]


def write_script(path: Path, body: str, *, directives: list[str]) -> Path:
    """A batch script: shebang, the #SBATCH lines, then the body."""
    lines = ["#!/bin/bash", *(f"#SBATCH {d}" for d in directives), textwrap.dedent(body)]
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o755)
    return path


def standard_directives(
    tmp_path: Path, name: str, *extra: str, ntasks: int = 1, partition: str = "gpu"
) -> list[str]:
    return [
        f"--job-name={name}",
        f"--partition={partition}",
        "--nodes=1",
        f"--ntasks={ntasks}",
        "--time=00:05:00",
        f"--output={tmp_path}/{name}_%j.out",
        f"--error={tmp_path}/{name}_%j.err",
        *extra,
    ]


def test_container_options_argv_and_workdir(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    workdir = tmp_path / "project dir"
    workdir.mkdir()
    src_a = tmp_path / "models"
    src_a.mkdir()
    src_b = tmp_path / "data"
    src_b.mkdir()
    mounts = f"{src_a}:/ctr/models,{src_b}:/ctr/data:ro,{tmp_path}"
    container = [
        f"--container-image={IMAGE}",
        "--container-name=harness_ctr",
        f"--container-mounts={mounts}",
        f"--container-workdir={workdir}",
        "--container-env=LLM_MODELS_ROOT,HF_HOME",
    ]
    inner = shlex.join(["record-argv", *AWKWARD_ARGS])
    install = shlex.join(["srun", "-l", "--ntasks=1", *container, "pip", "install", "-e", "."])
    # second step reuses the named container without an image, as pyxis allows
    reuse = shlex.join(
        [
            "srun",
            "-l",
            "--ntasks=1",
            "--container-name=harness_ctr",
            f"--container-mounts={mounts}",
            f"--container-workdir={workdir}",
            "--kill-on-bad-exit=1",
            "bash",
            "-c",
            inner,
        ]
    )
    script = write_script(
        tmp_path / "job.sh",
        f"""\
        echo "batch step on $(hostname)"
        {install}
        {reuse}
        """,
        directives=standard_directives(tmp_path, "harness_a"),
    )
    result = slurm_cluster.submit(script)
    assert result.ok, result.describe()
    assert result.stdout_path == tmp_path / f"harness_a_{result.job_id}.out"
    assert result.stderr_path == tmp_path / f"harness_a_{result.job_id}.err"
    assert "batch step on" in result.stdout()

    records = result.tool_records()
    assert [r["tool"] for r in records] == ["pip", "record-argv"]
    argv_rec = records[1]
    assert argv_rec["argv"][1:] == AWKWARD_ARGS
    assert [bytes.fromhex(h) for h in argv_rec["argv_hex"][1:]] == [
        os.fsencode(a) for a in AWKWARD_ARGS
    ]
    assert argv_rec["cwd"] == str(workdir)
    assert argv_rec["env"]["PWD"] == str(workdir)
    assert records[0]["argv"][1:] == ["install", "-e", "."]
    assert records[0]["cwd"] == str(workdir)

    steps = [s for s in result.steps if s["event"] == "task"]
    assert [s["step_id"] for s in steps] == [0, 1]
    first, second = steps
    assert first["container_image"] == IMAGE
    assert first["container_name"] == "harness_ctr"
    assert first["container_mounts"] == mounts
    assert first["container_workdir"] == str(workdir)
    assert first["container_env"] == "LLM_MODELS_ROOT,HF_HOME"
    assert first["container_name_reused"] is False
    assert first["cwd"] == str(workdir)
    assert first["argv"] == ["pip", "install", "-e", "."]
    assert second["container_image"] is None
    assert second["container_name_reused"] is True
    assert second["argv"] == ["bash", "-c", inner]
    assert second["task_rank"] == 0


def test_pmix_two_tasks_get_ranks(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    script = write_script(
        tmp_path / "pmix.sh",
        """\
        srun -l --mpi=pmix --ntasks=2 --ntasks-per-node=2 bash -c 'record-argv rank "$PMIX_RANK"'
        """,
        directives=standard_directives(tmp_path, "harness_pmix", ntasks=2),
    )
    result = slurm_cluster.submit(script)
    assert result.ok, result.describe()
    records = result.tool_records()
    assert sorted(r["env"]["PMIX_RANK"] for r in records) == ["0", "1"]
    assert sorted(r["env"]["SLURM_PROCID"] for r in records) == ["0", "1"]
    assert sorted(r["argv"][2] for r in records) == ["0", "1"]
    assert sorted(s["task_rank"] for s in result.steps) == [0, 1]


@pytest.mark.parametrize("code", [0, 1, 3, 42])
def test_exit_codes_come_back(slurm_cluster: SlurmCluster, tmp_path: Path, code: int) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "x.py").write_text("def test_x():\n    pass\n")  # pytest finds it
    script = write_script(
        tmp_path / "rc.sh",
        """\
        srun --ntasks=1 pytest -q tests/x.py
        rc=$?
        echo "Job finished with exit code $rc"
        exit $rc
        """,
        directives=standard_directives(tmp_path, "harness_rc"),
    )
    result = slurm_cluster.submit(script, env_extra={"STANDIN_EXIT_CODE": str(code)})
    assert result.exit_code == code, result.describe()
    assert result.state == ("COMPLETED" if code == 0 else "FAILED"), result.describe()
    assert f"Job finished with exit code {code}" in result.stdout()
    assert [r["tool"] for r in result.tool_records()] == ["pytest"]


def test_syntax_error_fails(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    script = write_script(
        tmp_path / "broken.sh",
        """\
        echo start
        if then fi
        """,
        directives=standard_directives(tmp_path, "harness_syntax"),
    )
    result = slurm_cluster.submit(script)
    assert result.state == "FAILED", result.describe()
    assert result.exit_code != 0
    assert "syntax error" in result.stderr()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--container-image=img", "--container-mounts=/no/such/dir:/x"], "/no/such/dir"),
        (["--container-image=img", "--container-workdir=/no/such/workdir"], "/no/such/workdir"),
        (["--container-image=/no/such/image.sqsh"], "/no/such/image.sqsh"),
        (["--container-name=never_created"], "never_created"),
        (["--container-mounts=/tmp:/tmp"], "without --container-image"),
        (["--container-image=img", "--container-mounts=/tmp:"], "invalid format"),
        (["--container-image=img", "--container-name=a/b"], "invalid name"),
        (
            ["--container-image=urm.nvidia.com/sw-tensorrt-docker/x:tag-1"],
            "https://registry-1.docker.io/v2/urm.nvidia.com/sw-tensorrt-docker/x/manifests/tag-1"
            " returned error code: 401",
        ),
        (["--container-image=localhost/x"], "registry-1.docker.io/v2/localhost/x/manifests/latest"),
        (["--container-image=localhost:5000/x"], "Invalid image reference"),
        (["--container-image=nvcr.io#nvidia/Upper"], "Invalid image reference"),
    ],
    ids=[
        "missing-mount-source",
        "missing-workdir",
        "missing-squashfs",
        "unknown-name",
        "no-image",
        "empty-mount-destination",
        "slash-in-name",
        "registry-without-hash",
        "localhost-without-hash",
        "registry-port-without-hash",
        "upper-case-image",
    ],
)
def test_pyxis_checks_fail_the_step(
    slurm_cluster: SlurmCluster, tmp_path: Path, options: list[str], message: str
) -> None:
    srun = shlex.join(["srun", "--ntasks=1", *options, "record-argv", "should-not-run"])
    script = write_script(
        tmp_path / "bad_step.sh",
        f"""\
        {srun}
        """,
        directives=standard_directives(tmp_path, "harness_bad_step"),
    )
    result = slurm_cluster.submit(script)
    assert result.state == "FAILED", result.describe()
    assert result.exit_code != 0
    assert result.tool_records() == []
    assert "pyxis:" in result.stderr() and message in result.stderr(), result.describe()
    rejected = [s for s in result.steps if s["event"] == "rejected"]
    if "invalid" in message:
        # format errors stop srun itself, before any step reaches the node
        assert result.steps == []
    else:
        assert len(rejected) == 1 and message in rejected[0]["error"], result.steps


ENROOT_IMAGES = [
    "urm.nvidia.com#sw-tensorrt-docker/x:tag-1",
    "localhost:5000#team/x",
    "$oauthtoken@nvcr.io#nvidia/pytorch:24.01-py3",
    "nvidia/cuda:12.4.0-base",
    "ubuntu",
]


@pytest.mark.parametrize("image", ENROOT_IMAGES)
def test_pyxis_accepts_enroot_image_references(
    slurm_cluster: SlurmCluster, tmp_path: Path, image: str
) -> None:
    srun = shlex.join(["srun", "--ntasks=1", f"--container-image={image}", "record-argv", "ran"])
    script = write_script(
        tmp_path / "good_image.sh",
        f"{srun}\n",
        directives=standard_directives(tmp_path, "harness_image"),
    )
    result = slurm_cluster.submit(script)
    assert result.ok, result.describe()
    assert [r["argv"][1:] for r in result.tool_records()] == [["ran"]]
    assert [s["container_image"] for s in result.steps] == [image]


def test_test_only_accepts_valid_rejects_bad_partition(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    good = write_script(
        tmp_path / "good.sh",
        "srun true\n",
        directives=standard_directives(tmp_path, "harness_t"),
    )
    accepted = slurm_cluster.test_only(good)
    assert accepted.returncode == 0, accepted.stderr
    assert "to start at" in accepted.stderr

    bad = write_script(
        tmp_path / "bad.sh",
        "srun true\n",
        directives=standard_directives(tmp_path, "harness_t", partition="nosuch"),
    )
    rejected = slurm_cluster.test_only(bad)
    assert rejected.returncode != 0
    assert "partition" in rejected.stderr.lower(), rejected.stderr
    with pytest.raises(SbatchError, match="partition"):
        slurm_cluster.submit(bad)


def test_gres_gpu_on_gpu_partition(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    assert slurm_cluster.partitions["gpu"] == "gpu"
    script = write_script(
        tmp_path / "gres.sh",
        """\
        srun --ntasks=1 nvidia-smi -L
        """,
        directives=standard_directives(tmp_path, "harness_gres", "--gres=gpu:4"),
    )
    assert slurm_cluster.test_only(script).returncode == 0
    result = slurm_cluster.submit(script)
    assert result.ok, result.describe()
    (record,) = result.tool_records()
    assert record["tool"] == "nvidia-smi"
    assert len(record["env"]["CUDA_VISIBLE_DEVICES"].split(",")) == 4
    assert "GPU 7:" in result.stdout()

    too_many = write_script(
        tmp_path / "gres9.sh",
        "srun true\n",
        directives=standard_directives(tmp_path, "harness_gres9", "--gres=gpu:9"),
    )
    assert slurm_cluster.test_only(too_many).returncode != 0


def test_cpu_partition_and_tools_on_path(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    directives = standard_directives(
        tmp_path, "harness_cpu", partition=slurm_cluster.partitions["cpu"]
    )
    script = write_script(
        tmp_path / "cpu.sh",
        """\
        for t in nvidia-smi pip trtllm-llmapi-launch trtllm-eval trtllm-bench pytest record-argv; do
            command -v "$t" || exit 9
        done
        srun --ntasks=1 trtllm-llmapi-launch trtllm-bench --model m throughput --tp 1
        srun --ntasks=1 trtllm-eval --model m gsm8k
        """,
        directives=directives,
    )
    result = slurm_cluster.submit(script, env_extra={"STANDIN_EXIT_CODE_TRTLLM_EVAL": "5"})
    assert result.exit_code == 5, result.describe()
    assert result.info["Partition"] == "cpu"
    tools = [r["tool"] for r in result.tool_records()]
    assert tools == ["trtllm-llmapi-launch", "trtllm-bench", "trtllm-eval"]
    assert result.tool_records()[1]["argv"][1:] == ["--model", "m", "throughput", "--tp", "1"]


def test_persistent_mode_runs_script_in_allocation(
    slurm_cluster: SlurmCluster, tmp_path: Path, standin_record: Path
) -> None:
    script = write_script(
        tmp_path / "persistent.sh",
        """\
        echo "job=$SLURM_JOB_ID"
        srun --ntasks=1 --container-image=img record-argv inside
        """,
        directives=standard_directives(tmp_path, "harness_persistent"),
    )
    done = slurm_cluster.run_in_allocation(
        script, "--partition=gpu", "--ntasks=1", record_file=standin_record
    )
    assert done.returncode == 0, done.stderr
    (record,) = read_jsonl(standin_record)
    assert record["argv"][1:] == ["inside"]
    assert f"job={record['env']['SLURM_JOB_ID']}" in done.stdout
