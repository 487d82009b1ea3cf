"""Device marks and parametrized cases, read from ``ast`` nodes.

* Device marks: ``skip_less_device(N)``, ``skip_less_mpi_world_size(N)``,
  ``gpuN`` and ``skipif(<...device_count()> < N)`` (also ``<= N-1``,
  ``N > ...`` and ``N-1 >= ...``), written ``pytest.mark.x`` or ``mark.x``, as
  decorators, in ``pytestmark`` (a mark or a list/tuple) or in
  ``pytest.param(..., marks=...)``.  Names bound at module level to a mark, a
  list of marks or an int are followed.  ``skip_less_device_memory`` and every
  other mark are no device count.
* Case ids: a case's id part is its ``pytest.param(id=...)``, else its entry of
  ``ids=[...]``, else pytest's auto id (``str`` of a constant, ``argname<index>``
  for containers; ``name=value`` parts for TensorRT-LLM's
  ``parametrize_with_ids``).  Parts that cannot be computed statically match
  any text.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from scriptbuilder.inputs.tests.source import TestModule

_GPU_MARK = re.compile(r"gpu(\d+)")
_COUNT_FUNCS = frozenset({"device_count", "get_device_count"})
_MAX_NAME_DEPTH = 4


@dataclass(frozen=True)
class Hit:
    """A device count read from the source: ``label`` on line ``lineno``."""

    devices: int
    label: str
    lineno: int
    exact: bool = False
    #: The file, when not the test's own (a conftest.py).
    file: str = ""


@dataclass
class Case:
    """One value set of a parametrize decorator."""

    id: str | None  # None: not computable statically, matches anything
    marks: list[ast.expr]
    index: int
    #: argument name -> value expression, when known
    values: dict[str, ast.expr] = field(default_factory=dict)


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
    if isinstance(func, ast.Attribute):
        owner = func.value
        if (isinstance(owner, ast.Name) and owner.id == "mark") or (
            isinstance(owner, ast.Attribute) and owner.attr == "mark"
        ):
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
            value = module.lookup(expr.id)
            if value is not None:
                yield from iter_marks([value], module, depth + 1, line)
        else:
            yield expr, line


def mark_names(exprs: Sequence[ast.expr], module: TestModule) -> set[str]:
    """The names of the marks in ``exprs`` (for ``-m`` expressions)."""
    return {name for mark, _l in iter_marks(exprs, module) if (name := mark_name(mark)[0])}


def int_value(
    node: ast.expr, module: TestModule, env: dict[str, ast.expr] | None = None, depth: int = 0
) -> int | None:
    """An int expression of constants, names bound in ``env`` or the module, ``+ - * //``."""
    if isinstance(node, ast.Constant):
        value = node.value
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if isinstance(node, ast.Name) and depth < _MAX_NAME_DEPTH:
        bound = env.get(node.id) if env and node.id in env else module.lookup(node.id)
        return int_value(bound, module, env, depth + 1) if bound is not None else None
    if isinstance(node, ast.BinOp):
        left = int_value(node.left, module, env, depth)
        right = int_value(node.right, module, env, depth)
        if left is None or right is None:
            return None
        if isinstance(node.op, ast.Add):
            return left + right
        if isinstance(node.op, ast.Sub):
            return left - right
        if isinstance(node.op, ast.Mult):
            return left * right
        if isinstance(node.op, ast.FloorDiv) and right:
            return left // right
    return None


