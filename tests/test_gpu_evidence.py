"""GPU counts from where tests keep them beyond device marks: launchers, parallel sizes,
bodies, helper guards, -k selections and the test-db lists (fixtures in tests/data/gpu_evidence)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from scriptbuilder.errors import BuildError
from scriptbuilder.inputs.tests import inspect_tests, required_devices
from tests.build_env import BuildEnv

REPO = Path(__file__).parent / "data" / "gpu_evidence"
L = "unittest/multi_gpu/test_launchers.py"
S = "unittest/multi_gpu/test_sizes.py"
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
    ("unittest/multi_gpu -k single", None, ""),
]


@pytest.mark.parametrize(("selector", "devices", "source"), CASES, ids=[c[0] for c in CASES])
def test_evidence(selector: str, devices: int | None, source: str) -> None:
    found = inspect_tests(f"pytest {selector}", str(REPO), str(REPO))
    if devices is None:
        assert found.requirement is None, found.requirement
        return
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
    found = required_devices(f"pytest {path}", [])
    assert found.requirement is None
    assert any("larger than 4 MB, not read" in w for w in found.warnings), found.warnings


def test_more_than_a_node_is_refused(build_env: BuildEnv) -> None:
    target = build_env.repo / "tests/unittest/test_two_nodes.py"
    shutil.copy(REPO / "tests" / L, target)
    target.write_text(target.read_text() + "\n\ndef test_16():\n    _run(16, _worker)\n")
    with pytest.raises(BuildError, match="pytest does not support multi-node execution"):
        build_env.build(build_env.request(test_cmd="pytest unittest/test_two_nodes.py::test_16"))
