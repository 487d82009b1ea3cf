"""Builds from the orchestrator-shaped fixtures in tests/data/orchestrator/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from scriptbuilder.scenarios.registry import SCENARIOS as SCENARIO_REGISTRY
from tests.build_env import PYTEST_CMD, BuildEnv

FIXTURES = Path(__file__).resolve().parent / "data" / "orchestrator"
SCENARIOS = tuple(SCENARIO_REGISTRY)
#: The workload per workflow, with the counts the orchestrator computed for it.
WORKLOADS: dict[str, dict[str, Any]] = {
    "pytest": {"test_cmd": PYTEST_CMD, "devices": 4},
    "eval": {
        "eval_cmd": "trtllm-eval --model /scratch.trt_llm_data/llm-models/Qwen3-30B-A3B "
        "--tp_size 2 gsm8k",
        "devices": 2,
    },
    "bench": {
        "bench_cmd": "trtllm-bench --model Qwen/Qwen3-30B-A3B throughput --tp 2 "
        "--dataset /tmp/d.json",
        "devices": 2,
    },
    "custom": {
        "custom_cmd": "python3 examples/run.py --x 'a b'",
        "required_devices": 2,
        "devices": 2,
    },
}
REMOTE_HOME = "/home/asmith"


def fixture(name: str, env: BuildEnv, **extra: str) -> Any:
    """A fixture file with the sandbox paths filled in."""
    text = (FIXTURES / name).read_text(encoding="utf-8")
    values = {"@WORK@": str(env.work_dir), "@REPO@": str(env.repo), "@HOME@": env.home, **extra}
    for key, value in values.items():
        text = text.replace(key, value)
    return json.loads(text)


def orchestrator_request(env: BuildEnv, scenario: str, workflow: str) -> dict[str, Any]:
    """The request as the orchestrator sends it, with slurm_env.json and the earlier
    job_spec.json written into work_dir first (as its Steps 2.5 and 3 do)."""
    request = fixture(f"request_{scenario}.json", env, **{"@WORKFLOW@": workflow})
    workload = dict(WORKLOADS[workflow])
    devices = workload.pop("devices")
    request.update(workload)
    request.update(total_required_devices=devices, required_devices_per_node=devices, node_count=1)
    env_file = env.work_dir / "slurm_env.json"
    if scenario == "local_docker":
        env_file.unlink(missing_ok=True)
    else:
        probe = "slurm_env_remote.json" if scenario == "remote_slurm" else "slurm_env_probe.json"
        env_file.write_text((FIXTURES / probe).read_text(encoding="utf-8"))
    earlier = fixture(f"job_spec_{scenario}.json", env)
    (env.work_dir / "job_spec.json").write_text(json.dumps(earlier, indent=2))
    return request


def fake_ssh(calls: list[list[str]]) -> Any:
    """An ssh runner that records its argv and answers like a login host."""

    def run(argv: Any, timeout: float) -> str:
        calls.append(list(argv))
        assert timeout > 0
        return REMOTE_HOME + "\n"

    return run
