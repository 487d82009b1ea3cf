"""How many GPUs a pytest command needs, and where it must run, read from the test
source (never imported): :mod:`.selectors` (the test ids), :mod:`.locate` (where pytest
finds them), :mod:`.source` (a file and its conftest.py files), :mod:`.marks`,
:mod:`.evidence` and :mod:`.devices` (the need of one test), :mod:`.testdb` (CI stages).

A folder takes the largest need over its test files, several selectors the largest need;
a case id with ``gpus:N`` (or ``tp:N`` x ``pp:M``) labels needs that many when the source
says nothing, and then the largest ``system_gpu_count`` of the test-db stages listing the
test, with a warning (a need above every such stage is warned about too).
"""

from __future__ import annotations

import os
import posixpath
import re
import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from scriptbuilder.inputs.tests.devices import Walk, merge, test_requirement
from scriptbuilder.inputs.tests.locate import locate
from scriptbuilder.inputs.tests.marks import Found, Select, expression_filter
from scriptbuilder.inputs.tests.selectors import (
    PytestCommand,
    TestId,
    is_perf_sanity,
    parse_command,
    parse_test_ids,
)
from scriptbuilder.inputs.tests.source import read_module
from scriptbuilder.inputs.tests.testdb import Stage, StageReader, listing, read_stages

__all__ = ["InspectResult", "TestId", "inspect_tests", "is_perf_sanity", "parse_test_ids"]

_LABELS = re.compile(r"(?<![\w.])(gpus|tp|pp):(\d+)")
_TEST_FILE = re.compile(r"test_\w*\.py|\w+_test\.py")


@dataclass(frozen=True)
class DeviceRequirement:
    devices: int
    source: str
    #: True when the tests run only with exactly ``devices`` GPUs visible.
    exact: bool = False
    #: Every piece of evidence read: ``(devices, source)``, the deciding one included.
    evidence: tuple[tuple[int, str], ...] = ()


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
    #: One line per selection whose cases the source does not show, nor the test-db list
    #: (a ``-k`` or an id matching nothing, cases from a fixture): its count is not known.
    unresolved: list[str] = field(default_factory=list)


def _label_need(tid: TestId) -> Found | None:
    """``gpus:N`` / ``tp:N`` (x ``pp:M``) labels of a (generated perf) case id."""
    labels = dict(reversed(_LABELS.findall(tid.case or "")))  # the first of each kind
    if "gpus" in labels:
        n = int(labels["gpus"])
        label = f"gpus:{n} label"
    elif "tp" in labels:
        n = int(labels["tp"]) * int(labels.get("pp", 1))
        pp = f" x pp:{labels['pp']}" if "pp" in labels else ""
        label = f"tp:{labels['tp']}{pp} labels"
    else:
        return None
    return Found(n, label, 0, where=str(tid)) if n >= 1 else None


def _file_need(tid: TestId, path: str, walk: Walk, top: str | None) -> Found | None:
    """What ``tid`` needs in the file at ``path`` (conftest.py files read up to ``top``)."""
    try:
        module = read_module(path, top)
    except (OSError, SyntaxError, ValueError) as exc:  # ValueError: NUL bytes, or too large
        why = f" could not be read ({path})" if isinstance(exc, OSError) else f": {exc}"
        walk.warnings.append(f"test file {tid.path}{why}")
        return None
    start = len(walk.evidence)
    found = test_requirement(module, tid, walk)
    walk.evidence[start:] = [replace(f, file=f.file or tid.path) for f in walk.evidence[start:]]
    return replace(found, file=found.file or tid.path) if found is not None else None


def _folder_need(tid: TestId, path: str, walk: Walk, top: str | None) -> Found | None:
    """The largest need over the test files below a folder (pytest's default names)."""
    found: Found | None = None
    for here, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__")))
        for name in sorted(files):
            if _TEST_FILE.fullmatch(name):
                rel = posixpath.join(tid.path, posixpath.relpath(posixpath.join(here, name), path))
                sub = TestId(posixpath.normpath(rel))
                found = merge(found, _file_need(sub, posixpath.join(here, name), walk, top), walk)
    return found


