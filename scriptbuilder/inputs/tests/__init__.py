"""How many GPUs a pytest command needs, and where it must run, read from the test
source (never imported).

* :mod:`.selectors`: the test ids of a command line;
* :mod:`.locate`: the directory from which pytest finds them;
* :mod:`.outline`: a test file's module and classes, parsed only as far as needed;
* :mod:`.marks`: device marks, parametrized cases and ``-m`` expressions;
* :mod:`.guards`: device guards in a test's body;
* :mod:`.devices`: the need of one selected test.

Beyond the file: a folder selector takes the largest need over its test
files; a case id carrying ``gpus:N`` (or ``tp:N``, times ``pp:M``) labels, as
generated perf tests do, needs that many GPUs when the source says nothing.
Several selectors in one command: the largest need.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from scriptbuilder.inputs.tests.devices import Found, Walk, merge, test_requirement
from scriptbuilder.inputs.tests.locate import STEP_DIRS, locate
from scriptbuilder.inputs.tests.marks import mark_filter
from scriptbuilder.inputs.tests.outline import read_module
from scriptbuilder.inputs.tests.selectors import (
    PytestCommand,
    TestId,
    is_perf_sanity,
    parse_command,
    parse_test_ids,
)

__all__ = [
    "STEP_DIRS",
    "DeviceRequirement",
    "InspectResult",
    "TestId",
    "inspect_tests",
    "is_perf_sanity",
    "parse_test_ids",
    "required_devices",
]

_GPUS_LABEL = re.compile(r"(?<![\w.])gpus:(\d+)")
_TP_LABEL = re.compile(r"(?<![\w.])tp:(\d+)")
_PP_LABEL = re.compile(r"(?<![\w.])pp:(\d+)")
_PARALLELISM = re.compile(r"(?<![A-Za-z])(?:tp|pp|ep|cp|dp)\d+")
_TEST_FILE = re.compile(r"test_\w*\.py|\w+_test\.py")


@dataclass(frozen=True)
class DeviceRequirement:
    devices: int
    source: str
    #: True when the tests run only with exactly ``devices`` GPUs visible.
    exact: bool = False


@dataclass
class InspectResult:
    requirement: DeviceRequirement | None
    warnings: list[str] = field(default_factory=list)
    test_ids: list[TestId] = field(default_factory=list)
    #: Where the step must run, relative to the project folder (None: where it is).
    workdir: str | None = None
    workdir_reason: str = ""
    #: One line per selector pytest would not find from the step's directory.
    missing: list[str] = field(default_factory=list)
    #: Selectors naming parallelism (``tp8``...) for which nothing declares a count.
    guesses: list[str] = field(default_factory=list)


def _label_need(tid: TestId) -> Found | None:
    """``gpus:N`` / ``tp:N`` (x ``pp:M``) labels of a (generated perf) case id."""
    case = tid.case or ""
    if gpus := _GPUS_LABEL.search(case):
        n = int(gpus.group(1))
        return Found(n, f"gpus:{n} label", str(tid), 0) if n >= 1 else None
    if tp := _TP_LABEL.search(case):
        pp = _PP_LABEL.search(case)
        n = int(tp.group(1)) * (int(pp.group(1)) if pp else 1)
        label = f"tp:{tp.group(1)}" + (f" x pp:{pp.group(1)}" if pp else "") + " labels"
        return Found(n, label, str(tid), 0) if n >= 1 else None
    return None


def _file_need(tid: TestId, path: str, walk: Walk, expr: str | None) -> Found | None:
    """What ``tid`` needs in the file at ``path``, counting the cases the ``-m``
    expression ``expr`` selects (every case when None)."""
    try:
        found, warnings, selected = _file_lookup(path, tid, expr)
    except OSError:
        walk.warnings.append(f"test file {tid.path} could not be read ({path})")
        return None
    except (SyntaxError, ValueError) as exc:
        walk.warnings.append(f"test file {tid.path} is not valid Python: {exc}")
        return None
    walk.warnings.extend(warnings)
    walk.selected += selected
    return found


def _file_lookup(
    path: str, tid: TestId, expr: str | None
) -> tuple[Found | None, tuple[str, ...], int]:
    """The need of ``tid`` in the file, the lookup's warnings and how many cases
    the ``-m`` filter selected."""
    module = read_module(path)
    walk = Walk(select=mark_filter(expr) if expr is not None else None)
    found = test_requirement(module, tid, walk)
    if found is not None:
        found = replace(found, file=tid.path)
    return found, tuple(walk.warnings), walk.selected


def _folder_need(tid: TestId, path: str, walk: Walk, expr: str | None) -> Found | None:
    """The largest need over the test files below a folder (pytest's default names)."""
    found: Found | None = None
    for top, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__")))
        for name in sorted(files):
            if _TEST_FILE.fullmatch(name):
                rel = posixpath.join(tid.path, posixpath.relpath(posixpath.join(top, name), path))
                sub = TestId(posixpath.normpath(rel))
                need = _file_need(sub, posixpath.join(top, name), walk, expr)
                found = merge(found, need, walk)
    return found


def _inspect(
    cmd: PytestCommand, located: Iterable[tuple[TestId, str]], result: InspectResult
) -> None:
    select: Callable[[set[str]], bool] | None = None
    expr = cmd.mark_exprs[-1] if cmd.mark_exprs else None  # pytest uses the last -m
    if expr is not None:
        select = mark_filter(expr)
        if select is None:
            result.warnings.append(f"-m {expr!r} is not a mark expression read here; ignored")
    select_expr = expr if select is not None else None  # the lookups apply it themselves
    best: Found | None = None
    walk = Walk(warnings=result.warnings)
    unmarked: list[TestId] = []
    for tid, path in located:
        own = Walk()
        if tid.folder:
            need = _folder_need(tid, path, own, select_expr)
        else:
            need = _file_need(tid, path, own, select_expr)
        walk.warnings.extend(own.warnings)
        if select is not None and own.selected == 0:
            walk.warnings.append(f"no test of {tid} carries marks matching -m {expr!r}")
            continue
        need = need or _label_need(tid)
        if need is None:
            unmarked.append(tid)
        best = merge(best, need, walk)
    if best is not None:
        source = best.source() if best.lineno else f"{best.label} in the test id {best.where}"
        result.requirement = DeviceRequirement(best.devices, source, best.exact)
        return
    result.warnings.extend(f"no GPU-count marker found for {tid}" for tid in unmarked)
    result.guesses = [str(tid) for tid in unmarked if _PARALLELISM.search(str(tid))]


def inspect_tests(test_cmd: str, repo_root: str | None, step_dir: str | None) -> InspectResult:
    """Where the command's tests are (see :mod:`.locate`) and the GPUs they need."""
    cmd = parse_command(test_cmd)
    result = InspectResult(None, [], cmd.ids)
    if not cmd.ids:
        result.warnings.append(f"no test file (*.py) found in test command: {test_cmd}")
        return result
    located = locate(cmd, repo_root, step_dir)
    result.warnings.extend(located.warnings)
    result.missing = located.missing
    result.workdir, result.workdir_reason = located.workdir, located.reason
    _inspect(cmd, [(tid, located.paths[tid]) for tid in cmd.ids if tid in located.paths], result)
    return result


def _candidates(tid: TestId, roots: Sequence[str]) -> list[str]:
    path = tid.path
    if os.path.isabs(path):
        return [path]
    join = os.path.join
    out: list[str] = []
    if tid.cwd is not None:
        if os.path.isabs(tid.cwd):
            out.append(join(tid.cwd, path))
        else:
            out.extend(join(root, tid.cwd, path) for root in roots)
    out.extend(join(root, path) for root in roots)
    return out


def required_devices(
    test_cmd: str, search_roots: Sequence[str | os.PathLike[str]]
) -> InspectResult:
    """GPUs the command's tests need, each selector looked up under the first of
    ``search_roots`` that holds it (``.requirement`` is None when nothing says)."""
    cmd = parse_command(test_cmd)
    result = InspectResult(None, [], cmd.ids)
    if not cmd.ids:
        result.warnings.append(f"no test file (*.py) found in test command: {test_cmd}")
        return result
    roots = [os.fspath(root) for root in search_roots]
    located: list[tuple[TestId, str]] = []
    for tid in cmd.ids:
        candidates = _candidates(tid, roots)
        exists = os.path.isdir if tid.folder else os.path.isfile
        path = next((c for c in candidates if exists(c)), None)
        if path is None:
            depth = len(tid.path.split("/"))
            bases = [c.rsplit("/", depth)[0] for c in candidates]
            tried = ", ".join(dict.fromkeys(bases)) or "(no search roots)"
            result.warnings.append(f"test file {tid.path} not found under {tried}")
        else:
            located.append((tid, path))
    _inspect(cmd, located, result)
    return result