def is_device_count(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and callee_name(node.func) in _COUNT_FUNCS


def _devices_from_condition(cond: ast.expr, module: TestModule) -> int | None:
    if isinstance(cond, ast.Constant) and isinstance(cond.value, str):
        try:
            cond = ast.parse(cond.value, mode="eval").body
        except SyntaxError:
            return None
    best: int | None = None
    for node in ast.walk(cond):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        for op, left, right in zip(node.ops, operands, operands[1:], strict=False):
            need: int | None = None
            if is_device_count(left) and (n := int_value(right, module)) is not None:
                need = n if isinstance(op, ast.Lt) else n + 1 if isinstance(op, ast.LtE) else None
            elif is_device_count(right) and (n := int_value(left, module)) is not None:
                need = n if isinstance(op, ast.Gt) else n + 1 if isinstance(op, ast.GtE) else None
            if need is not None and need >= 1 and (best is None or need > best):
                best = need
    return best


def device_hit(mark: ast.expr, line: int, module: TestModule) -> Hit | None:
    name, call = mark_name(mark)
    if name is None:
        return None
    if name in ("skip_less_device", "skip_less_mpi_world_size"):
        if call is not None and call.args:
            n = int_value(call.args[0], module)
            if n is not None and n >= 1:
                return Hit(n, f"{name}({n})", line)
        return None
    gpu = _GPU_MARK.fullmatch(name)
    if gpu is not None:
        n = int(gpu.group(1))
        return Hit(n, name, line) if n >= 1 else None
    if name == "skipif" and call is not None:
        cond = call.args[0] if call.args else None
        for kw in call.keywords:
            if kw.arg == "condition":
                cond = kw.value
        if cond is not None:
            n = _devices_from_condition(cond, module)
            if n is not None:
                return Hit(n, f"skipif({ast.unparse(cond)})", line)
    return None


def best(hits: Sequence[Hit]) -> Hit | None:
    found: Hit | None = None
    for hit in hits:
        if found is None or hit.devices > found.devices:
            found = hit
    return found


def hits(exprs: Sequence[ast.expr], module: TestModule) -> list[Hit]:
    out = []
    for mark, line in iter_marks(exprs, module):
        hit = device_hit(mark, line, module)
        if hit is not None:
            out.append(hit)
    return out


# --------------------------------------------------------------------------
# parametrize
# --------------------------------------------------------------------------


def _resolve_list(node: ast.expr | None, module: TestModule) -> list[ast.expr] | None:
    for _ in range(_MAX_NAME_DEPTH):
        if isinstance(node, ast.Name):
            node = module.lookup(node.id)
        else:
            break
    if isinstance(node, (ast.List, ast.Tuple)):
        return list(node.elts)
    return None


_CONTAINERS = (
    ast.List, ast.Tuple, ast.Set, ast.Dict, ast.ListComp, ast.SetComp, ast.DictComp,
    ast.GeneratorExp,
)  # fmt: skip


def _literal(node: ast.expr) -> tuple[bool, object]:
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _auto_id(node: ast.expr, argname: str, idx: int) -> str | None:
    """pytest's id for one parameter value, when it is statically known."""
    if isinstance(node, _CONTAINERS):
        return f"{argname}{idx}"
    if isinstance(node, ast.Lambda):
        return "<lambda>"
    ok, value = _literal(node)
    if not ok:
        return None
    if isinstance(value, str):
        return value.encode("unicode_escape").decode("ascii")
    if isinstance(value, bytes):
        return value.decode("ascii", "backslashreplace")
    if value is None or isinstance(value, (bool, int, float, complex)):
        return str(value)
    return f"{argname}{idx}"


def _str_id(node: ast.expr) -> str | None:
    """``str(value)`` of a constant (TensorRT-LLM ``parametrize_with_ids``)."""
    ok, value = _literal(node)
    if not ok or not (value is None or isinstance(value, (str, bool, int, float))):
        return None
    return str(value)


def _const_str(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _is_param(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and callee_name(node.func) == "param"


def _argnames(node: ast.expr | None) -> list[str] | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [part.strip() for part in node.value.split(",") if part.strip()]
    if isinstance(node, (ast.List, ast.Tuple)):
        names = []
        for elt in node.elts:
            if not (isinstance(elt, ast.Constant) and isinstance(elt.value, str)):
                return None
            names.append(elt.value)
        return names
    return None


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
    argnames = _argnames(args[0] if args else kwargs.get("argnames"))
    values = _resolve_list(args[1] if len(args) > 1 else kwargs.get("argvalues"), module)
    if argnames is None or values is None:
        return [Case(None, [], 0)]
    ids_node = None if helper else (args[3] if len(args) > 3 else kwargs.get("ids"))
    ids = _resolve_list(ids_node, module) if ids_node is not None else None
    ids_unknown = ids_node is not None and ids is None
    cases = []
    for idx, elt in enumerate(values):
        marks: list[ast.expr] = []
        case_id: str | None = None
        explicit = False
        vals: list[ast.expr] | None
        if _is_param(elt):
            assert isinstance(elt, ast.Call)
            vals = list(elt.args)
            for kw in elt.keywords:
                if kw.arg == "marks":
                    marks = [kw.value]
                elif kw.arg == "id":
                    if isinstance(kw.value, ast.Constant) and kw.value.value is None:
                        continue
                    explicit = True
                    case_id = _const_str(kw.value)
        elif len(argnames) == 1:
            vals = [elt]
        else:
            vals = list(elt.elts) if isinstance(elt, (ast.Tuple, ast.List)) else None
        if not explicit and ids is not None and idx < len(ids):
            entry = ids[idx]
            if not (isinstance(entry, ast.Constant) and entry.value is None):
                explicit = True  # (None falls back to the auto id, as in pytest)
                case_id = _const_str(entry)
        known = vals is not None and len(vals) == len(argnames)
        if not explicit and not ids_unknown and vals is not None and known:
            parts = [
                (f"{n}={s}" if (s := _str_id(v)) is not None else None)
                if helper
                else _auto_id(v, n, idx)
                for n, v in zip(argnames, vals, strict=False)
            ]
            case_id = None if None in parts else "-".join(p for p in parts if p is not None)
        bound = dict(zip(argnames, vals, strict=False)) if vals is not None and known else {}
        cases.append(Case(case_id, marks, idx, bound))
    return cases


def match_case(case: str, params: list[list[Case]]) -> list[tuple[Case, ...]]:
    """Every way to read ``case`` as one id part per parametrize decorator."""
    found: list[tuple[Case, ...]] = []
    limit = 64

    def walk(i: int, pos: int, chosen: tuple[Case, ...]) -> None:
        if len(found) >= limit:
            return
        last = i == len(params) - 1
        for option in params[i]:
            if option.id is None:  # wildcard: any non-empty run of the id
                if last:
                    if pos < len(case):
                        found.append((*chosen, option))
                else:
                    for j in range(pos + 1, len(case)):
                        if case[j] == "-":
                            walk(i + 1, j + 1, (*chosen, option))
            elif case.startswith(option.id, pos):
                end = pos + len(option.id)
                if last:
                    if end == len(case):
                        found.append((*chosen, option))
                elif end < len(case) and case[end] == "-":
                    walk(i + 1, end + 1, (*chosen, option))

    if params:
        walk(0, 0, ())
    return found


# --------------------------------------------------------------------------
# -m expressions
# --------------------------------------------------------------------------


def _mark_expr_ok(node: ast.expr) -> bool:
    if isinstance(node, ast.BoolOp):
        return all(_mark_expr_ok(value) for value in node.values)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return _mark_expr_ok(node.operand)
    return isinstance(node, ast.Name)


def _matches(node: ast.expr, names: set[str]) -> bool:
    if isinstance(node, ast.BoolOp):
        results = (_matches(value, names) for value in node.values)
        return all(results) if isinstance(node.op, ast.And) else any(results)
    if isinstance(node, ast.UnaryOp):
        return not _matches(node.operand, names)
    return isinstance(node, ast.Name) and node.id in names


def mark_filter(expr: str) -> Callable[[set[str]], bool] | None:
    """pytest's ``-m`` expression (names, ``and``, ``or``, ``not``, parentheses) as a
    test over a test's mark names; None when it is not of that form."""
    try:
        tree = ast.parse(expr.strip(), mode="eval").body
    except SyntaxError:
        return None
    if not _mark_expr_ok(tree):
        return None
    return lambda names: _matches(tree, names)


_KEYWORD_WORD = re.compile(r"\s*(\(|\)|[^\s()]+)")


def keyword_filter(expr: str) -> Callable[[set[str]], bool] | None:
    """pytest's ``-k`` expression as a test over a test's names (its function with
    the case id, class, file and marks): each word matches a part of one of them,
    case-insensitively; None when it is not of that form."""
    words: list[str] = []
    text = []
    for token in _KEYWORD_WORD.findall(expr):
        if token in ("(", ")", "and", "or", "not"):
            text.append(token)
        else:
            text.append(f"_{len(words)}")
            words.append(token.lower())
    try:
        tree = ast.parse(" ".join(text) or "_", mode="eval").body
    except SyntaxError:
        return None
    if not _mark_expr_ok(tree) or not words:
        return None

    def match(names: set[str]) -> bool:
        lowered = [name.lower() for name in names]
        hits = {f"_{i}" for i, word in enumerate(words) if any(word in name for name in lowered)}
        return _matches(tree, hits)

    return match
