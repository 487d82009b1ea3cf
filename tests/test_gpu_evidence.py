"""GPU counts from where tests keep them beyond device marks: launchers, parallel sizes,
bodies, helper guards, -k selections and the test-db lists (fixtures in tests/data/gpu_evidence)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from scriptbuilder.errors import BuildError
from scriptbuilder.inputs.tests import inspect_tests
from tests.build_env import BuildEnv

REPO = Path(__file__).parent / "data" / "gpu_evidence"
L = "unittest/multi_gpu/test_launchers.py"
S = "unittest/multi_gpu/test_sizes.py"
K = "unittest/multi_gpu/test_selected.py"
G = "unittest/multi_gpu/test_generated.py"
IMP = "unittest/multi_gpu/test_imported.py"
SHARED = "unittest/multi_gpu/test_imports_tests.py"
LISTED = "test_listed.py"

# (selector, devices, text in the deciding source)
CASES = [
    # launchers: module-level helpers called with a literal, followed into the spawn
    (f"{L}::test_module_launcher", 4, "`mp.spawn(...)` arguments"),
    (f"{L}::test_keyword_launcher", 2, "guard `use_cuda and torch.cuda.device_count() <"),
    (f"{L}::test_direct_spawn", 6, "`mp.spawn(...)` arguments"),
    (f"{L}::test_conftest_pool", 2, "unittest/conftest.py"),
    (f"{L}::test_mpirun_words", 4, "command `mpirun --allow-run-as-root -n 4"),
    (f"{L}::test_mpirun_string", 2, "command `mpirun -np 2"),
    (f"{L}::test_mpirun_fstring[8]", 8, "command `mpirun -n 8"),
    (f"{L}::test_mpirun_fstring[2]", 2, "command `mpirun -n 2"),
    (f"{L}::test_launch_flags", 8, "--tp_size=4 --pp_size=2"),
    (f"{L}::TestMethods::test_method_helper", 2, "`mp.spawn(...)` arguments"),
    (L, 8, "mpirun -n 8"),
    # parallel sizes: case parameters, products, ids, test names
    (f"{S}::test_param_product[tp2pp2]", 4, "`LLM(...)` arguments on test_param_product[tp2pp2]"),
    (f"{S}::test_param_product[pp4]", 4, ""),
    (f"{S}::test_param_product[tp2]", 2, ""),
    (f"{S}::test_world_and_cp", 3, "case parameters"),
    (f"{S}::test_visual_ids[cfg2_ulysses2]", 4, "case id 'cfg2_ulysses2' labels"),
    (f"{S}::test_visual_ids[attn2d_2x2]", 4, "case id 'attn2d_2x2' labels"),
    (f"{S}::test_visual_ids[ulysses4-cfg2]", 8, "case id 'ulysses4-cfg2' labels"),
    (f"{S}::test_llama_tp8", 8, "test name 'test_llama_tp8' labels"),
    (f"{S}::test_eight_4gpus", 4, "test name"),
    # literals in the body, given to a call or written in a config dict
    (f"{S}::test_body_literal", 2, "`LLM(...)` arguments"),
    (f"{S}::test_dict_config", 4, "parallel sizes in a dict"),
    # guards: in a helper the test calls, above a skip_less_device floor, `and` of the case
    (f"{S}::test_helper_guard[4]", 4, "guard `get_device_count() < tp_size * pp_size`"),
    (f"{S}::test_guard_above_floor", 4, "guard `get_device_count() < 4`"),
    (f"{S}::test_and_guard_of_the_case[cuda:1]", 2, "guard"),
    (f"{S}::test_no_evidence", 1, "`LLM(...)` arguments"),
    # selections: the largest among the tests -k keeps
    (f"{S} -k 'visual and not ulysses4'", 4, "labels"),
    (f"{S} -k 'param_product or body_literal'", 4, ""),
    (f"{S} -k single", None, ""),
    # -k as pytest reads it: names, classes, module and folder names, ids, case-insensitive
    (f"{K} -k 'basic or 2gpu'", 2, "skip_less_device(2) on TestSizes::test_tp_2gpu"),
    (f"{K} -k 'TestSizes and 4GPU'", 4, "on TestSizes::test_tp_4gpu"),
    (f"{K} -k 'tp_4gpu and bf16'", 4, "on TestSizes::test_tp_4gpu"),
    (f"{K} -k 'multi_gpu and two_gpu'", 2, "on test_two_gpu_allreduce"),
    (f"{K} -k 'SELECTED.py and (allreduce or guard)'", 4, "test_guard_of_the_case[tp:2-pp:2]"),
    (f"{K} -k 'not (gpu or TestSizes or guard or nodes)'", None, ""),
    (f"{K} -k 'basic or CUTLASS_X'", None, ""),
    (f"{K} -k dtype1", 8, "skip_less_device(8) on test_dtypes_8gpus"),  # pytest's id of an object
    (f"{K} -k 'trtllm and not 2gpu'", 4, "on test_named_value_4gpus"),  # the name's value
    (f"'{K}::test_named_value_4gpus[TRTLLM]'", 4, "on test_named_value_4gpus"),
    # cases made at collection time: -k cannot rule them out
    (f"{G} -k 'CUTLASS and NVFP4'", 4, "on test_generated_cases"),
    # the selected case's own values bind the guard (ids from lambdas, labels of the id)
    (f"'{K}::test_guard_of_the_case[tp:1-pp:2]'", 2, "(at least 2) on test_guard_of_the_case"),
    (f"'{K}::test_guard_of_the_case[tp:2-pp:2]'", 4, "(at least 4)"),
    (f"'{G}::test_labels_bind_the_case[tp:1-pp:2]'", 2, "(at least 2) on test_labels_bind_the"),
    (f"{G}::test_labels_bind_the_case", 4, "(at least 4)"),
    (f"'{G}::test_sizes_made_by_a_call[TP=2]'", 2, "`LLM(...)` arguments"),
    # a total above the per-node marker
    (f"'{K}::test_two_nodes[tp:8-pp:2]'", 16, "case id 'tp:8-pp:2' labels"),
    (f"'{K}::test_two_nodes[tp:8-pp:1]'", 8, "skip_less_device(8)"),
    # skip helpers, mark factories and launchers of a helper module the test imports
    (f"{IMP}::test_helper_mark", 2, "skipif(torch.cuda.device_count() < 2) on test_helper_mark"),
    (f"{IMP}::test_helper_factory", 4, "skipif(torch.cuda.device_count() < 4)"),
    (f"{IMP}::test_imported_launcher", 4, "unittest/utils/util.py"),
    (f"{IMP}::test_two_imports_away", 4, "skipif(torch.cuda.device_count() < 4)"),
    (f"{IMP}::test_not_a_device_mark", None, ""),
    (f"{IMP}::test_three_imports_away", 4, "skip_less_device(4) on test_three_imports_away"),
    (f"{IMP}::test_beyond_the_depth", None, ""),  # four imports away: not followed
    (f"{IMP}::test_product_module_not_read", None, ""),  # the checkout's own packages
    # tests imported into a test module are collected there too
    (f"'{SHARED}::test_shared[MNNVL]'", 2, "on test_shared_two_gpus in /"),  # where it is
    (f"{SHARED} -k NCCL", 2, "skip_less_device(2)"),
    (f"{SHARED} -k own", None, ""),
]


@pytest.mark.parametrize(("selector", "devices", "source"), CASES, ids=[c[0] for c in CASES])
def test_evidence(selector: str, devices: int | None, source: str) -> None:
    found = inspect_tests(f"pytest {selector}", str(REPO), str(REPO))
    if devices is None:
        assert found.requirement is None, found.requirement
        return
    assert not found.unresolved, found.unresolved
    assert found.requirement is not None, found.warnings
    assert found.requirement.devices == devices
    assert source in found.requirement.source
    sources = [text for _n, text in found.requirement.evidence]
    assert found.requirement.source in sources
    assert all(" in " in text and ":" in text for text in sources)  # file and line


def test_every_piece_of_evidence_is_listed() -> None:
    found = inspect_tests(f"pytest '{S}::test_param_product[tp2pp2]'", str(REPO), str(REPO))
    assert found.requirement is not None
    labels = [text.split(" on ")[0] for _n, text in found.requirement.evidence]
    assert labels == [
        "`LLM(...)` arguments",
        "case parameters tp_size=2, pp_size=2",
        "case id 'tp2pp2' labels",
    ]


def test_test_db_stage_when_the_source_says_nothing() -> None:
    found = inspect_tests(f"pytest {LISTED}::test_unmarked", str(REPO), str(REPO))
    assert found.requirement is not None and found.requirement.devices == 2
    assert "test-db l0_fixture.yml stage 2 (system_gpu_count 2)" in found.requirement.source
    assert any("gives no GPU count; 2 from test-db l0_fixture.yml" in w for w in found.warnings)


def test_test_db_warns_when_the_source_needs_more_than_every_stage() -> None:
    found = inspect_tests(f"pytest {LISTED}::test_more_than_its_stage", str(REPO), str(REPO))
    assert found.requirement is not None and found.requirement.devices == 8
    assert any("more than every test-db stage" in w for w in found.warnings), found.warnings
    listed = inspect_tests(f"pytest {LISTED}::test_marked_and_listed", str(REPO), str(REPO))
    assert listed.requirement is not None and listed.requirement.devices == 2
    assert not listed.warnings


def test_too_large_a_file_is_not_read(tmp_path: Path) -> None:
    path = tmp_path / "test_huge.py"
    path.write_text("x = 1\n" * (1 << 20))
    found = inspect_tests(f"pytest {path}", str(tmp_path), str(tmp_path))
    assert found.requirement is None
    assert any("larger than 4 MB, not read" in w for w in found.warnings), found.warnings


def test_more_than_a_node_is_refused(build_env: BuildEnv) -> None:
    target = build_env.repo / "tests/unittest/test_two_nodes.py"
    shutil.copy(REPO / "tests" / L, target)
    target.write_text(target.read_text() + "\n\ndef test_16():\n    _run(16, _worker)\n")
    with pytest.raises(BuildError, match="pytest does not support multi-node execution"):
        build_env.build(build_env.request(test_cmd="pytest unittest/test_two_nodes.py::test_16"))


# ---------------------------------------------------------------- selections read nowhere

UNRESOLVED = [
    (f"pytest {K} -k nothing_matches", f"no test of {K} matches -k nothing_matches"),
    (f"pytest -m gpu4 {K}", f"no test of {K} matches -m gpu4"),
    (f"pytest '{K}::test_from_a_fixture[big]'", "[big] of unittest/multi_gpu/test_selected.py::"
     "test_from_a_fixture is not parametrized here"),
    (f"pytest '{K}::test_backends[DEEPGEMM]'", "matches none of its parametrize ids"),
    (f"pytest {K}::test_made_elsewhere", f"test test_made_elsewhere is not defined in {K}"),
    (f"pytest {LISTED}::test_fixture_cases[other]", "test_fixture_cases is not parametrized here"),
    (f"pytest {G}::test_sizes_made_by_a_call", "test_sizes_made_by_a_call takes tp_size from "
     "values not read here"),
]  # fmt: skip


@pytest.mark.parametrize(("cmd", "line"), UNRESOLVED, ids=[u[0] for u in UNRESOLVED])
def test_a_selection_the_source_does_not_show_has_no_count(cmd: str, line: str) -> None:
    found = inspect_tests(cmd, str(REPO), str(REPO))
    assert found.requirement is None, found.requirement
    assert len(found.unresolved) == 1 and line in found.unresolved[0], found.unresolved


def test_a_listed_selection_the_source_does_not_show_takes_its_stage() -> None:
    cmd = f"pytest '{LISTED}::test_fixture_cases[sixteen_layers]'"
    found = inspect_tests(cmd, str(REPO), str(REPO))
    assert found.unresolved == [] and found.requirement is not None
    assert found.requirement.devices == 8
    assert "test-db l0_fixture.yml stage 4 (system_gpu_count 8)" in found.requirement.source
    assert any("is not parametrized here" in w for w in found.warnings), found.warnings


def _with_fixtures(build_env: BuildEnv) -> None:
    """The fixture files of tests/unittest/multi_gpu in the build's checkout."""
    shutil.copytree(REPO / "tests/unittest", build_env.repo / "tests/unittest", dirs_exist_ok=True)


