"""Every "stop" of the procedure through ``scriptbuilder build``: exit code 2, one
line naming the field and the fix, and the work_dir left exactly as it was."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from scriptbuilder.cli.build import main
from tests.build_env import BuildEnv


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with redirect_stdout(out), redirect_stderr(err):
        try:
            main(argv)
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


def snapshot_tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() if p.is_file() else b"<dir>"
        for p in sorted(root.rglob("*"))
    }


def cli_refusal(tmp_path: Path, work_dir: Path, request: dict[str, Any]) -> str:
    """``scriptbuilder build`` on ``request``: exit 2, nothing on stdout, one error
    line on stderr, ``work_dir`` left exactly as it was; returns the message."""
    request_file = tmp_path / "request.json"
    request_file.write_text(json.dumps(request))
    before = snapshot_tree(work_dir)
    code, out, err = run_cli(["build", str(request_file)])
    assert (code, out) == (2, ""), err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("scriptbuilder: error: "), err
    assert snapshot_tree(work_dir) == before
    return lines[0].removeprefix("scriptbuilder: error: ")


# (id, workflow, request changes, slurm_env changes, text the message must hold)
STOPS: list[tuple[str, str, dict[str, Any], dict[str, Any], str]] = [
    ("unknown-field", "pytest", {"colour": "blue"}, {}, "'colour' is unknown; known fields:"),
    ("missing-workflow_type", "pytest", {"workflow_type": None}, {}, "'workflow_type' is required"),
    ("bad-type", "custom", {"required_devices": "many"}, {}, "'required_devices'"),
    ("bad-scenario", "pytest", {"execution_scenario": "moon"}, {}, "'execution_scenario'"),
    (
        "backslash-remote_work_dir",
        "pytest",
        {"execution_scenario": "remote_slurm", "remote_work_dir": "/lustre/a\\b"},
        {},
        "remote_work_dir '/lustre/a\\\\b' contains a backslash",
    ),
    ("relative-work_dir", "pytest", {"work_dir": "~/rel/dir"}, {}, "work_dir must be an absolute"),
    (
        "partition-missing",
        "pytest",
        {"partition": None},
        {},
        "partition is required for local_slurm: trtllm-case-executor did not run Step 2.5",
    ),
    (
        "account-missing",
        "pytest",
        {"account": None},
        {},
        "account is required for local_slurm: trtllm-case-executor did not run Step 2.5",
    ),
    (
        "partition-unknown",
        "pytest",
        {"partition": "nope"},
        {},
        "partition 'nope' is not in slurm_env.partitions",
    ),
    (
        "no-repo-no-image",
        "pytest",
        {"repo_root": None, "container_image": None},
        {},
        "container_image: not given and repo_root is not set",
    ),
    (
        "models-mount-unresolvable",
        "pytest",
        {"models_path": None},
        {},
        "models mount: none of checkpoint_path, models_path, slurm_env.mounts",
    ),
    ("comma-in-mount", "pytest", {"models_path": "/data/a,b"}, {}, "cannot be mounted"),
    ("colon-in-mount", "custom", {"checkpoint_path": "/d/run:1/m"}, {}, "'/d/run:1' cannot be"),
    (
        "colon-in-repo",
        "eval",
        {"repo_root": "/a:b", "container_image": "i:1"},
        {},
        "project '/a:b'",
    ),
    ("comma-in-root", "bench", {"llm_models_root": "/m,x"}, {}, "llm_models_root '/m,x' cannot"),
    (
        "relative-models_path",
        "pytest",
        {"models_path": "data"},
        {},
        "models_path must be an absolute path",
    ),
    (
        "remote-repo-missing",
        "pytest",
        {"execution_scenario": "remote_slurm", "remote_repo_path": None},
        {},
        "remote_repo_path is required for remote_slurm",
    ),
    (
        "remote-work-dir-missing",
        "pytest",
        {"execution_scenario": "remote_slurm", "remote_work_dir": None},
        {},
        "remote_work_dir is required for remote_slurm",
    ),
    (
        "remote-home-unknown",
        "pytest",
        {"execution_scenario": "remote_slurm"},
        {"remote_cwd": None, "ssh_host": None},
        "home: slurm_env.remote_cwd is not set and no ssh_host is known",
    ),
    ("pytest-test_cmd-missing", "pytest", {"test_cmd": None}, {}, "test_cmd is required"),
    ("pytest-model_name-missing", "pytest", {"model_name": None}, {}, "model_name is required"),
    (
        "pytest-model_name-bad",
        "pytest",
        {"model_name": "a b/c"},
        {},
        "model_name 'a b/c' must start with a letter or digit, then hold only",
    ),
    (
        "pytest-more-than-gpus-per-node",
        "pytest",
        {"partition": "arm", "test_cmd": "pytest -x", "required_devices": 8},
        {},
        "exceeds the 4 GPUs per node of partition arm",
    ),
    (
        "pytest-more-than-8",
        "pytest",
        {"partition": "big", "test_cmd": "pytest -x", "required_devices": 12},
        {},
        "required_devices = 12 exceeds the maximum of 8 GPUs for pytest",
    ),
    ("pytest-node_count", "pytest", {"node_count": 2}, {}, "pytest is always single-node"),
    ("eval-cmd-missing", "eval", {"eval_cmd": None}, {}, "eval_cmd is required"),
    (
        "eval-bad-tp",
        "eval",
        {"eval_cmd": "trtllm-eval --model /m/x --tp_size two gsm8k"},
        {},
        "--tp_size",
    ),
    (
        "bench-multi-node",
        "bench",
        {"bench_cmd": "trtllm-bench --model m throughput --tp 16"},
        {},
        "multi-node trtllm-bench is not supported",
    ),
    (
        "bench-two-and-ands",
        "bench",
        {"bench_cmd": "a && b && trtllm-bench --model m throughput"},
        {},
        "'&&'",
    ),
    (
        "custom-more-than-8",
        "custom",
        {"partition": "big", "required_devices": 9},
        {},
        "required_devices = 9 exceeds the maximum of 8 GPUs for custom commands",
    ),
    (
        "custom-two-nodes",
        "custom",
        {"partition": "arm", "required_devices": 6},
        {},
        "required_devices = 6 requires 2 nodes (gpus_per_node = 4), but custom commands are "
        "limited to 1 node; reduce required_devices to at most 4",
    ),
    (
        "custom-gpus-per-node-unknown",
        "custom",
        {"partition": "cpu"},
        {},
        "gpus_per_node is unknown: slurm_env partition cpu has no gpus_per_node or gres; rerun",
    ),
    ("custom-cmd-missing", "custom", {"custom_cmd": None}, {}, "custom_cmd (or custom_script)"),
    (
        "custom-script-missing",
        "custom",
        {"custom_script": "/no/such/script.sh"},
        {},
        "custom_script /no/such/script.sh does not exist",
    ),
    (
        "docker-gpus-per-node-unknown",
        "custom",
        {"execution_scenario": "local_docker", "env_check": {}},
        {},
        "env_check.gpus_per_node",
    ),
    (
        "docker-perf-sanity",
        "perf_sanity",
        {"execution_scenario": "local_docker"},
        {},
        "needs Slurm",
    ),
    (
        "docker-pytest-perf-sanity",
        "pytest",
        {
            "execution_scenario": "local_docker",
            "test_cmd": "pytest perf/test_perf_sanity.py::test_e2e[aggr-gpt_oss-x]",
        },
        {},
        "a perf-sanity test_cmd needs Slurm",
    ),
]


@pytest.mark.parametrize(
    ("workflow", "changes", "env_changes", "message"),
    [s[1:] for s in STOPS],
    ids=[s[0] for s in STOPS],
)
def test_stop(
    build_env: BuildEnv,
    tmp_path: Path,
    workflow: str,
    changes: dict[str, Any],
    env_changes: dict[str, Any],
    message: str,
) -> None:
    build_env.slurm_env(**env_changes)
    request = build_env.request(workflow, **{k: v for k, v in changes.items()})
    for key, value in changes.items():
        if value is None:
            request.pop(key, None)
    assert message in cli_refusal(tmp_path, build_env.work_dir, request)


@pytest.mark.parametrize(
    ("content", "message"),
    [("{not json: [", "neither JSON nor YAML"), ("[1, 2]", "must hold a mapping")],
)
def test_unreadable_request_file(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "request.yaml"
    path.write_text(content)
    code, _, err = run_cli(["build", str(path)])
    assert code == 2
    assert message in err and len(err.splitlines()) == 1


def test_missing_request_file(tmp_path: Path) -> None:
    code, _, err = run_cli(["build", str(tmp_path / "none.json")])
    assert code == 2
    assert "none.json" in err


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("missing", "is missing: trtllm-case-executor did not run Step 2.5"),
        ("garbage", "is not valid JSON"),
        ("list", "must hold a JSON object"),
    ],
)
def test_slurm_env_unusable(build_env: BuildEnv, tmp_path: Path, setup: str, message: str) -> None:
    env_file = build_env.work_dir / "slurm_env.json"
    if setup == "missing":
        env_file.unlink()
    else:
        env_file.write_text("{oops" if setup == "garbage" else "[]")
    request_file = tmp_path / "request.json"
    request_file.write_text(json.dumps(build_env.request()))
    before = snapshot_tree(build_env.work_dir)
    code, _, err = run_cli(["build", str(request_file)])
    assert code == 2
    assert message in err and "slurm_env_file" in err
    assert snapshot_tree(build_env.work_dir) == before


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (None, "no image tags properties file"),
        ("LLM_DOCKER_IMAGE_12_9=x\n", "has no LLM_DOCKER_IMAGE= line"),
    ],
)
def test_image_unresolvable(
    build_env: BuildEnv, tmp_path: Path, props: str | None, message: str
) -> None:
    props_file = build_env.repo / "jenkins" / "current_image_tags.properties"
    if props is None:
        props_file.unlink()
    else:
        props_file.write_text(props)
    request_file = tmp_path / "request.json"
    request_file.write_text(json.dumps(build_env.request()))
    code, _, err = run_cli(["build", str(request_file)])
    assert code == 2
    assert message in err and "container_image" in err
