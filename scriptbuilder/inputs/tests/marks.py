"""Device marks (``skip_less_device(N)``, ``skip_less_mpi_world_size(N)``, ``gpuN``,
``skipif(<device count> < N)``), parametrized cases and their pytest ids, and ``-m``/``-k``
expressions, read from ``ast`` nodes.  Parts of an id that cannot be computed statically
match any text."""

from __future__ import annotations

import ast
import keyword
import operator
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from scriptbuilder.inputs.tests.source import TestModule

_GPU_MARK = re.compile(r"gpu(\d+)")
_COUNT_FUNCS = frozenset({"device_count", "get_device_count"})
_MAX_NAME_DEPTH = 4
Env = dict[str, ast.expr]
#: A test over a test's mark names or keywords (``-m``, ``-k``).
Select = Callable[[set[str]], bool]
_ARITH = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}
_ARITH[ast.FloorDiv] = operator.floordiv
_FLIP = {ast.Lt: ast.Gt, ast.LtE: ast.GtE, ast.Gt: ast.Lt, ast.GtE: ast.LtE}


@dataclass(frozen=True)
class Found:
    """A device count read from the source: ``label`` on ``where``, line ``lineno``."""

    devices: int
    label: str
    lineno: int
    exact: bool = False
    #: The file: a conftest.py it was read from, else the test file as the selector names it.
    file: str = ""
    where: str = ""

    def source(self) -> str:
        if not self.lineno:
            return f"{self.label} in the test id {self.where}"
        return f"{self.label} on {self.where} in {self.file}:{self.lineno}"


@dataclass
class Case:
    """One value set of a parametrize decorator."""

    id: str | None  # None: not computable statically, matches anything
    marks: list[ast.expr]
    index: int
    values: dict[str, ast.expr] = field(default_factory=dict)  # argument name -> value, if known


def callee_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def mark_name(node: ast.expr) -> tuple[str | None, ast.Call | None]:
    """``pytest.mark.x`` / ``mark.x`` (optionally called) -> ``("x", call)``."""
    call = node if isinstance(node, ast.Call) else None
    func = call.func if call is not None else node
    if isinstance(func, ast.Attribute) and callee_name(func.value) == "mark":
        return func.attr, call
    return None, None


def iter_marks(
    exprs: Sequence[ast.expr], module: TestModule, depth: int = 0, use_line: int | None = None
) -> Iterator[tuple[ast.expr, int]]:
    """Marks of a decorator list or ``pytestmark``/``marks=`` value, lists flattened."""
    for expr in exprs:
        line = use_line if use_line is not None else expr.lineno
        if isinstance(expr, (ast.List, ast.Tuple)):
            yield from iter_marks(expr.elts, module, depth, line)
        elif isinstance(expr, ast.Name) and depth < _MAX_NAME_DEPTH:
            bound = module.names.get(expr.id)
            yield from iter_marks([bound] if bound else [], module, depth + 1, line)
        else:
            yield expr, line


def mark_names(exprs: Sequence[ast.expr], module: TestModule) -> set[str]:
    """The names of the marks in ``exprs`` (for ``-m`` expressions)."""
    return {name for mark, _l in iter_marks(exprs, module) if (name := mark_name(mark)[0])}


def int_value(
    node: ast.expr, module: TestModule, env: Env | None = None, depth: int = 0
) -> int | None:
    """An int expression of constants, names bound in ``env`` or the module, ``+ - * //``."""
    if isinstance(node, ast.Constant):
        return node.value if type(node.value) is int else None  # (not a bool)
    if isinstance(node, ast.Name) and depth < _MAX_NAME_DEPTH:
        bound = env.get(node.id) if env and node.id in env else module.names.get(node.id)
        return int_value(bound, module, env, depth + 1) if bound is not None else None
    if isinstance(node, ast.BinOp) and (op := _ARITH.get(type(node.op))) is not None:
        left = int_value(node.left, module, env, depth)
        right = int_value(node.right, module, env, depth)
        if left is None or right is None or (op is operator.floordiv and not right):
            return None
        return int(op(left, right))
    return None