def test_an_unresolved_selection_stops_the_build(build_env: BuildEnv) -> None:
    _with_fixtures(build_env)
    request = build_env.request(test_cmd=f"pytest {K} -k nothing_matches")
    with pytest.raises(BuildError) as stop:
        build_env.build(request)
    assert str(stop.value) == (
        f"test_cmd: no test of {K} matches -k nothing_matches, so the GPUs it needs are not "
        "known; fix the selection, or set required_devices to the count it needs "
        "(allow_missing_tests: true goes on with required_devices or 1)"
    )
    assert not (build_env.work_dir / "job_spec.json").exists()


FIXTURE_CASE = f"'{K}::test_from_a_fixture[big]'"
EXPLICIT = [
    ({"required_devices": 4}, FIXTURE_CASE, 4),
    ({"allow_missing_tests": True}, FIXTURE_CASE, 1),
    # an explicit count below what the other selections need does not lower it
    ({"required_devices": 2}, f"{FIXTURE_CASE} '{K}::test_two_nodes[tp:8-pp:1]'", 8),
]


@pytest.mark.parametrize(("fields", "cmd", "devices"), EXPLICIT)
def test_an_explicit_count_goes_on(
    build_env: BuildEnv, fields: dict[str, Any], cmd: str, devices: int
) -> None:
    _with_fixtures(build_env)
    job = build_env.build(build_env.request(test_cmd=f"pytest {cmd}", **fields))
    assert json.loads(job.job_spec_json)["required_devices"] == devices
    assert any("is not parametrized here" in w for w in job.warnings), job.warnings


def test_a_total_above_one_node_is_refused(build_env: BuildEnv) -> None:
    _with_fixtures(build_env)
    request = build_env.request(test_cmd=f"pytest '{K}::test_two_nodes[tp:8-pp:2]'")
    with pytest.raises(BuildError, match="required_devices = 16 exceeds the 8 GPUs per node"):
        build_env.build(request)


def test_explain_shows_the_evidence_of_an_imported_helper(build_env: BuildEnv) -> None:
    _with_fixtures(build_env)
    job = build_env.build(build_env.request(test_cmd=f"pytest {IMP}::test_helper_mark"))
    explained = [c.rule for c in job.trace.choices if c.field == "GPU evidence"]
    decides = [rule for rule in explained if rule.endswith("(decides)")]
    assert decides == [
        f"skipif(torch.cuda.device_count() < 2) on test_helper_mark in {IMP}:15 (decides)"
    ]
    assert any("command `mpirun -n 1" in rule for rule in explained)
    assert json.loads(job.job_spec_json)["required_devices"] == 2
