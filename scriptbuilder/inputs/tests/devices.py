"""How many GPUs one selected test (a case, a function, a class, a file) declares.

The closest level that carries a device mark wins: the selected parametrized
case > the function's decorators > its class (decorators and class-body
``pytestmark``), then the class's in-file base classes, then an enclosing
class > the module ``pytestmark``.  Several device marks on one level: the
largest.  Case ids join the parametrize decorators' id parts bottom decorator
first, then the class's, then the module's, with ``-`` (pytest's order).

When the selector names no case (or its case matches none, which adds a
warning) and the function has parametrized cases carrying device marks, each
case counts with its own marks or, when it has none, with what the function
inherits; the requirement is the largest over all cases.  A class or a whole
file: the largest over every test in it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from scriptbuilder.inputs.tests import marks as m
from scriptbuilder.inputs.tests.outline import FunctionNode, OutlineMiss, Scope, TestModule
from scriptbuilder.inputs.tests.selectors import TestId


@dataclass(frozen=True)
class Found:
    """A requirement read from a file: ``label`` on ``where``, line ``lineno``."""

    devices: int
    label: str
    where: str
    lineno: int

    def source(self, display: str) -> str:
        return f"{self.label} on {self.where} in {display}:{self.lineno}"


def _found(hit: m.Hit | None, where: str) -> Found | None:
    return Found(hit.devices, hit.label, where, hit.lineno) if hit is not None else None


def larger(a: Found | None, b: Found | None) -> Found | None:
    if a is None:
        return b
    if b is None or a.devices >= b.devices:
        return a
    return b


def _mro(scope: Scope) -> Iterator[tuple[Scope, str]]:
    """A class, then its base classes defined in the same file (breadth first)."""
    seen = {id(scope)}
    queue = [scope]
    while queue:
        item = queue.pop(0)
        yield item, (item.qualname if item is scope else f"{item.qualname} (base of {scope.name})")
        for base in item.bases:
            if "." in base:
                continue
            found = item.parent.classes.get(base) if item.parent is not None else None
            if found is None:
                found = item.module.find_class(base)
            if found is not None and id(found) not in seen:
                seen.add(id(found))
                queue.append(found)


def _levels(scope: Scope) -> Iterator[tuple[list[ast.expr], str]]:
    """Marks above a test, closest first: class (and bases), outer classes, module."""
    current: Scope | None = scope
    while current is not None and current.kind == "class":
        for level, label in _mro(current):
            yield level.marks, label
        current = current.parent
    yield scope.module.module_marks(), "module"


def _find_func(scope: Scope, name: str) -> FunctionNode | None:
    if scope.kind == "module":
        return scope.module.find_func(name)
    for level, _label in _mro(scope):
        func = level.funcs.get(name)
        if func is not None:
            return func
    return None


def _func_requirement(
    owner: Scope, func: FunctionNode, case: str | None, warnings: list[str], display: str
) -> Found | None:
    qual = f"{owner.qualname}::{func.name}" if owner.qualname else func.name
    module = owner.module
    params: list[list[m.Case]] = []
    inherited: Found | None = None
    levels = [(list(reversed(func.decorator_list)), qual), *_levels(owner)]
    for exprs, label in levels:
        level_hits: list[m.Hit] = []
        for mark, line in m.iter_marks(exprs, module):
            cases = m.parametrize_cases(mark, module)
            if cases is not None:
                params.append(cases)
                continue
            hit = m.device_hit(mark, line, module)
            if hit is not None:
                level_hits.append(hit)
        if inherited is None and level_hits:
            inherited = _found(m.best(level_hits), label)

    if not params:
        return inherited
    if case is not None:
        combos = m.match_case(case, params)
        if combos:
            case_hits = [hit for combo in combos for c in combo for hit in m.hits(c.marks, module)]
            return _found(m.best(case_hits), f"{qual}[{case}]") or inherited
        warnings.append(
            f"case [{case}] of {display}::{qual} matches none of its parametrize ids;"
            " using the largest requirement over all its cases"
        )
    found: Found | None = None
    for cases in params:
        for option in cases:
            shown = option.id if option.id is not None else f"#{option.index}"
            hit = m.best(m.hits(option.marks, module))
            found = larger(found, _found(hit, f"{qual}[{shown}]"))
    if found is None:
        return inherited
    unmarked_combo = all(any(not m.hits(c.marks, module) for c in cases) for cases in params)
    return larger(found, inherited) if unmarked_combo else found


def _scope_requirement(scope: Scope, warnings: list[str], display: str) -> Found | None:
    """Largest requirement over every test of a class or module."""
    found: Found | None = None
    any_test = False
    seen: set[str] = set()
    levels = [scope] if scope.kind == "module" else [level for level, _label in _mro(scope)]
    for level in levels:
        for name, func in level.funcs.items():
            if name.startswith("test") and name not in seen:
                seen.add(name)
                any_test = True
                found = larger(found, _func_requirement(scope, func, None, warnings, display))
    for name, cls in scope.classes.items():
        if name.startswith("Test"):
            found = larger(found, _scope_requirement(cls, warnings, display))
            any_test = True
    if not any_test:
        for exprs, label in _levels(scope):
            hit = m.best(m.hits(exprs, scope.module))
            if hit is not None:
                return _found(hit, label)
    return found


def _requirement(module: TestModule, tid: TestId, warnings: list[str]) -> Found | None:
    display = tid.path
    names = [*(tid.cls.split("::") if tid.cls else []), *([tid.func] if tid.func else [])]
    if not names:
        return _scope_requirement(module.parse_whole(), warnings, display)
    scope = module.root
    for i, name in enumerate(names):
        last = i == len(names) - 1
        func = _find_func(scope, name) if last else None
        if func is not None:
            return _func_requirement(scope, func, tid.case, warnings, display)
        cls = module.find_class(name) if scope.kind == "module" else scope.classes.get(name)
        if cls is None:
            if module.whole is None:
                raise OutlineMiss(f"{name} not found")
            kind = "test" if last else "class"
            warnings.append(
                f"{kind} {name} not found in {display}; using the markers of "
                f"{scope.qualname or 'the module'}"
            )
            for exprs, label in _levels(scope):
                hit = _found(m.best(m.hits(exprs, module)), label)
                if hit is not None:
                    return hit
            return None
        scope = cls
    return _scope_requirement(scope, warnings, display)


def test_requirement(module: TestModule, tid: TestId, warnings: list[str]) -> Found | None:
    """What ``tid`` needs in ``module``: outline first, the whole file when it cannot tell.

    Raises SyntaxError when the file is not valid Python.
    """
    own: list[str] = []
    try:
        found = _requirement(module, tid, own)
    except OutlineMiss:
        module.parse_whole()
        own.clear()
        found = _requirement(module, tid, own)
    warnings.extend(own)
    return found
