"""scriptbuilder.inputs.tests: GPU requirements read from TensorRT-LLM-like test files."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from scriptbuilder.inputs.tests import (
    InspectResult,
    TestId,
    inspect_tests,
    is_perf_sanity,
    parse_test_ids,
)
from scriptbuilder.inputs.tests.selectors import parse_command

REPO = Path(__file__).parent / "data" / "trtllm_repo"
ACC = "accuracy/test_llm_api_pytorch.py"
AR = "unittest/_torch/multi_gpu/test_allreduce.py"
MOE = "tests/unittest/_torch/test_moe.py"


def _inspect(cmd: str, repo: Path = REPO) -> InspectResult:
    """What a build reads for ``cmd`` in the checkout ``repo`` (run from its top folder)."""
    return inspect_tests(cmd, str(repo), str(repo))


# ---------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    ("cmd", "expected"),
    [
        ("pytest a/test_x.py", [TestId("a/test_x.py")]),
        ("pytest a/test_x.py::test_f", [TestId("a/test_x.py", None, "test_f")]),
        ("pytest a/test_x.py::TestA", [TestId("a/test_x.py", "TestA")]),
        (
            "pytest -v a/test_x.py::TestA::test_f[tp4-attn_backend=TRTLLM]",
            [TestId("a/test_x.py", "TestA", "test_f", "tp4-attn_backend=TRTLLM")],
        ),
        (
            "python -m pytest ./a/test_x.py::TestA::TestB::test_f",
            [TestId("a/test_x.py", "TestA::TestB", "test_f")],
        ),
        (
            "FOO=bar.py CUDA_VISIBLE_DEVICES=0,1 pytest a/test_x.py::test_f[x] --timeout 60",
            [TestId("a/test_x.py", None, "test_f", "x")],
        ),
        (
            "pytest -k 'test_x.py and not slow' -m gpu2 --deselect b/test_y.py::t a/test_x.py",
            [TestId("a/test_x.py")],
        ),
        (
            "pytest --deselect=b/test_y.py::t --junitxml out.py -p plugin.py a/test_x.py",
            [TestId("a/test_x.py")],
        ),
        (
            "cd tests/integration/defs && pytest accuracy/test_a.py::T::t",
            [TestId("accuracy/test_a.py", "T", "t", None, "tests/integration/defs")],
        ),
        (
            "cd $LLM_ROOT/tests/integration/defs&&pytest accuracy/test_a.py",
            [TestId("accuracy/test_a.py", None, None, None, "tests/integration/defs")],
        ),
        (
            "pytest a/test_x.py::t a/test_x.py::t b/test_y.py 2>&1 | tee log.py",
            [TestId("a/test_x.py", None, "t"), TestId("b/test_y.py")],
        ),
        ("python3 run.py && python -m pytest a/test_x.py", [TestId("a/test_x.py")]),
        ("mpirun -n 2 /usr/bin/pytest a/test_x.py > out.py", [TestId("a/test_x.py")]),
        ("python3 scripts/run_one.py", [TestId("scripts/run_one.py")]),
        ('pytest "a/test_x.py::test_f[a b]"', [TestId("a/test_x.py", None, "test_f", "a b")]),
        ("pytest -c pytest.ini tests/", [TestId("tests", folder=True)]),
        ("pytest 'unterminated", []),
        ("", []),
    ],
)
def test_parse_test_ids(cmd: str, expected: list[TestId]) -> None:
    assert parse_test_ids(cmd) == expected


def test_test_id_str_round_trips() -> None:
    text = "accuracy/test_a.py::TestA::test_f[tp4-x=1]"
    assert [str(tid) for tid in parse_test_ids(f"pytest {text}")] == [text]


@pytest.mark.parametrize(
    ("cmd", "expected"),
    [
        ("pytest perf/test_perf_sanity.py::test_e2e[aggr-x-y]", True),
        ("pytest tests/scripts/perf-sanity/run.py", True),
        ("pytest perf_sanity_x.py", True),
        ("pytest accuracy/test_llm_api_pytorch.py", False),
        ("pytest perf/test_perf.py::test_perf[llama]", False),
    ],
)
def test_is_perf_sanity(cmd: str, expected: bool) -> None:
    assert is_perf_sanity(cmd) is expected


# ---------------------------------------------------------------- requirements

CASES = [
    # (selector, devices or None, text expected in the source)
    (f"{ACC}::TestLlama3_1_8BInstruct::test_bfloat16", None, None),
    # skip_less_device_memory is not a device count
    (f"{ACC}::TestLlama3_1_8BInstruct::test_fp8_large_memory", None, None),
    (
        f"{ACC}::TestLlama3_1_8BInstruct::test_bfloat16_4gpus"
        "[tp2pp2-attn_backend=TRTLLM-torch_compile=False]",
        4,
        "skip_less_device(4) on TestLlama3_1_8BInstruct::test_bfloat16_4gpus in " + ACC,
    ),
    # class-level marker
    (
        f"{ACC}::TestDeepSeekV3Lite::test_nvfp4_8gpus",
        8,
        "skip_less_device(8) on TestDeepSeekV3Lite",
    ),
    # function beats class
    (f"{ACC}::TestDeepSeekV3Lite::test_fp8_4gpus", 4, "on TestDeepSeekV3Lite::test_fp8_4gpus"),
    # unmarked case inherits the class marker
    (
        f"{ACC}::TestQwen3_30B_A3B::test_auto_dtype[tp1-attn_backend=TRTLLM]",
        2,
        "skip_less_device(2) on TestQwen3_30B_A3B in",
    ),
    # case marks beat the class; marks= single, list, tuple with a module constant
    (
        f"{ACC}::TestQwen3_30B_A3B::test_auto_dtype[tp4-attn_backend=TRTLLM]",
        4,
        "on TestQwen3_30B_A3B::test_auto_dtype[tp4-attn_backend=TRTLLM]",
    ),
    (
        f"{ACC}::TestQwen3_30B_A3B::test_auto_dtype[tp2pp2-attn_backend=FLASHINFER]",
        4,
        "skip_less_device(4) on TestQwen3_30B_A3B::test_auto_dtype[tp2pp2-",
    ),
    (
        f"{ACC}::TestQwen3_30B_A3B::test_auto_dtype[ep8-attn_backend=TRTLLM]",
        8,
        "skip_less_device(8) on TestQwen3_30B_A3B::test_auto_dtype[ep8-attn_backend=TRTLLM]",
    ),
    # no case named: the largest over all cases
    (f"{ACC}::TestQwen3_30B_A3B::test_auto_dtype", 8, "test_auto_dtype[ep8-"),
    (f"{ACC}::TestQwen3_30B_A3B::test_plain_cases[2]", 2, "on TestQwen3_30B_A3B in"),
    # class-body pytestmark list
    (f"{ACC}::TestMixtral8x7B::test_tp2", 2, "skip_less_device(2) on TestMixtral8x7B in"),
    (f"{ACC}::TestMixtral8x7B::test_world_size_8", 8, "skip_less_mpi_world_size(8) on"),
    # marks of an in-file base class, for inherited and own tests
    (f"{ACC}::TestChildOfFourGpuBase::test_inherited", 4, "_FourGpuBase (base of"),
    (f"{ACC}::TestChildOfFourGpuBase::test_own", 4, "_FourGpuBase (base of"),
    (f"{ACC}::TestOuter::TestInner::test_nested", 2, "on TestOuter::TestInner in"),
    (f"{ACC}::test_module_level_function", 4, "skip_less_mpi_world_size(4) on test_module_"),
    # a class or a whole file: the largest over its tests
    (f"{ACC}::TestQwen3_30B_A3B", 8, "test_auto_dtype[ep8-"),
    (ACC, 8, None),
    # unit tests: module pytestmark, skipif forms, `from pytest import mark`, named marks
    (f"{AR}::test_allreduce_default", 2, "gpu2 on module in " + AR),
    (f"{AR}::test_allreduce_skipif_lt", 4, "skipif(torch.cuda.device_count() < 4) on"),
    (f"{AR}::test_allreduce_skipif_le", 8, "skipif(torch.cuda.device_count() <= 7) on"),
    (f"{AR}::test_allreduce_skipif_or", 2, "torch.cuda.device_count() < 2) on"),
    (f"{AR}::test_allreduce_mark_alias", 4, "gpu4 on test_allreduce_mark_alias"),
    (f"{AR}::test_allreduce_named_mark", 4, "on test_allreduce_named_mark"),
    # stacked auto ids: bottom decorator first (pytest's order)
    (f"{AR}::test_allreduce_auto_ids[float16-4]", 4, "gpu4 on test_allreduce_auto_ids[float16-4]"),
    (f"{AR}::test_allreduce_auto_ids[bfloat16-2]", 2, "gpu2 on module"),
    (f"{MOE}::TestMoe::test_two_gpus", 2, "skipif(torch.cuda.device_count() < 2)"),
    (f"{MOE}::TestMoe::test_plain", None, None),
    (f"{MOE}::TestMoeMultiGpu::test_four", 4, "gpu4 on TestMoeMultiGpu in " + MOE),
    (MOE, 4, None),
]


@pytest.mark.parametrize(("selector", "devices", "source"), CASES, ids=[c[0] for c in CASES])
def test_required_devices(selector: str, devices: int | None, source: str | None) -> None:
    result = _inspect(f"pytest -v {selector} --timeout 3600")
    if devices is None:
        assert result.requirement is None
        assert any("no GPU-count marker" in w for w in result.warnings)
        return
    assert result.requirement is not None, result.warnings
    assert result.requirement.devices == devices
    assert not result.warnings
    if source is not None:
        assert source in result.requirement.source


@pytest.mark.parametrize(
    ("selector", "marker_line", "anchor"),
    [
        (
            f"{ACC}::TestDeepSeekV3Lite::test_fp8_4gpus",
            "    @pytest.mark.skip_less_device(4)",
            "    def test_fp8_4gpus(self):",
        ),
        (
            f"{AR}::test_allreduce_default",
            "pytestmark = pytest.mark.gpu2",
            "pytestmark = pytest.mark.gpu2",
        ),
    ],
)
def test_source_names_file_and_line(selector: str, marker_line: str, anchor: str) -> None:
    path = selector.partition("::")[0]
    roots = [REPO / "tests/integration/defs", REPO / "tests"]
    file = next(root / path for root in roots if (root / path).is_file())
    lines = file.read_text().splitlines()
    anchor_at = lines.index(anchor)
    line = max(i for i, text in enumerate(lines[: anchor_at + 1]) if text == marker_line) + 1
    result = _inspect(f"pytest {selector}")
    assert result.requirement is not None
    assert result.requirement.source.endswith(f" in {path}:{line}")


def test_example_source_format() -> None:
    result = _inspect(f"pytest {ACC}::TestQwen3_30B_A3B::test_auto_dtype[tp4-attn_backend=TRTLLM]")
    assert result.requirement is not None
    assert (result.requirement.devices, result.requirement.source) == (
        4,
        "skip_less_device(4) on TestQwen3_30B_A3B::test_auto_dtype[tp4-attn_backend=TRTLLM]"
        f" in {ACC}:66",
    )


def test_several_ids_take_the_max() -> None:
    acc, ar = f"tests/integration/defs/{ACC}", f"tests/{AR}"
    cmd = f"pytest {ar}::test_allreduce_default {acc}::TestDeepSeekV3Lite::test_fp8_4gpus {MOE}"
    result = _inspect(cmd)
    assert result.requirement is not None
    assert result.requirement.devices == 4
    assert "test_fp8_4gpus" in result.requirement.source  # first of the tied maxima
    assert len(result.test_ids) == 3


def test_cd_prefix_and_roots() -> None:
    cmd = f"cd tests/integration/defs && python -m pytest {ACC}::TestMixtral8x7B::test_tp2"
    result = _inspect(cmd)
    assert result.requirement is not None and result.requirement.devices == 2


def test_absolute_path() -> None:
    path = (REPO / "tests" / AR).resolve()
    result = _inspect(f"pytest {path}::test_allreduce_skipif_le")
    assert result.requirement is not None and result.requirement.devices == 8


@pytest.mark.parametrize(
    ("cmd", "warning"),
    [
        (
            "pytest accuracy/test_missing.py::t",
            "test file accuracy/test_missing.py not found under",
        ),
        (f"pytest {ACC} -k nothing_of_it", f"no test of {ACC} matches -k nothing_of_it"),
        ("echo hello", "no test file (*.py) found in test command"),
        (f"pytest {ACC}::TestNope::test_x", "class TestNope not found in " + ACC),
        (f"pytest {ACC}::TestMixtral8x7B::test_nope", "test test_nope not found in " + ACC),
    ],
)
def test_warnings_when_not_derivable(cmd: str, warning: str) -> None:
    result = _inspect(cmd)
    said = [*result.warnings, *result.missing, *result.unresolved]
    assert any(warning in w for w in said), said


def test_unknown_class_member_keeps_class_marker() -> None:
    result = _inspect(f"pytest {ACC}::TestMixtral8x7B::test_nope")
    assert result.requirement is not None and result.requirement.devices == 2
    assert any("test_nope not found" in w for w in result.warnings)


def test_missing_file_names_the_folders_tried() -> None:
    result = _inspect("pytest accuracy/test_missing.py")
    assert result.requirement is None
    assert f"{REPO}/tests/integration/defs, {REPO}/tests" in result.missing[0], result.missing


def test_unmatched_case_uses_max_over_cases_and_warns() -> None:
    result = _inspect(f"pytest {ACC}::TestQwen3_30B_A3B::test_auto_dtype[nope]")
    assert result.requirement is not None and result.requirement.devices == 8
    assert any("matches none of its parametrize ids" in w for w in result.warnings)


def test_a_test_file_rewritten_at_the_same_size_and_mtime_is_read_again(tmp_path: Path) -> None:
    test_file = tmp_path / "test_rewritten.py"
    source = "import pytest\n\n@pytest.mark.skip_less_device({})\ndef test_a():\n    pass\n"
    test_file.write_text(source.format(2))
    stamp = os.stat(test_file)
    cmd = f"pytest {test_file}::test_a"
    assert _inspect(cmd, tmp_path).requirement.devices == 2  # type: ignore[union-attr]
    test_file.write_text(source.format(4))
    os.utime(test_file, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert _inspect(cmd, tmp_path).requirement.devices == 4  # type: ignore[union-attr]


# ---------------------------------------------------------------- edge sources


def _write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "test_edge.py"
    path.write_text(textwrap.dedent(body))
    return path


def test_class_defined_under_if(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """
        import pytest
        import sys

        if sys.platform:
            @pytest.mark.skip_less_device(4)
            class TestHidden:
                def test_x(self):
                    pass
        """,
    )
    result = _inspect(f"pytest {path}::TestHidden::test_x", tmp_path)
    assert result.requirement is not None and result.requirement.devices == 4


def test_code_in_multiline_strings_is_no_test(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        '''
        import pytest

        @pytest.mark.skip_less_device(2)
        def test_x():
            pass

        TEMPLATE = """
        @pytest.mark.skip_less_device(16)
        def test_x():
            pass
        pytestmark = pytest.mark.gpu8
        """
        ''',
    )
    result = _inspect(f"pytest {path}::test_x", tmp_path)
    assert result.requirement is not None and result.requirement.devices == 2


@pytest.mark.parametrize(
    ("decorator", "devices"),
    [
        ("@pytest.mark.skipif(4 > torch.cuda.device_count(), reason='x')", 4),
        ("@pytest.mark.skipif(3 >= torch.cuda.device_count(), reason='x')", 4),
        ("@pytest.mark.skipif(condition=torch.cuda.device_count() < N_GPUS, reason='x')", 6),
        ("@pytest.mark.skipif('torch.cuda.device_count() < 2')", 2),
        ("@pytest.mark.skipif(get_device_count() < 2 * 4, reason='x')", 8),
        ("@pytest.mark.skipif(torch.cuda.device_count() == 2, reason='x')", None),
        ("@pytest.mark.skipif(get_sm_version() < 90, reason='x')", None),
        ("@pytest.mark.skip_less_device_memory(80000)", None),
        ("@pytest.mark.skip_less_device(N_GPUS)", 6),
        ("@pytest.mark.gpu8", 8),
        ("@pytest.mark.gpu", None),
        ("@mark.skip_less_device(2)", 2),
        ("@other.skip_less_device(2)", None),
    ],
)
def test_marker_forms(tmp_path: Path, decorator: str, devices: int | None) -> None:
    path = _write(
        tmp_path,
        f"""
        import pytest
        import torch
        from pytest import mark

        N_GPUS = 6

        {decorator}
        def test_x():
            pass
        """,
    )
    result = _inspect(f"pytest {path}::test_x", tmp_path)
    got = result.requirement.devices if result.requirement else None
    assert got == devices


def test_ids_match_pytest_collection(tmp_path: Path) -> None:
    """Every id pytest itself collects is matched exactly (no 'matches none' warning)."""
    path = _write(
        tmp_path,
        """
        import pytest

        CASES = [pytest.param(1, id="one"), pytest.param(8, id="eight", marks=pytest.mark.gpu8)]

        @pytest.mark.parametrize("x", [1.5, None, True, (1, 2), "é", -3, "a-b"])
        @pytest.mark.parametrize("n", CASES)
        def test_a(n, x):
            pass

        P = [pytest.param(2, marks=pytest.mark.gpu2), 3]
        QR = [(1, "u"), pytest.param(2, "v", marks=pytest.mark.gpu4)]

        @pytest.mark.parametrize("p", P, ids=["two", None])
        class TestK:
            @pytest.mark.parametrize("q,r", QR)
            def test_b(self, p, q, r):
                pass
        """,
    )
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-W",
         "ignore", str(path)],
        cwd=tmp_path, capture_output=True, text=True, check=False,
    ).stdout.splitlines()  # fmt: skip
    ids = [line for line in collected if "::" in line and "[" in line]
    assert len(ids) == 14 + 4, collected
    for node_id in ids:
        result = _inspect(f"pytest {shlex.quote(str(tmp_path / node_id))}", tmp_path)
        assert not [w for w in result.warnings if "matches none" in w], node_id
        case = node_id.split("[", 1)[1]
        expected = max(
            8 if "eight" in case else 0,
            4 if "-2-v-" in f"-{case}" else 0,
            2 if "two" in case else 0,
        )
        got = result.requirement.devices if result.requirement else 0
        assert got == expected, node_id


@pytest.mark.parametrize(
    ("cmd", "ids", "marks", "has_cd"),
    [
        ("python -m pytest -m gpu2 unittest/_torch", [TestId("unittest/_torch", folder=True)],
         ["gpu2"], False),
        ("pytest -m 'gpu2 or gpu4' -vs tests/unittest", [TestId("tests/unittest", folder=True)],
         ["gpu2 or gpu4"], False),
        ("pytest -mgpu4 a/test_x.py", [TestId("a/test_x.py")], ["gpu4"], False),
        # an unknown option takes the next word unless it names a .py file
        ("pytest --my-flag value a/test_x.py", [TestId("a/test_x.py")], [], False),
        ("pytest --my-flag a/test_x.py", [TestId("a/test_x.py")], [], False),
        ("cd tests && pytest unittest", [TestId("unittest", cwd="tests", folder=True)], [],
         True),
        # words of other commands are selectors only when they name .py files
        ("echo done && python3 run.py data", [TestId("run.py")], [], False),
        ("pytest a/test_x.py 2>&1 | tee out.log", [TestId("a/test_x.py")], [], False),
    ],
)  # fmt: skip
def test_parse_command(cmd: str, ids: list[TestId], marks: list[str], has_cd: bool) -> None:
    parsed = parse_command(cmd)
    assert (parsed.ids, parsed.mark_exprs, parsed.has_cd) == (ids, marks, has_cd)
