"""How many GPUs one selected test (a case, a function, a class, a file) needs.

Each case needs the largest of its device marks (the closest level carrying one: the
case's ``pytest.param(marks=...)``, the function, its class and in-file bases, enclosing
classes, the module) and of what :mod:`.evidence` reads.  Case ids join the parametrize
id parts bottom decorator first, then the class's, then the module's (pytest's order).  A
selector naming no case, or a case matching none (with a warning), takes the largest need
over all cases; ``-m`` and ``-k`` keep only the cases they select."""

from __future__ import annotations

import ast
import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from scriptbuilder.inputs.tests import marks as m
from scriptbuilder.inputs.tests.evidence import SIZE_NAMES, body_hits, case_hits
from scriptbuilder.inputs.tests.marks import Found
from scriptbuilder.inputs.tests.selectors import TestId
from scriptbuilder.inputs.tests.source import FunctionNode, Scope, TestModule

Combo = tuple[m.Case, ...]
_MAX_COMBOS = 512  # combinations of parametrize cases looked at per test, at most
_SIZE_LABEL = re.compile(r"(?<![A-Za-z_])(tp|pp|cp)(?:_size)?[:=]?(\d+)", re.IGNORECASE)
_SIZE_KINDS = {f"{kind}{tail}": kind for kind in ("tp", "pp", "cp") for tail in ("", "_size")}
_SIZE_KINDS |= {"tensor_parallel_size": "tp", "pipeline_parallel_size": "pp"}
_SIZE_KINDS |= {"context_parallel_size": "cp"}


@dataclass
class Walk:
    """What one lookup collects: warnings, evidence, and how many cases passed ``-m``/``-k``."""

    warnings: list[str] = field(default_factory=list)
    select: m.Select | None = None
    keywords: m.Select | None = None
    selected: int = 0
    evidence: list[Found] = field(default_factory=list)
    #: Why a selection names cases the source does not show (their count is not known).
    unresolved: list[str] = field(default_factory=list)


def merge(a: Found | None, b: Found | None, walk: Walk) -> Found | None:
    """The larger need; exact only when the smaller one runs with that many GPUs too."""
    if a is None or b is None:
        return a or b
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


def _found(hit: Found | None, where: str) -> Found | None:
    return replace(hit, where=where) if hit else None


def _levels(scope: Scope) -> Iterator[tuple[list[ast.expr], str]]:
    """Marks above a test, closest first: class (and bases), outer classes, module."""
    current: Scope | None = scope
    while current is not None and current.parent is not None:
        for level in current.mro():
            base = "" if level is current else f" (base of {current.name})"
            yield level.marks, level.qualname + base
        current = current.parent
    yield scope.module.root.marks, "module"


def _inherited(scope: Scope) -> Found | None:
    for exprs, label in _levels(scope):
        if (hit := m.best_hit(exprs, scope.module)) is not None:
            return _found(hit, label)
    return None


def _bound_by_labels(
    case: str, combos: list[Combo], func: FunctionNode, module: TestModule
) -> tuple[list[Combo], m.Env]:
    """The cases whose parallel sizes agree with the ``tp``/``pp``/``cp`` labels of the
    selected id (``tp:1-pp:2``, ``tp2pp2``), and those labels bound to the test's size
    parameters no case gives a value."""
    labels: dict[str, int] = {}
    for kind, n in _SIZE_LABEL.findall(case):
        labels.setdefault(kind.lower(), int(n))

    def agrees(combo: Combo) -> bool:
        for c in combo:
            for name, value in c.values.items():
                kind = _SIZE_KINDS.get(name)
                n = m.int_value(value, module) if kind in labels else None
                if kind is not None and n is not None and n != labels[kind]:
                    return False
        return True

    kept = [combo for combo in combos if agrees(combo)] or combos
    args = [a.arg for a in (*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs)]
    env: m.Env = {
        name: ast.Constant(labels[kind])
        for name in args
        if (kind := _SIZE_KINDS.get(name)) in labels
    }
    return kept, env


