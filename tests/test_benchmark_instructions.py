"""``benchmarks/run.py --instructions`` counts start-up in instructions: callgrind's
count is read from its report, the same (to a thousandth) on every run of a command."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

RUN = Path(__file__).resolve().parent.parent / "benchmarks" / "run.py"


@pytest.fixture
def run(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location("benchmark_run", RUN)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # its dataclasses look it up
    spec.loader.exec_module(module)
    return module


def test_a_command_counts_about_the_same_instructions_twice(run: ModuleType) -> None:
    argv = [sys.executable, "-S", "-c", "pass"]
    first = run.instructions(argv)
    assert first > 1_000_000
    assert abs(run.instructions(argv) - first) <= first / 1000


def test_a_failing_command_is_not_counted(run: ModuleType) -> None:
    with pytest.raises(RuntimeError, match="callgrind of"):
        run.instructions([sys.executable, "-S", "-c", "raise SystemExit(3)"])