def count_compare(
    op: type[ast.cmpop], left: ast.expr, right: ast.expr, module: TestModule, env: Env | None = None
) -> tuple[type[ast.cmpop], int] | None:
    """A comparison of the device count with an int, as ``(op, n)`` for ``count op n``."""
    bound = [env.get(n.id, n) if env and isinstance(n, ast.Name) else n for n in (left, right)]
    sides = [isinstance(n, ast.Call) and callee_name(n.func) in _COUNT_FUNCS for n in bound]
    if sides == [False, True]:
        op, right = _FLIP.get(op, op), left
    elif sides != [True, False]:
        return None
    n = int_value(right, module, env)
    return None if n is None else (op, n)


def _devices_from_condition(cond: ast.expr, module: TestModule) -> int | None:
    if isinstance(cond, ast.Constant) and isinstance(cond.value, str):
        try:
            cond = ast.parse(cond.value, mode="eval").body
        except SyntaxError:
            return None
    needs = [0]
    for node in ast.walk(cond):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for op, left, right in zip(node.ops, operands, operands[1:], strict=False):
                if (found := count_compare(type(op), left, right, module)) is not None:
                    needs.append({ast.Lt: found[1], ast.LtE: found[1] + 1}.get(found[0], 0))
    return max(needs) or None


def device_hit(mark: ast.expr, line: int, module: TestModule) -> Found | None:
    name, call = mark_name(mark)
    if name in ("skip_less_device", "skip_less_mpi_world_size"):
        n = int_value(call.args[0], module) if call is not None and call.args else None
        return Found(n, f"{name}({n})", line) if n is not None and n >= 1 else None
    if name is not None and (gpu := _GPU_MARK.fullmatch(name)):
        n = int(gpu.group(1))
        return Found(n, name, line) if n >= 1 else None
    if name == "skipif" and call is not None:
        kws = {kw.arg: kw.value for kw in call.keywords}
        cond = kws.get("condition", call.args[0] if call.args else None)
        if cond is not None and (n := _devices_from_condition(cond, module)) is not None:
            return Found(n, f"skipif({ast.unparse(cond)})", line)
    return None


def best_hit(exprs: Sequence[ast.expr], module: TestModule) -> Found | None:
    """The largest device mark among ``exprs`` (the first of the largest)."""
    found = (device_hit(mark, line, module) for mark, line in iter_marks(exprs, module))
    return max((hit for hit in found if hit), key=lambda hit: hit.devices, default=None)


def _resolve_list(node: ast.expr | None, module: TestModule) -> list[ast.expr] | None:
    for _ in range(_MAX_NAME_DEPTH):
        node = module.names.get(node.id) if isinstance(node, ast.Name) else node
    return list(node.elts) if isinstance(node, (ast.List, ast.Tuple)) else None


_CONTAINERS = (
    ast.List, ast.Tuple, ast.Set, ast.Dict, ast.ListComp, ast.SetComp, ast.DictComp,
    ast.GeneratorExp,
)  # fmt: skip


def _literal(node: ast.expr) -> tuple[bool, object]:
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _id_part(node: ast.expr, argname: str, idx: int, helper: bool) -> str | None:
    """pytest's id for one parameter value (``name=str(value)`` for TensorRT-LLM's
    ``parametrize_with_ids``), when it is statically known."""
    if isinstance(node, _CONTAINERS) and not helper:
        return f"{argname}{idx}"
    if isinstance(node, ast.Lambda) and not helper:
        return "<lambda>"
    ok, value = _literal(node)
    if not ok:
        return None
    if helper:
        plain = value is None or isinstance(value, (str, bool, int, float))
        return f"{argname}={value}" if plain else None
    if isinstance(value, str):
        return value.encode("unicode_escape").decode("ascii")
    if isinstance(value, bytes):
        return value.decode("ascii", "backslashreplace")
    if value is None or isinstance(value, (bool, int, float, complex)):
        return str(value)
    return f"{argname}{idx}"