def _keywords(
    keywords: m.Select, names: set[str], func: FunctionNode, case: str | None, combo: Combo
) -> bool | None:
    """Whether ``-k`` keeps a case: over each id pytest may give it, None when they differ
    or when its id may be any text."""
    if case is not None or not combo:
        return keywords({*names, f"{func.name}[{case}]" if case else func.name}, False)
    if any(c.id is None and not c.options for c in combo):
        return keywords({*names, func.name + "["}, True)
    choices = [[c.id] if c.id is not None else list(c.options) for c in combo]
    ids = itertools.islice(itertools.product(*choices), _MAX_COMBOS)
    verdicts = {keywords({*names, f"{func.name}[{'-'.join(i)}]"}, False) for i in ids}
    return verdicts.pop() if len(verdicts) == 1 else None


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
        for mark, _line, home in m.iter_marks(exprs, module):
            names.add(m.mark_name(mark)[0] or "")
            if (cases := m.parametrize_cases(mark, home)) is not None:
                params.append(cases)
        inherited = inherited or _found(m.best_hit(exprs, module), label)

    combos = m.match_case(case, params) if case is not None and params else []
    if case is not None and not combos:
        why = "matches none of its parametrize ids" if params else "is not parametrized here"
        walk.unresolved.append(
            f"[{case}] of {display}::{qual} {why} (its cases come from something not read here)"
        )
    combos = combos or list(itertools.islice(itertools.product(*params), _MAX_COMBOS))
    label_env: m.Env = {}
    if case is not None:
        combos, label_env = _bound_by_labels(case, combos, func, module)
    found: Found | None = None
    unread: set[str] = set()  # size parameters of the selected cases with unknown values
    imported_from = module.filename if module.depth else ""  # a test of another module
    words = {*display.split("/"), *qual.split("::")}
    for combo in combos:
        combo_marks = [expr for c in combo for expr in c.marks]
        marked = names | m.mark_names(combo_marks, module)
        auto = "-".join(c.id if c.id is not None else f"#{c.index}" for c in combo)
        case_id = case if case is not None else auto if combo else None
        if walk.select and not walk.select(marked, False):
            continue
        if (
            walk.keywords
            and _keywords(walk.keywords, {*words, *marked}, func, case, combo) is False
        ):
            continue
        walk.selected += 1
        where = f"{qual}[{case_id}]" if combo else qual
        values = {**label_env, **{name: value for c in combo for name, value in c.values.items()}}
        need = _found(m.best_hit(combo_marks, module), where) or inherited
        hits = [*body_hits(func, values, module, owner), *case_hits(func, case_id, values, module)]
        for piece in [need, *(_found(hit, where) for hit in hits)]:
            if piece is not None:
                piece = replace(piece, file=piece.file or imported_from)
                walk.evidence.append(piece)
                found = merge(found, piece, walk)
        unread |= {n for c in combo for n in c.unread if n in SIZE_NAMES and n not in values}
    if found is None and unread:
        walk.unresolved.append(
            f"{display}::{qual} takes {', '.join(sorted(unread))} from values not read here"
        )
    return found


def _imported_test(module: TestModule, name: str) -> tuple[Scope, FunctionNode] | None:
    """A test function the module imports from a module of the test tree (pytest collects
    it there too), with that module's top scope."""
    source = module.import_source(name) if name.startswith("test") else None
    func = source[0].root.funcs.get(source[1]) if source is not None else None
    return (source[0].root, func) if source is not None and func is not None else None


def _scope_requirement(scope: Scope, walk: Walk, display: str) -> Found | None:
    """Largest requirement over every test of a class or module (imported ones included)."""
    tests: dict[str, tuple[Scope, FunctionNode]] = {}
    for level in scope.mro():
        tests |= {
            n: (scope, f) for n, f in level.funcs.items() if n.startswith("test") and n not in tests
        }
    if scope.parent is None:
        for name in scope.module.imports:
            if name not in tests and (imported := _imported_test(scope.module, name)):
                tests[name] = imported
    classes = [cls for name, cls in scope.classes.items() if name.startswith("Test")]
    found: Found | None = None
    for owner, func in tests.values():
        found = merge(found, _func_requirement(owner, func, None, walk, display), walk)
    for cls in classes:
        found = merge(found, _scope_requirement(cls, walk, display), walk)
    return found if tests or classes else _inherited(scope)


def test_requirement(module: TestModule, tid: TestId, walk: Walk) -> Found | None:
    """What ``tid`` needs in ``module``."""
    names = [*(tid.cls.split("::") if tid.cls else []), *([tid.func] if tid.func else [])]
    scope = module.root
    for i, name in enumerate(names):
        last = i == len(names) - 1
        func = next((f for lvl in scope.mro() if (f := lvl.funcs.get(name)) and last), None)
        if func is not None:
            return _func_requirement(scope, func, tid.case, walk, tid.path)
        if last and scope is module.root and (imported := _imported_test(module, name)):
            return _func_requirement(*imported, tid.case, walk, tid.path)
        cls = scope.classes.get(name)
        if cls is None:
            kind = "test" if last else "class"
            walk.warnings.append(
                f"{kind} {name} not found in {tid.path}; using the markers of "
                f"{scope.qualname or 'the module'}"
            )
            walk.unresolved.append(f"{kind} {name} is not defined in {tid.path}")
            return _inherited(scope)
        scope = cls
    return _scope_requirement(scope, walk, tid.path)
