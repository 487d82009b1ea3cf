"""GPU counts beyond device marks, and where the test step runs, on TensorRT-LLM-like tests.

Table-driven: each row is a selector (or a command), what it needs and why.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from scriptbuilder.errors import BuildError
from scriptbuilder.inputs.tests import inspect_tests
from tests.build_env import BuildEnv

REPO = Path(__file__).parent / "data" / "trtllm_repo"
DS = "accuracy/test_disaggregated_serving.py"
LL = f"{DS}::TestLlama3_1_8BInstruct"
PERF = "perf/test_perf.py::test_perf"
MODS = "unittest/_torch/modules"

# (command, devices or None, exact, text expected in the source or a warning)
RULES = [
    # body guards over the selected case's parameters (parametrize_with_ids, bottom first)
    (f"pytest '{LL}::test_ctx_pp_gen_tp_asymmetric[gen_tp=1-ctx_pp=2]'", 3, False,
     "guard `ctx_pp + gen_tp > get_device_count()` (at least 3)"),
    (f"pytest '{LL}::test_ctx_pp_gen_tp_asymmetric[gen_tp=2-ctx_pp=4]'", 6, False, "at least 6"),
    # no case named: the largest over all cases
    (f"pytest {LL}::test_ctx_pp_gen_tp_asymmetric", 6, False, "[gen_tp=2-ctx_pp=4]"),
    # exact-count guards: through a local variable, and `not ... ==`
    (f"pytest '{LL}::test_exact_world[tp2pp2]'", 4, True, "(exactly 4)"),
    (f"pytest '{LL}::test_exact_world[pp2]'", 2, True, "get_device_count() != world_size"),
    (f"pytest '{LL}::test_not_equal_form[4gpus]'", 4, True, "not get_device_count() == gpu_count"),
    # cases wanting different exact counts: the largest, not exact, and a warning
    (f"pytest {LL}::test_exact_world", 4, False, "needs exactly 2 GPUs but the job gets 4"),
    # markers still win over guards
    (f"pytest '{LL}::test_marker_wins[2]'", 8, False, "skip_less_device(8)"),
    # a module constant in the guard
    (f"pytest {LL}::test_module_constant", 8, False, "get_device_count() < WORLD"),
    # `and`: nothing certain
    (f"pytest {LL}::test_and_is_no_guard", None, False, "no GPU-count marker found"),
    # class parametrize + function pytest.param ids (function part first)
    (f"pytest '{DS}::TestQwen3_8B::test_class_param[ctx2-4]'", 6, False, "at least 6"),
    (f"pytest '{DS}::TestQwen3_8B::test_class_param[ctx1-2]'", 3, False, "at least 3"),
    # perf labels of generated case names
    (f"pytest '{PERF}[llama_v3.1_8b-bench-pytorch-bfloat16-input_output_len:128,128-gpus:4]'",
     4, False, "gpus:4 label"),
    (f"pytest '{PERF}[llama_70b-bench-float16-tp:2-pp:2]'", 4, False, "tp:2-pp:2' labels"),
    (f"pytest '{PERF}[llama_70b-bench-float16-tp:2]'", 2, False, "float16-tp:2' labels"),
    # folders: the largest over their test files; -m filters over the device marks
    (f"pytest {MODS}", 8, False, "gpu8 on TestLinear"),
    (f"pytest -m gpu4 {MODS}", 4, False, "gpu4 on test_moe_four"),
    (f"pytest {MODS} -m 'gpu2 or gpu4'", 4, False, "gpu4"),
    (f"pytest -m 'not gpu8' {MODS}", 4, False, "gpu4"),
    (f"pytest -m gpu2 {MODS}", 2, False, "gpu2"),
    (f"pytest -m gpu16 {MODS}", None, False, f"no test of {MODS} matches -m gpu16"),
    (f"pytest -m gpu2 {MODS}/test_fused_moe_multi.py::test_moe_alltoall", 2, False, "gpu2"),
    # pytest.param marks and a guard on the other case
    (f"pytest '{MODS}/test_fused_moe_multi.py::test_moe_alltoall[1]'", 1, False,
     "torch.cuda.device_count() < gpu_count"),
]  # fmt: skip


@pytest.mark.parametrize(("cmd", "devices", "exact", "text"), RULES, ids=[r[0] for r in RULES])
def test_device_rules(cmd: str, devices: int | None, exact: bool, text: str) -> None:
    result = inspect_tests(cmd, str(REPO), str(REPO))
    if devices is None:
        assert result.requirement is None, result.requirement
        said = [*result.warnings, *result.unresolved]
        assert any(text in w for w in said), said
        return
    assert result.requirement is not None, result.warnings
    assert (result.requirement.devices, result.requirement.exact) == (devices, exact)
    assert text in result.requirement.source or any(text in w for w in result.warnings), (
        result.requirement.source,
        result.warnings,
    )


def test_parallelism_named_in_the_id_is_evidence() -> None:
    result = inspect_tests(f"pytest '{LL}::test_nothing_declared[tp8]'", str(REPO), str(REPO))
    assert result.requirement is not None and result.requirement.devices == 8
    assert "case parameters tp_size=8" in result.requirement.source
    assert any("case id 'tp8' labels" in text for _n, text in result.requirement.evidence)


# (command, working directory the step needs, missing text or None)
PLACES = [
    ("pytest accuracy/test_llm_api_pytorch.py::TestMixtral8x7B", "tests/integration/defs", None),
    ("pytest -v 'perf/test_perf.py::test_perf[x-gpus:2]' accuracy/test_llm_api_pytorch.py",
     "tests/integration/defs", None),
    (f"pytest {MODS}", "tests", None),
    ("pytest unittest/_torch/test_moe.py::TestMoe", "tests", None),
    ("pytest tests/integration/defs/accuracy/test_llm_api_pytorch.py", None, None),
    ("cd tests/integration/defs && pytest accuracy/test_llm_api_pytorch.py", None, None),
    ("cd tests && pytest accuracy/test_llm_api_pytorch.py", None,
     "test file tests/accuracy/test_llm_api_pytorch.py not found"),
    ("pytest accuracy/test_missing.py::t", None, "test file accuracy/test_missing.py not found"),
    ("pytest accuracy/test_llm_api_pytorch.py unittest/_torch/test_moe.py",
     "tests/integration/defs",
     "no directory holds every test: unittest/_torch/test_moe.py is under tests"),
    ("pytest -x", None, None),
]  # fmt: skip


@pytest.mark.parametrize(("cmd", "workdir", "missing"), PLACES, ids=[p[0] for p in PLACES])
def test_where_the_step_runs(cmd: str, workdir: str | None, missing: str | None) -> None:
    result = inspect_tests(cmd, str(REPO), str(REPO))
    assert result.workdir == workdir
    if workdir is not None:
        assert f"resolve under {workdir}" in result.workdir_reason
    if missing is None:
        assert result.missing == []
    else:
        assert len(result.missing) == 1 and missing in result.missing[0], result.missing


def test_remote_paths_map_to_the_local_checkout() -> None:
    remote = "/lustre/alice/TensorRT-LLM"
    tid = f"{remote}/tests/integration/defs/accuracy/test_llm_api_pytorch.py::TestMixtral8x7B"
    result = inspect_tests(f"pytest {tid}", str(REPO), remote)
    assert result.missing == [] and result.workdir is None
    assert result.requirement is not None and result.requirement.devices == 8
    outside = inspect_tests("pytest /elsewhere/test_x.py", str(REPO), remote)
    assert outside.missing == []
    assert any("cannot be checked here" in w for w in outside.warnings)


def test_no_checkout_warns() -> None:
    result = inspect_tests("pytest accuracy/test_x.py", None, "/proj")
    assert result.missing == [] and result.workdir is None
    assert any("repo_root" in w for w in result.warnings)


# ---------------------------------------------------------------- through the build


def _choices(job: Any) -> dict[str, tuple[Any, str]]:
    return {c.field: (c.value, c.rule) for c in job.trace.choices}


def test_a_test_db_id_runs_where_it_resolves(build_env: BuildEnv) -> None:
    job = build_env.build(build_env.request(test_cmd=f"pytest '{LL}::test_module_constant'"))
    defs = f"{build_env.repo}/tests/integration/defs"
    assert f"; cd {defs}; " in job.script_text
    value, rule = _choices(job)["test_workdir"]
    assert value == defs and "has no cd" in rule
    assert json.loads(job.job_spec_json)["required_devices"] == 8


@pytest.mark.parametrize(
    "cmd",
    [
        "pytest tests/integration/defs/accuracy/test_llm_api_pytorch.py::TestMixtral8x7B",
        "cd tests/integration/defs && pytest accuracy/test_llm_api_pytorch.py::TestMixtral8x7B",
    ],
)
def test_no_cd_added_where_the_ids_already_resolve(build_env: BuildEnv, cmd: str) -> None:
    job = build_env.build(build_env.request(test_cmd=cmd))
    assert "; cd " not in job.script_text and "test_workdir" not in _choices(job)


def test_ids_in_no_common_directory_stop(build_env: BuildEnv) -> None:
    cmd = "pytest accuracy/test_llm_api_pytorch.py unittest/_torch/test_moe.py"
    with pytest.raises(BuildError, match="no directory holds every test: unittest/_torch"):
        build_env.build(build_env.request(test_cmd=cmd))


def test_exact_count_requests_exactly_that_many_gpus(build_env: BuildEnv) -> None:
    job = build_env.build(build_env.request(test_cmd=f"pytest '{LL}::test_exact_world[tp2pp2]'"))
    assert "#SBATCH --gres=gpu:4\n" in job.script_text
    assert "CUDA_VISIBLE_DEVICES" not in job.script_text  # Slurm hands out the 4 GPUs
    choices = _choices(job)
    assert choices["gres"] == ("gpu:4", "the tests need exactly 4 GPUs (partition GPU GRES)")
    assert "exactly 4" in choices["exact GPUs"][1]
    assert job.job_spec_data["slurm_params"]["gres"] == "gpu:4"


def test_at_least_count_keeps_the_whole_node(build_env: BuildEnv) -> None:
    job = build_env.build(build_env.request(test_cmd=f"pytest {LL}::test_module_constant"))
    assert "#SBATCH --gres=gpu:8\n" in job.script_text and "exact GPUs" not in _choices(job)


@pytest.mark.parametrize(
    "fields",
    [
        {"partition": "cpu", "required_devices": None},  # no GPU GRES on the partition
        {"execution_scenario": "local_docker"},
    ],
)
def test_exact_count_without_gres_limits_the_visible_gpus(
    build_env: BuildEnv, fields: dict[str, Any]
) -> None:
    request = build_env.request(test_cmd=f"pytest '{LL}::test_exact_world[pp2]'", **fields)
    if fields.get("partition") == "cpu":
        request["env_check"] = {"gpus_per_node": 8}
    job = build_env.build(request)
    assert "export CUDA_VISIBLE_DEVICES=0,1; cd " in job.script_text
    assert "--gres" not in job.script_text
    assert _choices(job)["visible GPUs"][0] == "0,1"


def test_job_spec_records_the_deciding_evidence(build_env: BuildEnv) -> None:
    job = build_env.build(build_env.request(test_cmd=f"pytest '{LL}::test_nothing_declared[tp8]'"))
    spec = json.loads(job.job_spec_json)
    assert spec["required_devices"] == 8
    assert spec["required_devices_source"].startswith("case parameters tp_size=8 on TestLlama")
    explained = [c.rule for c in job.trace.choices if c.field == "GPU evidence"]
    assert [r for r in explained if r.endswith("(decides)")] == [
        spec["required_devices_source"] + " (decides)"
    ]
    assert any("case id 'tp8' labels" in rule for rule in explained)
