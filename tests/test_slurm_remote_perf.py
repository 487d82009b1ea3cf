"""remote_slurm perf-sanity end to end, with TensorRT-LLM's real submit.py and launch
scripts (``/work/shared/fixtures/trtllm-perf``, copied into temporary checkouts).

The "cluster" is a folder of this machine reached through the real sshd on loopback,
and its Slurm the real one-node test Slurm. The local side is a second checkout and
the work_dir; the build runs in a mount namespace where the cluster folder is hidden
under an empty tmpfs, so it can neither read the cluster's files nor leave any there:
submit.py must run on the login node, and everything the job reads must reach the
cluster by ssh. The job then runs the launch script's steps (install, pytest) with the
GPU tools and pytest stood in, and ``watch`` gives the verdict.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.build_env import REAL_FILES
from tests.slurm_cluster.cluster import SlurmCluster, tools_dir
from tests.slurm_cluster.fixtures import _in_ci
from tests.ssh_server.server import SshServer
from tests.test_slurm_jobs import cluster_slurm_env

FIXTURES = Path("/work/shared/fixtures/trtllm-perf")
pytestmark = [
    pytest.mark.slurm,
    pytest.mark.skipif(not FIXTURES.is_dir(), reason=f"{FIXTURES} (TensorRT-LLM's files) missing"),
]
AGGREGATED = "tests/scripts/perf-sanity/aggregated"
#: One GPU, one node: the test id's config, used as it is.
LLAMA, LLAMA_SERVER = "llama3_1_8b_fp8_ad_hopper", "llama3_1_8b_ad_ws1_1k1k"
#: Two ranks through trtllm-llmapi-launch: the config file, sized for 2-GPU nodes.
GPT_OSS, GPT_OSS_SERVER = "gpt_oss_120b_fp4_blackwell", "gpt_oss_fp4_tp2_mtp0_1k1k"
PERF_TEST = "tests/integration/defs/perf/test_perf_sanity.py"
SUCCESS = "Aggregated test completed successfully"
#: What TensorRT-LLM's slurm_install.sh sources for retry_command.
BASH_UTILS = 'retry_command() {\n    "$@"\n}\n'


def checkout(root: Path) -> Path:
    """A TensorRT-LLM-like checkout holding the real perf-sanity files."""
    repo = root / "TensorRT-LLM"
    shutil.copytree(FIXTURES / "jenkins", repo / "jenkins", ignore=shutil.ignore_patterns("*.md"))
    shutil.copytree(FIXTURES / "tests", repo / "tests")
    shutil.copy(REAL_FILES / "current_image_tags.properties", repo / "jenkins")
    (repo / "jenkins" / "scripts" / "bash_utils.sh").write_text(BASH_UTILS)
    (repo / PERF_TEST).parent.mkdir(parents=True)
    (repo / PERF_TEST).write_text("def test_e2e():\n    pass\n")
    launcher = repo / "tensorrt_llm" / "llmapi" / "trtllm-llmapi-launch"
    launcher.parent.mkdir(parents=True)
    launcher.symlink_to(tools_dir() / "trtllm-llmapi-launch")
    return repo


def tree(root: Path, skip: Path) -> set[str]:
    """Every path under ``root`` but those under ``skip``."""
    found = set()
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        if here == skip or skip in here.parents:
            dirs[:] = []
            continue
        found |= {str(here / name) for name in [*dirs, *files]}
    return found


@dataclass
class Site:
    """The local side (``local``: checkout, work_dir, home) and the cluster folder."""

    root: Path
    local: Path
    cluster: Path
    work_dir: Path
    remote_work_dir: Path
    server: SshServer
    slurm: SlurmCluster

    def ssh_flags(self) -> list[str]:
        return [f for o in self.server.options() for f in ("--ssh-option", o)]

    def request(self, **fields: Any) -> dict[str, Any]:
        return {
            "workflow_type": "perf_sanity",
            "execution_scenario": "remote_slurm",
            "work_dir": str(self.work_dir),
            "repo_root": str(self.local / "TensorRT-LLM"),
            "remote_repo_path": str(self.cluster / "TensorRT-LLM"),
            "remote_work_dir": str(self.remote_work_dir),
            "partition": self.slurm.partitions["gpu"],
            "account": "acct",
            "models_path": str(self.cluster / "models"),
            "time_limit": "00:10:00",
            **fields,
        }

    def cli(self, *args: str, hidden: bool = False) -> subprocess.CompletedProcess[str]:
        """``scriptbuilder ARGS`` here; ``hidden``: with the cluster folder hidden under
        an empty tmpfs, whose entries (anything the command left there) follow a
        ``--- hidden ---`` line on stdout."""
        argv = [sys.executable, "-m", "scriptbuilder", *args]
        if hidden:
            script = (
                'mount -t tmpfs scriptbuilder-test "$1" || exit 99; c=$1; shift; "$@"; rc=$?; '
                'echo "--- hidden ---"; find "$c" -mindepth 1; exit $rc'
            )
            argv = ["unshare", "--mount", "--", "sh", "-c", script, "sh", str(self.cluster), *argv]
        env = {**os.environ, "HOME": str(self.local / "home")}
        return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)

    def build(self, request: dict[str, Any]) -> tuple[subprocess.CompletedProcess[str], str]:
        """Build with the cluster hidden; the result and what it left in the hidden folder."""
        path = self.local / "request.json"
        path.write_text(json.dumps(request))
        before = tree(self.root, self.cluster)
        done = self.cli("build", str(path), "--explain", *self.ssh_flags(), hidden=True)
        assert "--- hidden ---" in done.stdout, done.stderr
        created = tree(self.root, self.cluster) - before
        outside = sorted(p for p in created if not p.startswith(f"{self.work_dir}/"))
        assert outside == [], f"created outside work_dir: {outside}"
        out, _, left = done.stdout.partition("--- hidden ---\n")
        done.stdout = out
        return done, left


@pytest.fixture
def site(ssh_server: SshServer, slurm_cluster: SlurmCluster, tmp_path: Path) -> Iterator[Site]:
    local, cluster = tmp_path / "local", tmp_path / "cluster"
    cluster.mkdir()
    hide = ["unshare", "--mount", "--", "mount", "-t", "tmpfs", "scriptbuilder-test", str(cluster)]
    try:
        hidden = subprocess.run(hide, capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        hidden = subprocess.CompletedProcess(hide, 127, "", "unshare (util-linux) is missing")
    if hidden.returncode != 0:
        if _in_ci():
            pytest.fail(f"cannot hide a folder in a mount namespace: {hidden.stderr}")
        pytest.skip(f"cannot hide a folder in a mount namespace: {hidden.stderr.strip()}")
    for side in (local, cluster):
        checkout(side)
    (local / "home").mkdir()
    (cluster / "models").mkdir()
    work_dir = local / "work"
    work_dir.mkdir()
    env = {
        **cluster_slurm_env(slurm_cluster),
        "ssh_host": ssh_server.host,
        "slurm_user": ssh_server.user,
        "remote_cwd": str(cluster),
    }
    (work_dir / "slurm_env.json").write_text(json.dumps(env))
    remote_work_dir = cluster / "TensorRT-LLM" / "work_dirs" / "perf"
    yield Site(tmp_path, local, cluster, work_dir, remote_work_dir, ssh_server, slurm_cluster)


def run_to_verdict(site: Site) -> tuple[dict[str, Any], str]:
    """Submit the build over ssh and watch it: the verdict and the job's log."""
    submitted = site.cli("submit", str(site.work_dir), *site.ssh_flags())
    assert submitted.returncode == 0, submitted.stderr
    record = json.loads(submitted.stdout)
    watched = site.cli("watch", str(site.work_dir), "--interval", "1s", "--timeout", "240s")
    verdict: dict[str, Any] = json.loads(watched.stdout)
    log = Path(record["stdout_path"])
    assert log.parent == site.remote_work_dir, record
    text = log.read_text(errors="replace") if log.is_file() else "(no log)"
    assert watched.returncode == 0, f"{verdict}\n{text[-4000:]}"
    return verdict, text


