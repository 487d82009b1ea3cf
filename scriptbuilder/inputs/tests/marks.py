"""Device marks (``skip_less_device(N)``, ``skip_less_mpi_world_size(N)``, ``gpuN``,
``skipif(<device count> < N)``), parametrized cases and their pytest ids, and ``-m``/``-k``
expressions, read from ``ast`` nodes.  Parts of an id that cannot be computed statically
match any text."""

from __future__ import annotations

import ast
import copy
import itertools
import keyword
import operator
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from scriptbuilder.inputs.tests.source import FunctionNode, TestModule

_GPU_MARK = re.compile(r"gpu(\d+)")
_COUNT_FUNCS = frozenset({"device_count", "get_device_count"})
_MAX_NAME_DEPTH = 4
_MAX_OPTIONS = 16  # ids looked at for a value whose id is not known statically
Env = dict[str, ast.expr]
#: A test over a test's mark names or keywords (``-m``, ``-k``); the flag: some name is
#: not known in full; None: the answer depends on it.
Select = Callable[[set[str], bool], bool | None]
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
    #: When ``id`` is None: the ids pytest may give it (empty: any text).
    options: tuple[str, ...] = ()
    #: The argument names whose values are not read here.
    unread: tuple[str, ...] = ()


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


def bind_args(func: FunctionNode, call: ast.Call, method: bool = False) -> Env:
    """The expressions ``call`` gives ``func``'s parameters (defaults where it gives none)."""
    params = [*func.args.posonlyargs, *func.args.args][1 if method else 0 :]
    names = [p.arg for p in params]
    bound: Env = dict(zip(names[::-1], func.args.defaults[::-1], strict=False))
    kw_defaults = zip(func.args.kwonlyargs, func.args.kw_defaults, strict=True)
    bound.update({p.arg: d for p, d in kw_defaults if d})
    positional = itertools.takewhile(lambda a: not isinstance(a, ast.Starred), call.args)
    bound.update(zip(names, positional, strict=False))
    bound.update({kw.arg: kw.value for kw in call.keywords if kw.arg})
    return bound


class _Substitute(ast.NodeTransformer):
    def __init__(self, env: Env) -> None:
        self.env = env

    def visit_Name(self, node: ast.Name) -> ast.expr:
        return copy.deepcopy(self.env[node.id]) if node.id in self.env else node


def _factory_mark(call: ast.Call, module: TestModule) -> tuple[ast.expr, TestModule] | None:
    """What a mark factory (``def skip_less_than(n): return pytest.mark.skipif(...)``,
    found like a helper) returns for ``call``, its parameters replaced by the arguments
    (ints known here as constants), and the factory's module."""
    name = call.func.id if isinstance(call.func, ast.Name) else None
    found = module.helper(name) if name and name != "parametrize_with_ids" else None
    body = [s for s in found[0].body if not isinstance(s, ast.Expr)] if found else []
    if found is None or len(body) != 1 or not isinstance(body[0], ast.Return) or not body[0].value:
        return None
    args = {
        param: ast.Constant(n) if (n := int_value(arg, module)) is not None else arg
        for param, arg in bind_args(found[0], call).items()
    }
    made = _Substitute(args).visit(copy.deepcopy(body[0].value))
    return (made, found[1]) if isinstance(made, ast.expr) else None


def iter_marks(
    exprs: Sequence[ast.expr], module: TestModule, depth: int = 0, use_line: int | None = None
) -> Iterator[tuple[ast.expr, int, TestModule]]:
    """Marks of a decorator list or ``pytestmark``/``marks=`` value, lists flattened, names
    (here or imported) and mark factories followed: each with the line it is used on and
    the module its names belong to."""
    for expr in exprs:
        line = use_line if use_line is not None else expr.lineno
        if isinstance(expr, (ast.List, ast.Tuple)):
            yield from iter_marks(expr.elts, module, depth, line)
        elif isinstance(expr, ast.Name) and depth < _MAX_NAME_DEPTH:
            if (bound := module.binding(expr.id)) is not None:
                yield from iter_marks([bound[0]], bound[1], depth + 1, line)
        elif (
            isinstance(expr, ast.Call)
            and depth < _MAX_NAME_DEPTH
            and mark_name(expr)[0] is None
            and (made := _factory_mark(expr, module)) is not None
        ):
            yield from iter_marks([made[0]], made[1], depth + 1, line)
        else:
            yield expr, line, module


