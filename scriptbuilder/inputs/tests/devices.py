"""How many GPUs one selected test (a case, a function, a class, a file) needs.

For each case of a test (each combination of its parametrize decorators'
cases), in this order of precedence:

1. device marks: the closest level that carries one wins: the case's
   ``pytest.param(marks=...)`` > the function's decorators > its class
   (decorators and class-body ``pytestmark``), then the class's in-file base
   classes, then an enclosing class > the module ``pytestmark``.  Several
   device marks on one level: the largest;
2. device guards in the body, with the case's parameter values bound
   (:mod:`.guards`); an exact-count guard makes the need exact.

Case ids join the parametrize decorators' id parts bottom decorator first,
then the class's, then the module's, with ``-`` (pytest's order).  A selector
naming a case takes the cases matching it; one naming no case (or a case that
matches none, which adds a warning) takes the largest need over all cases; a
class or a whole file, the largest over every test in it.  With a ``-m``
expression, only the cases whose marks satisfy it count.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

from scriptbuilder.inputs.tests import marks as m
from scriptbuilder.inputs.tests.guards import body_guard
from scriptbuilder.inputs.tests.outline import FunctionNode, OutlineMiss, Scope, TestModule
from scriptbuilder.inputs.tests.selectors import TestId

#: Combinations of parametrize cases looked at per test, at most.
_MAX_COMBOS = 512


@dataclass(frozen=True)
class Found:
    """A need read from a file: ``label`` on ``where``, line ``lineno``."""

    devices: int
    label: str
    where: str
    lineno: int
    exact: bool = False
    #: The test file, as the selector names it.
    file: str = ""

    def source(self) -> str:
        return f"{self.label} on {self.where} in {self.file}:{self.lineno}"


@dataclass
class Walk:
    """What one lookup collects: warnings, and how many cases passed the ``-m`` filter."""

    warnings: list[str] = field(default_factory=list)
    select: Callable[[set[str]], bool] | None = None
    selected: int = 0


def merge(a: Found | None, b: Found | None, walk: Walk) -> Found | None:
    """The larger need; exact only when the smaller one runs with that many GPUs too."""
    if a is None:
        return b
    if b is None:
        return a
    hi, lo = (a, b) if a.devices >= b.devices else (b, a)
    if lo.exact and lo.devices < hi.devices:
        walk.warnings.append(
            f"{lo.where} needs exactly {lo.devices} GPUs but the job gets {hi.devices} "
            f"for {hi.where}: it will skip; select the tests separately"
        )
        return replace(hi, exact=False)
    if lo.exact and not hi.exact:  # the same count: exactly that many suits both
        return lo
    return hi


def _found(hit: m.Hit | None, where: str) -> Found | None:
    return Found(hit.devices, hit.label, where, hit.lineno) if hit is not None else None


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


def _combo_id(combo: tuple[m.Case, ...]) -> str:
    return "-".join(c.id if c.id is not None else f"#{c.index}" for c in combo)


def _func_requirement(
    owner: Scope, func: FunctionNode, case: str | None, walk: Walk, display: str
) -> Found | None:
    qual = f"{owner.qualname}::{func.name}" if owner.qualname else func.name
    module = owner.module
    params: list[list[m.Case]] = []
    inherited: Found | None = None
    names: set[str] = set()
    levels = [(list(reversed(func.decorator_list)), qual), *_levels(owner)]
    for exprs, label in levels:
        level_hits: list[m.Hit] = []
        for mark, line in m.iter_marks(exprs, module):
            names.add(m.mark_name(mark)[0] or "")
            cases = m.parametrize_cases(mark, module)
            if cases is not None:
                params.append(cases)
                continue
            hit = m.device_hit(mark, line, module)
            if hit is not None:
                level_hits.append(hit)
        if inherited is None and level_hits:
            inherited = _found(m.best(level_hits), label)

    combos: list[tuple[m.Case, ...]] = [()]
    if params:
        combos = m.match_case(case, params) if case is not None else []
        if case is not None and not combos:
            walk.warnings.append(
                f"case [{case}] of {display}::{qual} matches none of its parametrize ids;"
                " using the largest requirement over all its cases"
            )
        if not combos:
            combos = list(itertools.islice(itertools.product(*params), _MAX_COMBOS))
    found: Found | None = None
    for combo in combos:
        combo_marks = [expr for c in combo for expr in c.marks]
        if walk.select is not None and not walk.select(names | m.mark_names(combo_marks, module)):
            continue
        walk.selected += 1
        where = f"{qual}[{case if case is not None else _combo_id(combo)}]" if combo else qual
        need = _found(m.best(m.hits(combo_marks, module)), where) or inherited
        if need is None:
            values = {name: value for c in combo for name, value in c.values.items()}
            guard = body_guard(func, values, module)
            if guard is not None:
                need = Found(guard.devices, guard.label, where, guard.lineno, guard.exact)
        found = merge(found, need, walk)
    return found


def _scope_requirement(scope: Scope, walk: Walk, display: str) -> Found | None:
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
                found = merge(found, _func_requirement(scope, func, None, walk, display), walk)
    for name, cls in scope.classes.items():
        if name.startswith("Test"):
            found = merge(found, _scope_requirement(cls, walk, display), walk)
            any_test = True
    if not any_test:
        for exprs, label in _levels(scope):
            hit = m.best(m.hits(exprs, scope.module))
            if hit is not None:
                return _found(hit, label)
    return found


def _requirement(module: TestModule, tid: TestId, walk: Walk) -> Found | None:
    display = tid.path
    names = [*(tid.cls.split("::") if tid.cls else []), *([tid.func] if tid.func else [])]
    if not names:
        return _scope_requirement(module.parse_whole(), walk, display)
    scope = module.root
    for i, name in enumerate(names):
        last = i == len(names) - 1
        func = _find_func(scope, name) if last else None
        if func is not None:
            return _func_requirement(scope, func, tid.case, walk, display)
        cls = module.find_class(name) if scope.kind == "module" else scope.classes.get(name)
        if cls is None:
            if module.whole is None:
                raise OutlineMiss(f"{name} not found")
            kind = "test" if last else "class"
            walk.warnings.append(
                f"{kind} {name} not found in {display}; using the markers of "
                f"{scope.qualname or 'the module'}"
            )
            for exprs, label in _levels(scope):
                hit = _found(m.best(m.hits(exprs, module)), label)
                if hit is not None:
                    return hit
            return None
        scope = cls
    return _scope_requirement(scope, walk, display)


def test_requirement(module: TestModule, tid: TestId, walk: Walk) -> Found | None:
    """What ``tid`` needs in ``module``: outline first, the whole file when it cannot tell.

    Raises SyntaxError when the file is not valid Python.
    """
    own = Walk(select=walk.select)
    try:
        found = _requirement(module, tid, own)
    except OutlineMiss:
        module.parse_whole()
        own = Walk(select=walk.select)
        found = _requirement(module, tid, own)
    walk.warnings.extend(own.warnings)
    walk.selected += own.selected
    return found