def pytest_runs(log: str) -> list[str]:
    """The pytest commands the launch script's ranks ran (slurm_run.sh traces them)."""
    return [
        line
        for line in log.splitlines()
        if re.match(r"\++ (\S*/trtllm-llmapi-launch )?pytest -v ", line)
    ]


def test_remote_perf_sanity_by_test_id(site: Site) -> None:
    test_id = f"perf/test_perf_sanity.py::test_e2e[aggr-{LLAMA}-{LLAMA_SERVER}]"
    done, left = site.build(site.request(test_cmd=f"pytest '{test_id}'", model_name="llama"))
    assert done.returncode == 0, done.stderr
    assert left == ""  # nothing written on the cluster from here
    assert "submit.py runs" in done.stdout and "nothing (the cluster's config)" in done.stdout
    spec = json.loads((site.work_dir / "job_spec.json").read_text())
    launch = site.work_dir / "slurm_launch.sh"
    assert spec["script_path"] == str(launch)
    # submit.py ran on the cluster: its files are there, the launch script came back
    remote = site.remote_work_dir
    assert (remote / "test_list.txt").read_text() == f"{test_id}\n"
    assert launch.read_bytes() == (remote / "slurm_launch.sh").read_bytes()
    text = launch.read_text()
    cluster_repo = site.cluster / "TensorRT-LLM"
    assert f"export configYamlPath='{cluster_repo / AGGREGATED / LLAMA}.yaml'" in text
    assert f"export jobWorkspace='{remote}'" in text
    assert (
        (site.work_dir / "submit_py.log")
        .read_text()
        .startswith(f"# on ssh {site.server.user}@{site.server.host}\n")
    )

    verdict, log = run_to_verdict(site)
    assert verdict["verdict"] == "PASSED", verdict
    assert SUCCESS in log
    (run,) = pytest_runs(log)
    assert f"--test-list={remote}/test_list.txt" in run


