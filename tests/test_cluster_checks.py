"""Checks against what slurm_env.json says about the cluster: the time limit (Slurm's
formats, the partition's limit), the account, the partition's state. Each is a stop
from the API and the CLI: one line naming the field and the fix, exit 2, nothing written."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from tests.build_env import SLURM_ENV, BuildEnv
from tests.script_runner import run_compat
from tests.test_build_stops import cli_refusal


def partitions(**changes: dict[str, Any]) -> list[dict[str, Any]]:
    """SLURM_ENV's partitions with per-name field changes."""
    parts = copy.deepcopy(SLURM_ENV["partitions"])
    for part in parts:
        part.update(changes.get(part["name"], {}))
    return parts


# (id, workflow, request changes, slurm_env changes, text the message must hold)
STOPS: list[tuple[str, str, dict[str, Any], dict[str, Any], str]] = [
    (
        "time-words",
        "pytest",
        {"time_limit": "2hours"},
        {},
        "time_limit '2hours' is not a Slurm time limit; write it as MM, MM:SS, HH:MM:SS",
    ),
    ("time-hh-mm", "pytest", {"time_limit": "1:2:3:4"}, {}, "is not a Slurm time limit"),
    (
        "time-above-partition",
        "pytest",
        {"time_limit": "04:00:01"},
        {},
        "time_limit 04:00:01 exceeds the time limit 04:00:00 of partition 'gpu'"
        " (slurm_env.partitions), so Slurm would refuse it or leave it pending; "
        "pass time_limit at most 04:00:00",
    ),
    (
        "time-days-above-partition",
        "custom",
        {"time_limit": "1-00"},
        {},
        "time_limit 1-00 exceeds the time limit 04:00:00",
    ),
    (
        "time-infinite-above-partition",
        "eval",
        {"time_limit": "infinite"},
        {},
        "time_limit infinite exceeds",
    ),
    (
        "time-default-above-partition",
        "pytest",
        {},
        {"partitions": partitions(gpu={"time_limit": "01:00:00"})},
        "time_limit (default) 02:00:00 exceeds the time limit 01:00:00 of partition 'gpu'",
    ),
    (
        "time-perf-above-partition",
        "benchmark",
        {"time_limit": "08:00:00", "perf_config_yaml": "<AGGR>", "perf_test_name": "x"},
        {},
        "time_limit 08:00:00 exceeds",
    ),
    (
        "account-unknown",
        "pytest",
        {"account": "other"},
        {"accounts": ["acct", "acct2"]},
        "account 'other' is not in slurm_env.accounts (known: acct, acct2); pass one of those",
    ),
    (
        "partition-down",
        "pytest",
        {},
        {"partitions": partitions(gpu={"state": "down"})},
        "partition 'gpu' is 'down' in slurm_env.partitions, not up, so the job would stay "
        "pending; pass a partition that is up",
    ),
    (
        "partition-drain",
        "bench",
        {},
        {"partitions": partitions(gpu={"state": "drain"})},
        "partition 'gpu' is 'drain'",
    ),
    (
        "partition-inactive-remote",
        "custom",
        {"execution_scenario": "remote_slurm"},
        {"partitions": partitions(gpu={"state": "inact"})},
        "partition 'gpu' is 'inact'",
    ),
]

# (id, workflow, request changes, slurm_env changes): these build
ACCEPTED: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = [
    ("time-minutes", "pytest", {"time_limit": "30"}, {}),
    ("time-mm-ss", "pytest", {"time_limit": "30:00"}, {}),
    ("time-equal-to-partition", "pytest", {"time_limit": "04:00:00"}, {}),
    ("time-seconds-round-up", "pytest", {"time_limit": "03:59:30"}, {}),
    (
        "time-d-hh-on-infinite",
        "custom",
        {"time_limit": "2-12"},
        {"partitions": partitions(gpu={"time_limit": "infinite"})},
    ),
    (
        "time-unlimited-on-unlimited",
        "custom",
        {"time_limit": "UNLIMITED"},
        {"partitions": partitions(gpu={"time_limit": "UNLIMITED"})},
    ),
    (
        "time-any-when-partition-limit-null",
        "pytest",
        {"time_limit": "7-00:00:00"},
        {"partitions": partitions(gpu={"time_limit": None})},
    ),
    ("accounts-empty", "pytest", {"account": "whatever"}, {"accounts": []}),
    ("state-null", "pytest", {}, {"partitions": partitions(gpu={"state": None})}),
    ("state-upper-case", "pytest", {}, {"partitions": partitions(gpu={"state": "UP"})}),
    ("state-sinfo-star", "pytest", {}, {"partitions": partitions(gpu={"state": "up*"})}),
    (
        "partition-limit-unreadable",
        "pytest",
        {"time_limit": "9-00:00:00"},
        {"partitions": partitions(gpu={"time_limit": "n/a"})},
    ),
    # a down partition that is not the chosen one does not matter
    ("other-partition-down", "pytest", {}, {"partitions": partitions(arm={"state": "down"})}),
    # local_docker reads no slurm_env
    (
        "docker-ignores-slurm-facts",
        "pytest",
        {"execution_scenario": "local_docker", "time_limit": "99:00:00"},
        {"partitions": partitions(gpu={"state": "down"}), "accounts": ["x"]},
    ),
]


def _request(build_env: BuildEnv, workflow: str, changes: dict[str, Any]) -> dict[str, Any]:
    aggr = Path(__file__).parent / "data" / "trtllm" / "gpt_oss_120b_fp4_blackwell.yaml"
    changes = {k: str(aggr) if v == "<AGGR>" else v for k, v in changes.items()}
    return build_env.request(workflow, **changes)


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
    request = _request(build_env, workflow, changes)
    assert message in cli_refusal(tmp_path, build_env.work_dir, request)


@pytest.mark.parametrize(
    ("workflow", "changes", "env_changes"),
    [a[1:] for a in ACCEPTED],
    ids=[a[0] for a in ACCEPTED],
)
def test_accepted(
    build_env: BuildEnv, workflow: str, changes: dict[str, Any], env_changes: dict[str, Any]
) -> None:
    build_env.slurm_env(**env_changes)
    job = build_env.build(_request(build_env, workflow, changes))
    if "time_limit" in changes and changes.get("execution_scenario") != "local_docker":
        assert f"#SBATCH --time={changes['time_limit']}\n" in job.script_text


@pytest.mark.parametrize("value", ["2hours", "1:2:3:4", "02:00:00\n#SBATCH --x", "-1"])
def test_dropin_refuses_a_bad_time_limit(tmp_path: Path, value: str) -> None:
    output = tmp_path / "job.slurm"
    outcome = run_compat(
        [
            "pytest",
            "--model-name",
            "m",
            "--log-dir",
            str(tmp_path / "logs"),
            "--partition",
            "p",
            "--account",
            "a",
            "--time-limit",
            value,
            "--docker-image",
            "img:1",
            "--container-mounts",
            "/a:/a",
            "--project-path",
            "/a",
            "--test-cmd",
            "pytest x",
            "--output",
            str(output),
        ]
    )
    assert (outcome.exit_code, outcome.stdout) == (2, ""), outcome.stderr
    lines = outcome.stderr.splitlines()
    assert len(lines) == 1 and "--time-limit" in lines[0], outcome.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []
