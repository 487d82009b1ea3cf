"""More stops, each through ``scriptbuilder build`` (exit 2, one line, work_dir
unchanged), and one test that the API refuses with the same line as the CLI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scriptbuilder.errors import BuildError
from tests.build_env import BuildEnv
from tests.test_build_stops import STOPS, cli_refusal

WIDE_EVAL = "trtllm-eval --model /models/x --tp_size 4 --pp_size 4 gsm8k"

# (id, workflow, request changes, slurm_env changes, text the message must hold)
EXTRA: list[tuple[str, str, dict[str, Any], dict[str, Any], str]] = [
    (
        "docker-eval-wider-than-node",
        "eval",
        {"execution_scenario": "local_docker", "eval_cmd": WIDE_EVAL},
        {},
        "eval_cmd: world size 16 exceeds the 8 GPUs of this machine",
    ),
    (
        "docker-eval-gpus-per-node-flag",
        "eval",
        {
            "execution_scenario": "local_docker",
            "eval_cmd": "trtllm-eval --model /m/x --tp_size 4 --gpus_per_node 2 gsm8k",
        },
        {},
        "lower --tp_size x --pp_size to at most 2",
    ),
    ("image-blank", "pytest", {"container_image": " "}, {}, "is not an image reference"),
    ("image-space", "pytest", {"container_image": "nvcr.io/a b:1"}, {}, "not an image reference"),
    ("image-registry-only", "pytest", {"container_image": "nvcr.io#"}, {}, "not an image"),
    (
        "image-upper-case-for-pyxis",
        "pytest",
        {"container_image": "nvcr.io/nvidia/PyTorch:24.01"},
        {},
        "container_image 'nvcr.io/nvidia/PyTorch:24.01' cannot be pulled by pyxis: enroot "
        "reads IMAGE[:TAG] with IMAGE in lower-case letters",
    ),
    (
        "image-digest-for-pyxis",
        "custom",
        {"container_image": "nvcr.io/nvidia/x@sha256:" + "0" * 64},
        {},
        "enroot takes no @digest; use a tag",
    ),
    (
        "squashfs-for-docker-run",
        "pytest",
        {"execution_scenario": "local_docker", "container_image": "/images/x.sqsh"},
        {},
        "is a squashfs file, which docker run cannot use",
    ),
    (
        "url-scheme-for-pyxis",
        "bench",
        {"container_image": "docker://nvcr.io/nvidia/x:1"},
        {},
        "cannot be pulled by pyxis: registry 'docker:' is not HOST[:PORT]; write the image",
    ),
    (
        "option-as-docker-image",
        "custom",
        {"execution_scenario": "local_docker", "container_image": "--volume=/:/host"},
        {},
        "'--volume=/:/host' would be read by docker run as an option; pass [REGISTRY/]IMAGE",
    ),
    (
        "perf-config-missing",
        "benchmark",
        {"perf_config_yaml": "/no/such.yaml"},
        {},
        "perf_config_yaml: /no/such.yaml does not exist",
    ),
    ("repo-root-a-file", "pytest", {"repo_root": "/etc/hostname"}, {}, "container_image"),
    ("eval-bad-pp", "eval", {"eval_cmd": "trtllm-eval --pp_size 0 gsm8k"}, {}, "--pp_size"),
    ("bench-bad-tp", "bench", {"bench_cmd": "trtllm-bench --tp x throughput"}, {}, "--tp"),
]


def _request(build_env: BuildEnv, workflow: str, changes: dict[str, Any]) -> dict[str, Any]:
    request = build_env.request(workflow, **changes)
    for key, value in changes.items():
        if value is None:
            request.pop(key, None)
    return request


@pytest.mark.parametrize(
    ("workflow", "changes", "env_changes", "message"),
    [s[1:] for s in EXTRA],
    ids=[s[0] for s in EXTRA],
)
def test_cli_stops(
    build_env: BuildEnv,
    tmp_path: Path,
    workflow: str,
    changes: dict[str, Any],
    env_changes: dict[str, Any],
    message: str,
) -> None:
    build_env.slurm_env(**env_changes)
    assert message in cli_refusal(
        tmp_path, build_env.work_dir, _request(build_env, workflow, changes)
    )


#: One stop of each stage: the request model, the workflow, the scenario, a command's
#: flags, the image.
AGREEMENT = [
    "bad-type",
    "pytest-node_count",
    "remote-repo-missing",
    "eval-bad-pp",
    "image-digest-for-pyxis",
]


@pytest.mark.parametrize("name", AGREEMENT)
def test_api_and_cli_refuse_alike(build_env: BuildEnv, tmp_path: Path, name: str) -> None:
    """``build()`` raises a BuildError (that type, not another) with the one line the
    CLI prints."""
    _, workflow, changes, env_changes, _ = next(s for s in [*STOPS, *EXTRA] if s[0] == name)
    build_env.slurm_env(**env_changes)
    request = _request(build_env, workflow, changes)
    with pytest.raises(BuildError) as caught:
        build_env.build(request)
    assert type(caught.value) is BuildError
    assert cli_refusal(tmp_path, build_env.work_dir, request) == str(caught.value)