def test_remote_perf_sanity_by_config_file(site: Site) -> None:
    config = yaml.safe_load((FIXTURES / AGGREGATED / f"{GPT_OSS}.yaml").read_text())
    config["hardware"]["gpus_per_node"] = 2  # the test node has 2 CPUs
    local_config = site.local / f"{GPT_OSS}.yaml"
    local_config.write_text(yaml.safe_dump(config))
    request = site.request(
        workflow_type="benchmark",
        perf_config_yaml=str(local_config),
        perf_test_name=GPT_OSS_SERVER,
        model_name="gpt_oss",
    )
    done, left = site.build(request)
    assert done.returncode == 0, done.stderr
    assert left == ""
    remote = site.remote_work_dir
    sent = remote / local_config.name
    assert sent.read_text() == local_config.read_text()  # the config travelled
    assert f"export configYamlPath='{sent}'" in (site.work_dir / "slurm_launch.sh").read_text()

    verdict, log = run_to_verdict(site)
    assert verdict["verdict"] == "PASSED", verdict
    runs = pytest_runs(log)
    assert len(runs) == 2, log[-3000:]  # tp2: two ranks
    assert all(f"--test-list={remote}/test_list.txt" in run for run in runs), runs
    # the stand-in pytest found the config there (it ends "no tests ran" otherwise)
    assert log.count(f"++ AGG_CONFIG_FOLDER={remote}\n") == 2, log[-3000:]


def test_failing_submit_py_on_the_cluster_stops_the_build(site: Site) -> None:
    """The cluster's checkout lacks the config a test id names: submit.py fails there."""
    (site.cluster / "TensorRT-LLM" / AGGREGATED / f"{LLAMA}.yaml").unlink()
    test_id = f"perf/test_perf_sanity.py::test_e2e[aggr-{LLAMA}-{LLAMA_SERVER}]"
    done, _ = site.build(site.request(test_cmd=f"pytest '{test_id}'", model_name="llama"))
    assert done.returncode == 2, done.stderr
    message = done.stderr.strip()
    assert "\n" not in message, message
    assert "submit.py failed on ssh" in message and "FileNotFoundError: Config file not found" in (
        message
    )
    log = (site.work_dir / "submit_py.log").read_text()
    assert "Traceback (most recent call last)" in log and "--- exit code 1 ---" in log
    assert not (site.work_dir / "job_spec.json").exists()
    assert not (site.work_dir / "slurm_launch.sh").exists()