def mark_names(exprs: Sequence[ast.expr], module: TestModule) -> set[str]:
    """The names of the marks in ``exprs`` (for ``-m`` expressions)."""
    return {name for mark, _l, _m in iter_marks(exprs, module) if (name := mark_name(mark)[0])}


def int_value(
    node: ast.expr, module: TestModule, env: Env | None = None, depth: int = 0
) -> int | None:
    """An int expression of constants, names bound in ``env`` or the module, ``+ - * //``."""
    if isinstance(node, ast.Constant):
        return node.value if type(node.value) is int else None  # (not a bool)
    if isinstance(node, ast.Name) and depth < _MAX_NAME_DEPTH:
        if env and node.id in env:
            return int_value(env[node.id], module, env, depth + 1)
        bound = module.binding(node.id)  # a module's name: its own names, not the test's
        return int_value(bound[0], bound[1], None, depth + 1) if bound is not None else None
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
    found = (device_hit(mark, line, home) for mark, line, home in iter_marks(exprs, module))
    return max((hit for hit in found if hit), key=lambda hit: hit.devices, default=None)


def _resolve_list(node: ast.expr | None, module: TestModule) -> list[ast.expr] | None:
    for _ in range(_MAX_NAME_DEPTH):
        bound = module.binding(node.id) if isinstance(node, ast.Name) else None
        node, module = bound if bound is not None else (node, module)
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


def _id_options(node: ast.expr, argname: str, idx: int, helper: bool) -> list[str]:
    """The ids pytest may give an attribute value (``torch.float16``, ``Enum.MEMBER``):
    ``argname`` and the index (an object), its dotted text (an enum member), its name (a
    class or function).  Empty for any other value: its id may be any text."""
    if not isinstance(node, ast.Attribute):
        return []
    names = [ast.unparse(node), node.attr]
    if helper:
        return [f"{argname}={name}" for name in names]
    return [f"{argname}{idx}", *names]


def _literal_or_self(node: ast.expr, module: TestModule) -> ast.expr:
    """The literal a module-level name is bound to (pytest's id is the literal's), else
    ``node``."""
    found: ast.expr = node
    for _ in range(_MAX_NAME_DEPTH):
        bound = module.binding(found.id) if isinstance(found, ast.Name) else None
        if bound is None:
            break
        found, module = bound
    return found if found is not node and _literal(found)[0] else node


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


_STR_METHODS = frozenset(
    {"strip", "lstrip", "rstrip", "replace", "lower", "upper", "split", "join", "title",
     "capitalize", "removeprefix", "removesuffix"}
)  # fmt: skip
_CONVERSIONS: dict[int, Callable[[object], str]] = {ord("s"): str, ord("r"): repr, ord("a"): ascii}