def parametrize_cases(mark: ast.expr, module: TestModule) -> list[Case] | None:
    """The cases of a parametrize mark, or None when ``mark`` is not one."""
    if not isinstance(mark, ast.Call):
        return None
    name, _call = mark_name(mark)
    helper = name is None and callee_name(mark.func) == "parametrize_with_ids"
    if name != "parametrize" and not helper:
        return None
    args = list(mark.args)
    kwargs = {kw.arg: kw.value for kw in mark.keywords if kw.arg}
    node = args[0] if args else kwargs.get("argnames")
    names = _literal(node)[1] if node is not None else None
    argnames: list[str] | None = None
    if isinstance(names, str):
        argnames = [part.strip() for part in names.split(",") if part.strip()]
    elif isinstance(names, (list, tuple)) and all(isinstance(name, str) for name in names):
        argnames = list(names)
    values = _resolve_list(args[1] if len(args) > 1 else kwargs.get("argvalues"), module)
    if argnames is None or values is None:
        return [Case(None, [], 0)]
    ids_node = None if helper else (args[3] if len(args) > 3 else kwargs.get("ids"))
    ids = _resolve_list(ids_node, module) if ids_node is not None else None
    cases = []
    for idx, elt in enumerate(values):
        kws: dict[str | None, ast.expr] = {}
        vals: list[ast.expr] | None
        if isinstance(elt, ast.Call) and callee_name(elt.func) == "param":
            vals, kws = list(elt.args), {kw.arg: kw.value for kw in elt.keywords}
        elif len(argnames) == 1:
            vals = [elt]
        else:
            vals = list(elt.elts) if isinstance(elt, (ast.Tuple, ast.List)) else None
        # The param's id, else the ids= entry; None falls back to the auto id, as in pytest.
        given = [kws.get("id"), ids[idx] if ids is not None and idx < len(ids) else None]
        given = [g for g in given if g and not (isinstance(g, ast.Constant) and g.value is None)]
        known = vals is not None and len(vals) == len(argnames)
        case_id: str | None = None
        if given:
            text = given[0].value if isinstance(given[0], ast.Constant) else None
            case_id = text if isinstance(text, str) else None
        elif vals is not None and known and not (ids_node is not None and ids is None):
            parts = [_id_part(v, n, idx, helper) for n, v in zip(argnames, vals, strict=False)]
            case_id = None if None in parts else "-".join(p for p in parts if p is not None)
        marks = [kws["marks"]] if "marks" in kws else []
        bound = dict(zip(argnames, vals, strict=False)) if vals is not None and known else {}
        cases.append(Case(case_id, marks, idx, bound))
    return cases


def match_case(case: str, params: list[list[Case]]) -> list[tuple[Case, ...]]:
    """The ways (some 64 at most) to read ``case`` as one id part per parametrize
    decorator (``params`` not empty)."""
    found: list[tuple[Case, ...]] = []

    def walk(i: int, pos: int, chosen: tuple[Case, ...]) -> None:
        if len(found) >= 64:
            return
        for option in params[i]:
            if option.id is None:  # wildcard: any non-empty run of the id
                ends = [j for j in range(pos + 1, len(case) + 1) if case[j : j + 1] in ("", "-")]
            else:
                ends = [pos + len(option.id)] if case.startswith(option.id, pos) else []
            for end in ends:
                if i == len(params) - 1:
                    if end == len(case):
                        found.append((*chosen, option))
                elif end < len(case) and case[end] == "-":
                    walk(i + 1, end + 1, (*chosen, option))

    walk(0, 0, ())
    return found


def _evaluate(node: ast.expr, names: set[str]) -> bool:
    """pytest's ``-m``/``-k`` grammar: names, ``and``, ``or``, ``not`` (else ValueError)."""
    if isinstance(node, ast.BoolOp):
        results = [_evaluate(value, names) for value in node.values]
        return all(results) if isinstance(node.op, ast.And) else any(results)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return not _evaluate(node.operand, names)
    if isinstance(node, ast.Name):
        return node.id in names
    raise ValueError(ast.unparse(node))


_WORD = re.compile(r"\s*(\(|\)|[^\s()]+)")


def expression_filter(expr: str, keywords: bool) -> Select | None:
    """pytest's ``-m`` (mark names) or ``-k`` expression as a test over a test's names; a
    ``-k`` word matches a part of one of them, case-insensitively (None: not of that form)."""
    words: list[str] = []
    text = []
    for token in _WORD.findall(expr):
        if token in ("(", ")", "and", "or", "not"):
            text.append(token)
        elif keywords or (token.isidentifier() and not keyword.iskeyword(token)):
            text.append(f"_{len(words)}")
            words.append(token.lower() if keywords else token)
        else:
            return None
    try:
        tree = ast.parse(" ".join(text) or "_", mode="eval").body
        _evaluate(tree, set())
    except (SyntaxError, ValueError):
        return None
    if not words:
        return None

    def match(names: set[str]) -> bool:
        lowered = [name.lower() for name in names] if keywords else []
        hits = {
            f"_{i}"
            for i, word in enumerate(words)
            if (any(word in name for name in lowered) if keywords else word in names)
        }
        return _evaluate(tree, hits)

    return match
