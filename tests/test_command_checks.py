"""Commands, environments and task counts that cannot run are refused at build time.

Each refusal is exit 2 with one line naming the field and the fix, through the
API and ``scriptbuilder build``, and work_dir is left as it was.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from scriptbuilder.errors import BuildError
from scriptbuilder.inputs.command_check import (
    CUSTOM_COMMAND_BYTES,
    MAX_COMMAND_BYTES,
    bash_syntax_error,
    check_command,
    check_counts,
    check_custom_env,
)
from tests.build_env import SLURM_ENV, BuildEnv
from tests.test_build_perf import DISAGG
from tests.test_build_stops import cli_refusal, snapshot_tree

UNPARSABLE = [
    "pytest -k 'a and not b",
    'pytest -k "a',
    "echo $(date",
    "echo `date",
    "echo ${HOME",
    "pytest x &&",
    "&& pytest x",
    "pytest x | | y",
    "if true; then pytest x",
    "pytest x )",
    "case x in",
    "pytest x ;; y",
]
PARSABLE = [
    "pytest -k 'a and not b'",
    "a && b || c; d & e |& f",
    "pytest x;",
    "pytest x &",
    "echo }",
    "echo { a,b }",
    "A=1 pytest",
    "! pytest x",
    "if true; then pytest x; fi",
    "echo $'\\r' \"$(date)\"",
    "pytest x # trailing comment with ' quote",
]


@pytest.mark.parametrize("command", UNPARSABLE)
def test_bash_refuses(command: str) -> None:
    assert bash_syntax_error(command) is not None


@pytest.mark.parametrize("command", PARSABLE)
def test_bash_accepts(command: str) -> None:
    assert bash_syntax_error(command) is None


def test_parsing_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    assert bash_syntax_error(f"touch {marker}; echo $(touch {marker}x) 'open") is not None
    assert bash_syntax_error(f"touch {marker}; echo $(touch {marker}x)") is None
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("", "test_cmd is empty; give the command to run"),
        ("  \n ", "test_cmd is empty"),
        ("# pytest -v x.py", "test_cmd is empty (nothing but comments); give the command"),
        ("# a\n  # b ; c\n", "test_cmd is empty (nothing but comments)"),
        ("pytest a\0b", "NUL"),
        ("pytest 'a", "is not a command bash can run (unexpected EOF while looking for"),
        ("x" * (MAX_COMMAND_BYTES + 1), f"carries at most {MAX_COMMAND_BYTES}"),
    ],
)
def test_check_command_messages(command: str, message: str) -> None:
    with pytest.raises(BuildError) as caught:
        check_command("test_cmd", command)
    text = str(caught.value)
    assert message in text
    assert "\n" not in text and len(text) < 400


@pytest.mark.parametrize(
    "value", ["", "A=1", "A=1 B='x y'", 'A="$(hostname)" B=2', "A=1\nB=2", "_X1=a\\ b"]
)
def test_custom_env_of_assignments(value: str) -> None:
    check_custom_env("custom_env", value)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("A='x y", "cannot be read by bash"),
        ("A=1 echo hi", "'echo' is not one"),
        ("A=1; rm -rf x", "';' is not one"),
        ("1A=2", "'1A=2' is not one"),
        ("'A'=1", "is not one"),
    ],
)
def test_custom_env_refused(value: str, message: str) -> None:
    with pytest.raises(BuildError, match="custom_env") as caught:
        check_custom_env("custom_env", value)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("nodes", "ntasks", "partition", "message"),
    [
        (100_000, 100_000, None, "more nodes than a Slurm job is given"),
        (1, 513, None, "more than 512 tasks on each of 1 node"),
        (5, 5, "gpu", "partition gpu has 4 node(s) (slurm_env.json); use partition cpu"),
        (9, 9, "unknown", "no partition in slurm_env.json has that many nodes"),
    ],
)
def test_counts_refused(nodes: int, ntasks: int, partition: str | None, message: str) -> None:
    partitions = [("gpu", "4"), ("cpu", "8"), ("odd", "n/a")]
    with pytest.raises(BuildError) as caught:
        check_counts(nodes, ntasks, partition=partition, partitions=partitions)
    assert message in str(caught.value)


def test_counts_accepted() -> None:
    check_counts(4, 32, partition="gpu", partitions=[("gpu", "4")])
    check_counts(2, 2, partition="gpu", partitions=[("gpu", None)])
    check_counts(3, 3)


# ----- through the API and `scriptbuilder build` --------------------------------------------

REFUSALS: list[tuple[str, str, dict[str, Any], str]] = [
    ("custom-quote", "custom", {"custom_cmd": "echo 'unbalanced"}, "custom_cmd"),
    ("custom-empty-subst", "custom", {"custom_cmd": "echo $(date"}, "custom_cmd"),
    ("custom-env-quote", "custom", {"custom_env": "A='x y"}, "custom_env"),
    ("custom-env-command", "custom", {"custom_env": "A=1 echo hi"}, "custom_env"),
    (
        "custom-too-long",
        "custom",
        {"custom_cmd": "echo " + "x" * CUSTOM_COMMAND_BYTES},
        "CUSTOM_COMMAND environment variable",
    ),
    ("pytest-quote", "pytest", {"test_cmd": 'pytest -k "a'}, "test_cmd"),
    ("pytest-nul", "pytest", {"test_cmd": "pytest a\0"}, "NUL"),
    ("eval-subst", "eval", {"eval_cmd": "trtllm-eval --model /m gsm8k $(x"}, "eval_cmd"),
    ("bench-quote", "bench", {"bench_cmd": "trtllm-bench --model m throughput '"}, "bench_cmd"),
    (
        "pytest-too-long",
        "pytest",
        {"test_cmd": "pytest " + "x" * MAX_COMMAND_BYTES},
        f"carries at most {MAX_COMMAND_BYTES}",
    ),
]


@pytest.mark.parametrize(
    ("workflow", "changes", "message"),
    [r[1:] for r in REFUSALS],
    ids=[r[0] for r in REFUSALS],
)
def test_refused(
    build_env: BuildEnv, tmp_path: Path, workflow: str, changes: dict[str, Any], message: str
) -> None:
    line = cli_refusal(tmp_path, build_env.work_dir, build_env.request(workflow, **changes))
    assert message in line
    assert len(line) < 500


def test_perf_job_needing_more_nodes_than_the_partition_is_refused(
    build_env: BuildEnv, tmp_path: Path
) -> None:
    partitions = [dict(p, nodes="1") if p["name"] == "gpu" else p for p in SLURM_ENV["partitions"]]
    build_env.slurm_env(partitions=partitions)
    config = tmp_path / DISAGG.name
    shutil.copy(DISAGG, config)
    request = build_env.request("benchmark", perf_config_yaml=str(config), model_name="demo")
    before = snapshot_tree(build_env.work_dir)
    with pytest.raises(BuildError) as caught:
        build_env.build(request)
    assert str(caught.value).startswith("node_count = 2, but partition gpu has 1 node(s)")
    assert snapshot_tree(build_env.work_dir) == before
