"""A sandbox for build tests: a TensorRT-LLM-like checkout, a work_dir holding
slurm_env.json, a home folder, and a request with sensible defaults."""

from __future__ import annotations

import copy
import json
import re
import shutil
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from scriptbuilder.api import BuiltJob, build

DATA = Path(__file__).resolve().parent / "data"
TRTLLM_REPO = DATA / "trtllm_repo"
REAL_FILES = DATA / "trtllm"
FIXED_CLOCK = datetime(2026, 1, 2, 3, 4, 5)

SLURM_ENV: dict[str, Any] = {
    "user": "alice",
    "default_account": "acct",
    "accounts": ["acct"],
    "default_partition": "gpu",
    "partitions": [
        {
            "name": "gpu",
            "state": "up",
            "time_limit": "04:00:00",
            "nodes": "4",
            "arch": "x86_64",
            "gres": "gpu:8",
            "gpus_per_node": 8,
            "requires_gres": True,
        },
        {
            "name": "arm",
            "state": "up",
            "time_limit": "04:00:00",
            "nodes": "2",
            "arch": "aarch64",
            "gres": "gpu:4(IDX:0-3)",
            "gpus_per_node": 4,
            "requires_gres": True,
        },
        {
            "name": "cpu",
            "state": "up",
            "time_limit": "infinite",
            "nodes": "8",
            "arch": "x86_64",
            "gres": "(null)",
            "gpus_per_node": None,
            "requires_gres": False,
        },
        {
            "name": "big",
            "state": "up",
            "time_limit": "04:00:00",
            "nodes": "1",
            "arch": "x86_64",
            "gres": "gpu:h100:16(S:0-1)",
            "gpus_per_node": None,
            "requires_gres": True,
        },
        {
            "name": "unprobed",
            "state": "up",
            "time_limit": None,
            "nodes": "1",
            "arch": None,
            "gres": None,
            "gpus_per_node": None,
            "requires_gres": False,
        },
    ],
    "pmix": {"available": ["pmix", "pmix_v4", "pmix_v5"], "preferred": "pmix_v5"},
    "errors": [],
    "cluster_name": "testcluster",
    "mounts": [],
    "ssh_host": "login",
    "slurm_user": "alice",
    "remote_cwd": "/home/alice/work",
    "mfa_style": True,
    "probe_extra": {"kept": ["verbatim"]},
}

PYTEST_CMD = (
    "pytest -v 'accuracy/test_llm_api_pytorch.py::TestQwen3_30B_A3B::"
    "test_auto_dtype[tp4-attn_backend=TRTLLM]'"
)
COMMANDS: dict[str, dict[str, Any]] = {
    "pytest": {"test_cmd": PYTEST_CMD, "model_name": "qwen3_30b"},
    "eval": {"eval_cmd": "trtllm-eval --model /models/Llama-3.1-8B-Instruct --tp_size 2 gsm8k"},
    "bench": {
        "bench_cmd": "trtllm-bench --model meta-llama/Llama-3.1-8B prepare-dataset --output "
        "/tmp/d.json token-norm-dist --num-requests 10 && trtllm-bench --model "
        "meta-llama/Llama-3.1-8B throughput --tp 2 --dataset /tmp/d.json"
    },
    "custom": {
        "custom_cmd": 'python3 -c \'print("hi")\' && echo "$HOME"',
        "model_name": "demo",
        "required_devices": 2,
    },
}


@dataclass
class BuildEnv:
    root: Path
    repo: Path
    work_dir: Path
    home: str = "/home/alice"

    def slurm_env(self, **changes: Any) -> Path:
        """Write slurm_env.json (the default one, with ``changes``) into work_dir."""
        env = copy.deepcopy(SLURM_ENV)
        env.update(changes)
        path = self.work_dir / "slurm_env.json"
        path.write_text(json.dumps(env, indent=2))
        return path

    def request(self, workflow: str = "pytest", **fields: Any) -> dict[str, Any]:
        req: dict[str, Any] = {
            "workflow_type": workflow,
            "execution_scenario": "local_slurm",
            "work_dir": str(self.work_dir),
            "repo_root": str(self.repo),
            "partition": "gpu",
            "account": "acct",
            "models_path": "/data/models",
            "llm_models_root": "/models",
            **COMMANDS.get(workflow, {}),
        }
        if fields.get("execution_scenario") == "remote_slurm":
            req["remote_repo_path"] = "/lustre/alice/TensorRT-LLM"
            req["remote_work_dir"] = "/lustre/alice/TensorRT-LLM/work_dirs/work"
        if fields.get("execution_scenario") == "local_docker":
            req["env_check"] = {"gpus_per_node": 8, "available_gpus": 8}
            for key in ("partition", "account"):
                req.pop(key)
        req.update(fields)
        return {k: v for k, v in req.items() if v is not None}

    def build(self, request: dict[str, Any], **kwargs: Any) -> BuiltJob:
        kwargs.setdefault("environ", {"HOME": self.home})
        kwargs.setdefault("machine", lambda: "x86_64")
        kwargs.setdefault("clock", lambda: FIXED_CLOCK)
        return build(request, **kwargs)

    def scrub(self, text: str) -> str:
        """Text with the sandbox paths, and the sha256 of files holding them (in
        job_spec.json), replaced by stable placeholders."""
        text = text.replace(str(self.repo), "<REPO>").replace(str(self.root), "<TMP>")
        return re.sub(r'(": )"[0-9a-f]{64}"', r'\1"<SHA256>"', text)


def make_build_env(tmp_path: Path) -> BuildEnv:
    repo = tmp_path / "TensorRT-LLM"
    shutil.copytree(TRTLLM_REPO, repo)
    work_dir = tmp_path / "work"
    work_dir.mkdir()
    env = BuildEnv(tmp_path, repo, work_dir)
    env.slurm_env()
    return env