def _static(node: ast.expr, env: dict[str, object]) -> object:
    """The value of a small expression over ``env`` (an ``ids=`` function's body): constants,
    names of ``env``, subscripts, f-strings, ``+``/``%``, ``str()`` and string methods (else
    ValueError).  Nothing is executed."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name) and node.id in env:
        return env[node.id]
    if isinstance(node, (ast.Tuple, ast.List)):
        return tuple(_static(elt, env) for elt in node.elts)
    if isinstance(node, ast.Subscript):
        return _static(node.value, env)[_static(node.slice, env)]  # type: ignore[index]
    if isinstance(node, ast.JoinedStr):
        return "".join(str(_static(value, env)) for value in node.values)
    if isinstance(node, ast.FormattedValue):
        value = _static(node.value, env)
        value = _CONVERSIONS[node.conversion](value) if node.conversion in _CONVERSIONS else value
        spec = str(_static(node.format_spec, env)) if node.format_spec else ""
        if re.search(r"\d{3}", spec):
            raise ValueError(spec)  # no huge widths
        return format(value, spec)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        left, right = _static(node.left, env), _static(node.right, env)
        return left + right if isinstance(node.op, ast.Add) else left % right  # type: ignore[operator]
    if isinstance(node, ast.IfExp):
        return _static(node.body if _static(node.test, env) else node.orelse, env)
    if isinstance(node, ast.Call) and not node.keywords:
        args = [_static(arg, env) for arg in node.args]
        if isinstance(node.func, ast.Name) and node.func.id == "str" and len(args) == 1:
            return str(args[0])
        if isinstance(node.func, ast.Attribute) and node.func.attr in _STR_METHODS:
            text = _static(node.func.value, env)
            if isinstance(text, str) and all(isinstance(a, (str, int)) for a in args):
                return getattr(text, node.func.attr)(*args)
    raise ValueError(ast.unparse(node))


def _id_function(node: ast.expr, module: TestModule) -> tuple[str, ast.expr] | None:
    """The parameter and the returned expression of an ``ids=`` function (a lambda, or a
    function of the module or its helpers whose body is one ``return``)."""
    func: ast.Lambda | FunctionNode | None = node if isinstance(node, ast.Lambda) else None
    if isinstance(node, ast.Name) and (found := module.helper(node.id)) is not None:
        func = found[0]
    params = [*func.args.posonlyargs, *func.args.args] if func is not None else []
    if func is None or len(params) != 1:
        return None
    if isinstance(func, ast.Lambda):
        return params[0].arg, func.body
    body = [s for s in func.body if not isinstance(s, ast.Expr)]
    returned = body[0].value if len(body) == 1 and isinstance(body[0], ast.Return) else None
    return (params[0].arg, returned) if returned is not None else None


def _function_id(function: tuple[str, ast.expr], value: ast.expr) -> tuple[bool, str | None]:
    """What an ``ids=`` function returns for ``value``: ``(True, id)`` (None: pytest's own
    id), ``(False, None)`` when it cannot be read."""
    ok, literal = _literal(value)
    try:
        result = _static(function[1], {function[0]: literal}) if ok else ...
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        result = ...
    if result is None or isinstance(result, str):
        return True, result
    return False, None


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
        return [Case(None, [], 0, unread=tuple(argnames or ()))]
    ids_node = None if helper else (args[3] if len(args) > 3 else kwargs.get("ids"))
    ids = _resolve_list(ids_node, module) if ids_node is not None else None
    id_function = _id_function(ids_node, module) if ids_node is not None and ids is None else None
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
        options: list[str] = []
        if given:
            text = given[0].value if isinstance(given[0], ast.Constant) else None
            case_id = text if isinstance(text, str) else None
        elif vals is not None and known and (ids_node is None or ids is not None or id_function):
            parts = []
            vals = [_literal_or_self(value, module) for value in vals]
            for name, value in zip(argnames, vals, strict=False):
                ok, part = _function_id(id_function, value) if id_function else (True, None)
                parts.append(
                    part if part is not None or not ok else _id_part(value, name, idx, helper)
                )
            case_id = None if None in parts else "-".join(p for p in parts if p is not None)
            if case_id is None and not id_function:
                choices = [
                    [part] if part is not None else _id_options(value, name, idx, helper)
                    for part, name, value in zip(parts, argnames, vals, strict=True)
                ]
                if all(choices):
                    combos = itertools.islice(itertools.product(*choices), _MAX_OPTIONS)
                    options = ["-".join(p for p in combo if p) for combo in combos]
        marks = [kws["marks"]] if "marks" in kws else []
        bound = dict(zip(argnames, vals, strict=False)) if vals is not None and known else {}
        unread = () if bound else tuple(argnames)
        cases.append(Case(case_id, marks, idx, bound, tuple(options), unread))
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


def _evaluate(node: ast.expr, hits: dict[str, bool | None]) -> bool | None:
    """pytest's ``-m``/``-k`` grammar: names, ``and``, ``or``, ``not`` (else ValueError); a
    name not in ``hits`` is false, one mapped to None unknown (Kleene's three values)."""
    if isinstance(node, ast.BoolOp):
        results = [_evaluate(value, hits) for value in node.values]
        decided = not isinstance(node.op, ast.And)  # what one value decides
        if decided in results:
            return decided
        return None if None in results else not decided
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = _evaluate(node.operand, hits)
        return None if inner is None else not inner
    if isinstance(node, ast.Name):
        return hits.get(node.id, False)
    raise ValueError(ast.unparse(node))


_WORD = re.compile(r"\s*(\(|\)|[^\s()]+)")


def expression_filter(expr: str, keywords: bool) -> Select | None:
    """pytest's ``-m`` (mark names) or ``-k`` expression as a test over a test's names; a
    ``-k`` word matches a part of one of them, case-insensitively (None: not of that form).
    With ``partial`` (a name not known in full), a ``-k`` word found in none of the names
    may be in the unknown part: the answer is None when that decides."""
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
        _evaluate(tree, {})
    except (SyntaxError, ValueError):
        return None
    if not words:
        return None

    def match(names: set[str], partial: bool = False) -> bool | None:
        lowered = [name.lower() for name in names] if keywords else []
        hits: dict[str, bool | None] = {}
        for i, word in enumerate(words):
            found = any(word in name for name in lowered) if keywords else word in names
            hits[f"_{i}"] = True if found else None if partial and keywords else False
        return _evaluate(tree, hits)

    return match