Find = Callable[[PytestCommand, InspectResult], Iterable[tuple[TestId, str]]]


def _inspect(test_cmd: str, find: Find, top: str | None, read: StageReader) -> InspectResult:
    """The GPUs the selectors of ``test_cmd`` need: files from ``find``, stages from ``read``."""
    cmd = parse_command(test_cmd)
    result = InspectResult(None, [], cmd.ids)
    if not cmd.ids:
        result.warnings.append(f"no test file (*.py) found in test command: {test_cmd}")
        return result
    located = find(cmd, result)
    known = read(top) if top else ()
    best: Found | None = None
    filters: list[Select | None] = []  # the command's last -m and -k, as pytest reads them
    for flag, exprs in (("-m", cmd.mark_exprs), ("-k", cmd.keyword_exprs)):
        filters.append(expression_filter(exprs[-1], flag == "-k") if exprs else None)
        if exprs and filters[-1] is None:
            result.warnings.append(f"{flag} {exprs[-1]!r} is not an expression read here; ignored")
    walk = Walk(result.warnings, filters[0], filters[1])
    given = zip(("-m", "-k"), (cmd.mark_exprs, cmd.keyword_exprs), filters, strict=True)
    shown = " ".join(f"{flag} {shlex.quote(e[-1])}" for flag, e, f in given if f)
    unmarked: list[TestId] = []
    stages: list[Stage] = []
    for tid, path in located:
        before, gaps = walk.selected, len(walk.unresolved)
        need = (_folder_need if tid.folder else _file_need)(tid, path, walk, top)
        if need is None and (need := _label_need(tid)) is not None:
            walk.evidence.append(need)
            del walk.unresolved[gaps:]  # the id's own labels give the count
        if any(filters) and walk.selected == before:
            walk.unresolved.append(f"no test of {tid} matches {shown}")
        reasons = walk.unresolved[gaps:]
        listed = listing(known, tid)
        stages += listed
        if reasons and not listed and need is None:
            result.unresolved.append("; ".join(reasons))
            continue
        walk.warnings.extend(reasons)
        if need is None or (reasons and listed):
            unmarked.append(tid)
        elif listed and need.devices > max(s.gpus for s in listed):
            walk.warnings.append(
                f"{tid} needs {need.devices} GPUs, more than every test-db stage listing it "
                f"({', '.join(map(str, listed))})"
            )
        best = merge(best, need, walk)
    evidence = tuple(dict.fromkeys((f.devices, f.source()) for f in walk.evidence))
    if best is not None:
        result.requirement = DeviceRequirement(best.devices, best.source(), best.exact, evidence)
    if unmarked and stages:
        stage = max(stages, key=lambda s: s.gpus)
        if best is None or stage.gpus > best.devices:
            source = f"test-db {stage}, which lists {', '.join(map(str, unmarked))}"
            result.requirement = DeviceRequirement(
                stage.gpus, source, False, (*evidence, (stage.gpus, source))
            )
        result.warnings.append(
            f"the source of {', '.join(map(str, unmarked))} gives no GPU count; "
            f"{stage.gpus} from test-db {stage}"
        )
    elif unmarked and best is None:
        result.warnings.extend(f"no GPU-count marker found for {tid}" for tid in unmarked)
    return result


def inspect_tests(
    test_cmd: str, repo_root: str | None, step_dir: str | None, read: StageReader = read_stages
) -> InspectResult:
    """Where the command's tests are (see :mod:`.locate`), the GPUs they need, and the
    test-db stages (``read(repo_root)``) that list them."""

    def find(cmd: PytestCommand, result: InspectResult) -> list[tuple[TestId, str]]:
        located = locate(cmd, repo_root, step_dir)
        result.warnings.extend(located.warnings)
        result.missing = located.missing
        result.workdir, result.workdir_reason = located.workdir, located.reason
        return [(tid, located.paths[tid]) for tid in cmd.ids if tid in located.paths]

    return _inspect(test_cmd, find, repo_root, read)
