"""One test per rule of the procedure (Steps 1-3 and 5), table-driven where the
rules share a shape. Stops are in test_build_stops.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from scriptbuilder.api import BuiltJob
from scriptbuilder.errors import BuildError
from scriptbuilder.script.render import quote_literal
from scriptbuilder.workflows.registry import WORKFLOWS
from tests.build_env import SLURM_ENV, BuildEnv

PROPS = "jenkins/current_image_tags.properties"
X86 = "x86_64-tritondevel-torch_skip-cca75fa-github-pr-9225-1249"
SBSA = "sbsa-tritondevel-torch_skip-cca75fa-github-pr-9225-1249"


class FakeEnvInfo:
    def __init__(self, arch: str | None = None, models: str | None = None) -> None:
        self._arch, self._models = arch, models

    def arch(self, partition: str | None) -> str | None:
        return self._arch

    def default_models_repo_host(self) -> str | None:
        return self._models


def spec(job: BuiltJob) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(job.job_spec_json)
    return data


# ------------------------------------------------------------------ Step 1: image


@pytest.mark.parametrize(
    ("changes", "env_changes", "machine", "env_info", "expected"),
    [
        pytest.param(
            {"container_image": "my/image:1"},
            {},
            "x86_64",
            None,
            "my/image:1",
            id="container_image-wins",
        ),
        pytest.param({}, {}, "aarch64", None, X86, id="partition-arch-x86_64"),
        pytest.param({"partition": "arm"}, {}, "x86_64", None, SBSA, id="partition-arch-aarch64"),
        pytest.param(
            {"partition": "unprobed"}, {}, "aarch64", None, SBSA, id="arch-null-local-uname"
        ),
        pytest.param(
            {"partition": "unprobed"},
            {},
            "x86_64",
            FakeEnvInfo("aarch64"),
            SBSA,
            id="arch-null-env-info",
        ),
        pytest.param(
            {},
            {"errors": ["SLURM client tools not found"]},
            "aarch64",
            None,
            SBSA,
            id="client-tools-missing-local-uname",
        ),
        pytest.param(
            {"execution_scenario": "remote_slurm", "partition": "unprobed"},
            {},
            "aarch64",
            None,
            X86,
            id="arch-null-remote-default-x86_64",
        ),
        pytest.param(
            {"execution_scenario": "local_docker"}, {}, "aarch64", None, SBSA, id="docker-uname"
        ),
        pytest.param(
            {"execution_scenario": "local_docker"}, {}, "arm64", None, SBSA, id="docker-uname-arm64"
        ),
    ],
)
def test_image(
    build_env: BuildEnv,
    changes: dict[str, Any],
    env_changes: dict[str, Any],
    machine: str,
    env_info: FakeEnvInfo | None,
    expected: str,
) -> None:
    build_env.slurm_env(**env_changes)
    job = build_env.build(build_env.request(**changes), machine=lambda: machine, env_info=env_info)
    assert spec(job)["docker_image"].endswith(expected)


def test_image_key_is_matched_exactly(build_env: BuildEnv) -> None:
    props = build_env.repo / PROPS
    props.write_text("LLM_DOCKER_IMAGE_12_9=wrong:1\nLLM_DOCKER_IMAGE=right:1\n")
    assert spec(build_env.build(build_env.request()))["docker_image"] == "right:1"


def test_image_from_real_properties_file(build_env: BuildEnv) -> None:
    real = Path(__file__).parent / "data" / "trtllm" / "current_image_tags.properties"
    (build_env.repo / PROPS).write_text(real.read_text())
    data = spec(build_env.build(build_env.request()))
    path = "sw-tensorrt-docker/tensorrt-llm-staging/tritondevel:" + X86
    assert data["container_image"] == "urm.nvidia.com/" + path
    assert data["docker_image"] == "urm.nvidia.com#" + path


# ------------------------------------------------------------------ slurm_env


def test_slurm_env_default_path_and_verbatim_embedding(build_env: BuildEnv) -> None:
    data = spec(build_env.build(build_env.request()))
    assert data["slurm_env"] == SLURM_ENV


def test_slurm_env_file_input_wins(build_env: BuildEnv, tmp_path: Path) -> None:
    other = tmp_path / "elsewhere.json"
    other.write_text(json.dumps({**SLURM_ENV, "cluster_name": "other"}))
    data = spec(build_env.build(build_env.request(slurm_env_file=str(other))))
    assert data["slurm_env"]["cluster_name"] == "other"


def test_docker_needs_no_slurm_env(build_env: BuildEnv) -> None:
    (build_env.work_dir / "slurm_env.json").unlink()
    data = spec(build_env.build(build_env.request(execution_scenario="local_docker")))
    assert "slurm_env" not in data


# ------------------------------------------------------------------ Step 2: mounts


@pytest.mark.parametrize(
    ("changes", "env_changes", "env_info", "models"),
    [
        pytest.param(
            {"checkpoint_path": "/ckpt/llama/model-8b", "models_path": "/m"},
            {"mounts": ["/a:/a"]},
            None,
            "/ckpt/llama:/models",
            id="rule1-checkpoint",
        ),
        pytest.param(
            {"models_path": "/m"}, {"mounts": ["/a:/a"]}, None, "/m:/models", id="rule2-models_path"
        ),
        pytest.param(
            {"models_path": None},
            {"mounts": ["/lustre/m:/models", "/t:/t"]},
            None,
            "/lustre/m:/models,/t:/t",
            id="rule3-slurm_env-mounts",
        ),
        pytest.param(
            {"models_path": None, "env_check": {"default_models_repo": "/repo"}},
            {},
            None,
            "/repo:/models",
            id="rule4-env_check",
        ),
        pytest.param(
            {"models_path": None},
            {},
            FakeEnvInfo(models="/info"),
            "/info:/models",
            id="rule4-env-info",
        ),
    ],
)
def test_models_mount(
    build_env: BuildEnv,
    changes: dict[str, Any],
    env_changes: dict[str, Any],
    env_info: FakeEnvInfo | None,
    models: str,
) -> None:
    build_env.slurm_env(**env_changes)
    data = spec(build_env.build(build_env.request(**changes), env_info=env_info))
    repo = str(build_env.repo)
    assert data["container_mounts"] == f"/home/alice:/home/alice,{repo}:{repo},{models}"


def test_remote_paths_in_mounts(build_env: BuildEnv) -> None:
    job = build_env.build(build_env.request(execution_scenario="remote_slurm"))
    assert (
        "--container-mounts=/home/alice:/home/alice,/lustre/alice/TensorRT-LLM:"
        "/lustre/alice/TensorRT-LLM,/data/models:/models" in job.script_text
    )
    assert "--container-workdir=/lustre/alice/TensorRT-LLM " in job.script_text


@pytest.mark.parametrize(("where", "extra"), [("outside", True), ("inside", False)])
def test_custom_script_extra_mount(
    build_env: BuildEnv, tmp_path: Path, where: str, extra: bool
) -> None:
    folder = tmp_path / "scripts" if where == "outside" else build_env.repo / "scripts"
    folder.mkdir()
    script = folder / "run me.sh"
    script.write_text("echo hi\n")
    job = build_env.build(build_env.request("custom", custom_script=str(script), custom_cmd=None))
    assert (f"{folder}:{folder}" in job.script_text) is extra
    command = quote_literal(f"bash {quote_literal(str(script))}")
    assert f"export CUSTOM_COMMAND={command}\n" in job.script_text


# ------------------------------------------------------------------ Step 3: pytest


@pytest.mark.parametrize(
    ("test_cmd", "required", "devices"),
    [
        pytest.param(
            "pytest 'accuracy/test_llm_api_pytorch.py::TestQwen3_30B_A3B::"
            "test_auto_dtype[tp4-attn_backend=TRTLLM]'",
            None,
            4,
            id="param-case-mark",
        ),
        pytest.param(
            "pytest accuracy/test_llm_api_pytorch.py::TestDeepSeekV3Lite::test_fp8_4gpus",
            None,
            4,
            id="function-mark",
        ),
        pytest.param(
            "pytest accuracy/test_llm_api_pytorch.py::TestMixtral8x7B::test_tp2",
            None,
            2,
            id="class-pytestmark",
        ),
        pytest.param(
            "pytest accuracy/test_llm_api_pytorch.py::TestLlama3_1_8BInstruct::test_bfloat16",
            3,
            3,
            id="no-marker-required_devices",
        ),
        pytest.param("pytest -k 'a and b'", None, 1, id="nothing-derivable-default"),
        pytest.param(
            "pytest unittest/_torch/multi_gpu/test_allreduce.py::test_allreduce_default",
            None,
            2,
            id="unittest-gpuN",
        ),
    ],
)
def test_pytest_devices(
    build_env: BuildEnv, test_cmd: str, required: int | None, devices: int
) -> None:
    job = build_env.build(build_env.request(test_cmd=test_cmd, required_devices=required))
    data = spec(job)
    assert data["required_devices"] == devices
    assert data["slurm_params"]["ntasks"] == 1
    assert data["slurm_params"]["nodes"] == 1
    # The cluster's plugin for the executors, while the single-task step runs without MPI.
    assert data["slurm_params"]["mpi_plugin"] == "pmix_v5"
    assert "--mpi" not in job.script_text
    assert "unset" in job.script_text  # MPI variables cleared in the step


def test_pytest_missing_test_file_stops(build_env: BuildEnv) -> None:
    with pytest.raises(BuildError, match=r"test_cmd: test file nowhere/test_x.py not found"):
        build_env.build(build_env.request(test_cmd="pytest nowhere/test_x.py::test_a"))


def test_pytest_missing_test_file_warns_when_allowed(build_env: BuildEnv) -> None:
    request = build_env.request(test_cmd="pytest nowhere/test_x.py::test_a")
    job = build_env.build({**request, "allow_missing_tests": True})
    assert any("nowhere/test_x.py" in w and "allow_missing_tests" in w for w in job.warnings)
    assert spec(job)["required_devices"] == 1


# ------------------------------------------------------------------ Step 3: eval


@pytest.mark.parametrize(
    ("eval_cmd", "devices", "model"),
    [
        ("trtllm-eval --model /models/Llama-3.1-8B-Instruct gsm8k", 1, "llama_3_1_8b_instruct"),
        ("trtllm-eval --model=/x/Qwen2.5-7B --tp_size=2 --pp_size 2 mmlu", 4, "qwen2_5_7b"),
        ("trtllm-eval --model /x/m --tp_size 4 --gpus_per_node 4 gsm8k", 4, "m"),
    ],
)
def test_eval_parallelism(build_env: BuildEnv, eval_cmd: str, devices: int, model: str) -> None:
    job = build_env.build(build_env.request("eval", eval_cmd=eval_cmd))
    data = spec(job)
    assert data["required_devices"] == devices
    assert data["model_name"] == model
    assert data["slurm_params"]["ntasks"] == devices
    assert data["slurm_params"]["ntasks_per_node"] == devices
    assert data["slurm_params"]["mpi_plugin"] == "pmix_v5"  # also for a single task
    assert job.script_name == f"{model}_eval.slurm"


def test_eval_hf_model_found_is_rewritten(build_env: BuildEnv, tmp_path: Path) -> None:
    models = tmp_path / "models"
    (models / "llm" / "meta" / "Llama-3.1-8B-Instruct").mkdir(parents=True)
    req = build_env.request(
        "eval",
        models_path=str(models),
        eval_cmd="trtllm-eval --model meta-llama/llama-3.1-8b-instruct gsm8k",
    )
    job = build_env.build(req)
    assert "trtllm-eval --model /models/llm/meta/Llama-3.1-8B-Instruct gsm8k" in job.script_text
    assert job.warnings == ()


def test_eval_hf_model_not_found_warns(build_env: BuildEnv, tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    req = build_env.request(
        "eval",
        models_path=str(tmp_path / "models"),
        eval_cmd="trtllm-eval --model org/Missing-7B gsm8k",
    )
    job = build_env.build(req)
    assert "--model org/Missing-7B gsm8k" in job.script_text
    assert any("Hugging Face" in w for w in job.warnings)


def test_eval_mpi_plugin_bare_pmix_when_preferred_unset(build_env: BuildEnv) -> None:
    build_env.slurm_env(pmix={"available": ["pmix"], "preferred": None})
    job = build_env.build(build_env.request("eval"))
    assert spec(job)["slurm_params"]["mpi_plugin"] == "pmix"
    assert "--mpi=pmix " in job.script_text


# ------------------------------------------------------------------ Step 3: bench


@pytest.mark.parametrize(
    ("bench_cmd", "devices", "mpi", "prep"),
    [
        ("trtllm-bench --model m throughput --tp 1", 1, None, False),
        (
            "trtllm-bench --model m prepare-dataset --output d && "
            "trtllm-bench --model m throughput --tp 2 --pp 2",
            4,
            "pmix_v5",
            True,
        ),
        ("trtllm-bench --model m throughput --tp=2 --ep 2", 2, "pmix_v5", False),
    ],
)
def test_bench_parallelism(
    build_env: BuildEnv, bench_cmd: str, devices: int, mpi: str | None, prep: bool
) -> None:
    job = build_env.build(build_env.request("bench", bench_cmd=bench_cmd))
    data = spec(job)
    assert data["required_devices"] == devices
    assert data["slurm_params"]["ntasks"] == devices
    assert data["slurm_params"]["mpi_plugin"] == "pmix_v5"  # the cluster's, for the executors
    assert ("prepare the dataset" in job.script_text) is prep
    assert job.script_text.count("--mpi=") == (1 if mpi else 0)


def test_bench_model_name_from_model_path(build_env: BuildEnv) -> None:
    req = build_env.request(
        "bench", bench_cmd="trtllm-bench --model_path /m/Mixtral-8x7B throughput"
    )
    assert spec(build_env.build(req))["model_name"] == "mixtral_8x7b"


# ------------------------------------------------------------------ Step 3: custom


@pytest.mark.parametrize(
    ("partition", "required", "ntasks"),
    [("gpu", None, 1), ("gpu", 8, 8), ("arm", 4, 4)],
)
def test_custom_devices(
    build_env: BuildEnv, partition: str, required: int | None, ntasks: int
) -> None:
    req = build_env.request("custom", partition=partition, required_devices=required)
    data = spec(build_env.build(req))
    assert data["slurm_params"]["ntasks"] == ntasks
    assert data["slurm_params"]["nodes"] == 1
    assert data["slurm_params"]["mpi_plugin"] == "pmix_v5"


# ------------------------------------------------------------------ common parameters


@pytest.mark.parametrize(
    ("partition", "gres", "gpus_per_node"),
    [("gpu", "gpu:8", 8), ("arm", "gpu:4", 4), ("cpu", None, None), ("big", "gpu:16", 16)],
)
def test_gres(
    build_env: BuildEnv, partition: str, gres: str | None, gpus_per_node: int | None
) -> None:
    req = build_env.request("pytest", partition=partition, test_cmd="pytest -x")
    job = build_env.build(req)
    params = spec(job)["slurm_params"]
    assert params["gres"] == gres
    assert params["gpus_per_node"] == gpus_per_node
    assert (
        (f"#SBATCH --gres={gres}\n" in job.script_text)
        if gres
        else ("--gres" not in job.script_text)
    )


@pytest.mark.parametrize(("time_limit", "expected"), [(None, "02:00:00"), ("03:30:00", "03:30:00")])
def test_time_limit(build_env: BuildEnv, time_limit: str | None, expected: str) -> None:
    job = build_env.build(build_env.request(time_limit=time_limit))
    assert f"#SBATCH --time={expected}\n" in job.script_text


def test_mpi_plugin_fallback_when_arch_unknown(build_env: BuildEnv) -> None:
    job = build_env.build(
        build_env.request(
            "eval",
            partition="unprobed",
            eval_cmd="trtllm-eval --model /m/x --gpus_per_node 8 gsm8k",
        )
    )
    assert spec(job)["slurm_params"]["mpi_plugin"] == "pmix"


def test_models_root_default(build_env: BuildEnv) -> None:
    job = build_env.build(build_env.request(llm_models_root=None))
    assert "export LLM_MODELS_ROOT=/scratch.trt_llm_data/llm-models\n" in job.script_text


# ------------------------------------------------------------------ Step 5: job_spec


@pytest.mark.parametrize(
    ("scenario", "persistent", "present"),
    [
        ("local_slurm", None, True),
        ("local_slurm", True, True),
        ("local_slurm", False, False),
        ("remote_slurm", True, False),
        ("local_docker", True, False),
    ],
)
def test_persistent_mode_fields(
    build_env: BuildEnv, scenario: str, persistent: bool | None, present: bool
) -> None:
    job = build_env.build(
        build_env.request(execution_scenario=scenario, persistent_mode=persistent)
    )
    data = spec(job)
    for key in ("persistent_mode", "container_name", "container_mounts"):
        assert (key in data) is present
    if present:
        assert data["container_name"] == "qwen3_30b_auto_test"


def test_remote_fields_echoed(build_env: BuildEnv) -> None:
    data = spec(build_env.build(build_env.request(execution_scenario="remote_slurm")))
    assert data["remote_repo_path"] == "/lustre/alice/TensorRT-LLM"
    assert data["remote_work_dir"] == "/lustre/alice/TensorRT-LLM/work_dirs/work"
    assert data["script_path"] == str(build_env.work_dir / "qwen3_30b_auto_test.slurm")


def test_docker_fields(build_env: BuildEnv) -> None:
    data = spec(build_env.build(build_env.request(execution_scenario="local_docker")))
    assert data["docker_cmd"].startswith("docker run --rm ")
    assert data["log_file"] == str(build_env.work_dir / "qwen3_30b_local.log")
    assert "script_path" not in data and "slurm_params" not in data


@pytest.mark.parametrize("workflow", list(WORKFLOWS))
def test_job_spec_validates_against_published_schema(build_env: BuildEnv, workflow: str) -> None:
    import jsonschema

    from scriptbuilder.models.job_spec import JobSpec

    data = spec(build_env.build(build_env.request(workflow)))
    jsonschema.validate(data, JobSpec.model_json_schema())
    assert data["schema_version"] == 1
    assert data["generator"].startswith("scriptbuilder ")


def test_build_is_pure_until_write(build_env: BuildEnv) -> None:
    before = sorted(p.name for p in build_env.work_dir.iterdir())
    job = build_env.build(build_env.request())
    assert sorted(p.name for p in build_env.work_dir.iterdir()) == before
    written = job.write()
    names = {p.name for p in written}
    assert names == {"qwen3_30b_auto_test.slurm", "sb_test_records.py", "job_spec.json"}
    assert (build_env.work_dir / "job_spec.json").read_text() == job.job_spec_json


def test_same_request_same_bytes(build_env: BuildEnv) -> None:
    for workflow in ("pytest", "eval", "bench", "custom"):
        a = build_env.build(build_env.request(workflow))
        b = build_env.build(build_env.request(workflow))
        assert (a.script_text, a.job_spec_json, a.report) == (
            b.script_text,
            b.job_spec_json,
            b.report,
        )
