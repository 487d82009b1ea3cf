"""How many GPUs a pytest command needs, read from the test source (never imported).

* :mod:`.selectors`: the test ids of a command line;
* :mod:`.outline`: a test file's module and classes, parsed only as far as needed;
* :mod:`.marks`: device marks and parametrized cases;
* :mod:`.devices`: the requirement of one selected test.

A relative test path is tried under each search root in order (after the
directory of a ``cd`` in the command), an absolute one as is.  Several
selectors in one command: the largest requirement.  Files are read through
:mod:`scriptbuilder.inputs.file_cache` (again only when their size or mtime
changes).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from scriptbuilder.inputs import file_cache
from scriptbuilder.inputs.tests.devices import Found, test_requirement
from scriptbuilder.inputs.tests.outline import read_module
from scriptbuilder.inputs.tests.selectors import TestId, is_perf_sanity, parse_test_ids

__all__ = [
    "DeviceRequirement",
    "InspectResult",
    "TestId",
    "is_perf_sanity",
    "parse_test_ids",
    "required_devices",
]


@dataclass(frozen=True)
class DeviceRequirement:
    devices: int
    source: str


@dataclass
class InspectResult:
    requirement: DeviceRequirement | None
    warnings: list[str] = field(default_factory=list)
    test_ids: list[TestId] = field(default_factory=list)


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


def _inspect_file(tid: TestId, path: str, warnings: list[str]) -> Found | None:
    try:
        module = file_cache.load(path, read_module)
    except OSError:
        warnings.append(f"test file {tid.path} could not be read ({path})")
        return None
    try:
        return test_requirement(module, tid, warnings)
    except (SyntaxError, ValueError) as exc:
        warnings.append(f"test file {tid.path} is not valid Python: {exc}")
        return None


def required_devices(
    test_cmd: str, search_roots: Sequence[str | os.PathLike[str]]
) -> InspectResult:
    """GPUs the command's tests declare (``.requirement``, None when nothing is derivable).

    ``.warnings`` explains what could not be derived (file not found, case not
    matched, no marker); ``.test_ids`` lists the selectors found.
    """
    test_ids = [tid for tid in parse_test_ids(test_cmd) if not tid.folder]
    result = InspectResult(None, [], test_ids)
    if not test_ids:
        result.warnings.append(f"no test file (*.py) found in test command: {test_cmd}")
        return result
    roots = [os.fspath(root) for root in search_roots]
    best: tuple[Found, str] | None = None
    unmarked: list[str] = []
    for tid in test_ids:
        candidates = _candidates(tid, roots)
        path = next((c for c in candidates if os.path.isfile(c)), None)
        if path is None:
            depth = len(Path(tid.path).parts)
            bases = [str(Path(c).parents[depth - 1]) for c in candidates] if depth else []
            tried = ", ".join(dict.fromkeys(bases)) or "(no search roots)"
            result.warnings.append(f"test file {tid.path} not found under {tried}")
            continue
        found = _inspect_file(tid, path, result.warnings)
        if found is None:
            unmarked.append(str(tid))
        elif best is None or found.devices > best[0].devices:
            best = (found, tid.path)
    if best is not None:
        found, display = best
        result.requirement = DeviceRequirement(found.devices, found.source(display))
    else:
        result.warnings.extend(f"no GPU-count marker found for {name}" for name in unmarked)
    return result
