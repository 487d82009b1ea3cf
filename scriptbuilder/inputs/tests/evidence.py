"""What a test says about its GPUs beyond its device marks: skip guards at the top of
its body, launchers (``spawn(nprocs=N)``, ``world_size=N``, MPI pools, ``mpirun -n N``,
``--tp_size N``), parallel sizes passed to one call or written in one dict, the helpers it
calls (read the same way, arguments bound), and the case's parameters and id labels."""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Iterator

from scriptbuilder.inputs.tests.marks import (
    Env,
    Found,
    bind_args,
    callee_name,
    count_compare,
    int_value,
)
from scriptbuilder.inputs.tests.source import FunctionNode, Scope, TestModule

_SIZES = {"tensor_parallel_size", "pipeline_parallel_size", "context_parallel_size"}
_SIZES |= {"tp_size", "pp_size", "cp_size", "tp", "pp", "cp", "ulysses_size", "cfg_size"}
_WORLD = {"world_size", "gpu_count", "num_gpus", "n_gpus", "nprocs", "mpi_pool_executor"}
_POOL = {"max_workers", "n_workers", "num_workers"}  # of a callee named *mpi*
#: Parameter names whose values size a test.
SIZE_NAMES = frozenset(_SIZES | _WORLD)
_MPIRUN = re.compile(r"\bmpirun\b[^;&|]*?\s-(?:n|np)[\s=]+(\d+)")
_FLAG = re.compile(r"--(tp|pp|cp)(?:_size)?[\s=]+(\d+)")
_LABEL = re.compile(r"(?<![A-Za-z])(tp|pp|cp|ulysses|cfg|ring)[_:]?(\d+)(?!\d)")
_GRID = re.compile(r"(?<![A-Za-z])attn2d_(\d+)x(\d+)")
_GPUS = re.compile(r"(?<![A-Za-z\d])(\d+)_?gpus?(?![A-Za-z])")
_DEPTH = 3
_OPS = {ast.Eq: "__eq__", ast.NotEq: "__ne__", ast.Lt: "__lt__", ast.Gt: "__gt__"}


def _value(node: ast.expr, env: Env) -> object:
    """A constant, a bound name or a comparison of them; ``...`` when unknown."""
    if isinstance(node, ast.Name) and isinstance(env.get(node.id), ast.Constant):
        node = env[node.id]
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = _value(node.operand, env)
        return ... if inner is ... else not inner
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _OPS:
        left, right = _value(node.left, env), _value(node.comparators[0], env)
        unknown = left is ... or right is ...
        return ... if unknown else getattr(left, _OPS[type(node.ops[0])])(right)
    return ...


def _needs(
    cond: ast.expr, env: Env, module: TestModule, negated: bool = False
) -> list[tuple[int, bool]]:
    """``(count, exact)`` needs for the test to run, from a skip condition."""
    if isinstance(cond, ast.BoolOp) and not negated:
        parts = [_needs(value, env, module) for value in cond.values]
        rest = [v for v, part in zip(cond.values, parts, strict=True) if not part]
        held = all(_value(v, env) is True for v in rest) and len(rest) < len(parts)
        return [n for part in parts for n in part] if isinstance(cond.op, ast.Or) or held else []
    if isinstance(cond, ast.UnaryOp) and isinstance(cond.op, ast.Not):
        return _needs(cond.operand, env, module, not negated)
    if not isinstance(cond, ast.Compare) or len(cond.ops) != 1:
        return []
    compared = count_compare(type(cond.ops[0]), cond.left, cond.comparators[0], module, env)
    if compared is None:
        return []
    op, n = compared
    if negated:  # "not (count == n)": skip unless exactly n
        return [(n, True)] if op is ast.Eq else []
    found = {ast.Lt: (n, False), ast.LtE: (n + 1, False), ast.NotEq: (n, True)}.get(op)
    return [found] if found else []


def _text(node: ast.expr, env: Env, module: TestModule) -> str | None:
    """The words of a string, an f-string or a list of them (unknown parts as ``?``)."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.JoinedStr):
        return "".join(
            (str(n) if (n := int_value(v.value, module, env)) is not None else "?")
            if isinstance(v, ast.FormattedValue)
            else _text(v, env, module) or ""
            for v in node.values
        )
    if isinstance(node, (ast.List, ast.Tuple)):
        words = [_text(elt, env, module) for elt in node.elts]
        return " ".join(w if w is not None else "?" for w in words)
    return None


def _product(pairs: Iterator[tuple[str, int | None]]) -> int | None:
    """The product of the largest size of each kind, None when none is known."""
    sizes: dict[str, int] = {}
    for kind, n in pairs:
        if n is not None and n >= 1:
            sizes[kind] = max(sizes.get(kind, 1), n)
    return math.prod(sizes.values()) if sizes else None


def _bind(func: FunctionNode, call: ast.Call, env: Env, module: TestModule, method: bool) -> Env:
    """The helper's parameters that take a known constant in ``call``."""
    bound: Env = {}
    for name, expr in bind_args(func, call, method).items():
        n = int_value(expr, module, env)
        value = n if n is not None else _value(expr, env)
        if isinstance(value, (str, int, float, bool)):
            bound[name] = ast.Constant(value)
    return bound


def _callee(
    call: ast.Call, module: TestModule, owner: Scope | None
) -> tuple[FunctionNode, TestModule, bool] | None:
    func = call.func
    if isinstance(func, ast.Name) and (found := module.helper(func.id)) is not None:
        return (*found, False)
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and owner is not None:
        is_method = func.value.id in ("self", "cls", owner.name)
        method = next((f for level in owner.mro() if (f := level.funcs.get(func.attr))), None)
        return (method, module, True) if method and is_method else None
    return None


def body_hits(
    func: FunctionNode, params: Env, module: TestModule, owner: Scope | None, depth: int = 0
) -> list[Found]:
    """Every device need read from ``func``'s body with ``params`` bound (see the module doc)."""
    env = dict(params)
    out: list[Found] = []
    where = "" if owner is None or module is owner.module else module.filename
    for stmt in func.body:
        match stmt:
            case ast.Assign(targets=[ast.Name(id=name)], value=value):
                env[name] = value
            case ast.If(body=body) if any(
                isinstance(c, ast.Call) and callee_name(c.func) == "skip"
                for c in ast.walk(ast.Module(body=body, type_ignores=[]))
            ):
                for devices, exact in _needs(stmt.test, env, module):
                    kind = "exactly" if exact else "at least"
                    label = f"guard `{ast.unparse(stmt.test)}` ({kind} {devices})"
                    out.append(Found(devices, label, stmt.lineno, exact, where))
    for node in ast.walk(ast.Module(body=func.body, type_ignores=[])):
        n: int | None = None
        if isinstance(node, ast.Call):
            name = (callee_name(node.func) or "").lower()
            kws = {kw.arg: kw.value for kw in node.keywords if kw.arg}
            n = _product((k, int_value(v, module, env)) for k, v in kws.items() if k in _SIZES)
            ranks = {"world_size", *(["nprocs"] if "spawn" in name else [])}
            ranks |= _POOL if "mpi" in name else set()
            n = max([n or 0, *(int_value(kws[k], module, env) or 0 for k in ranks & kws.keys())])
            label = f"`{ast.unparse(node.func)}(...)` arguments"
            target = _callee(node, module, owner) if depth < _DEPTH else None
            if target is not None and target[0] is not func:
                helper, home, method = target
                out += body_hits(
                    helper, _bind(helper, node, env, module, method), home, owner, depth + 1
                )
        elif isinstance(node, ast.Dict):
            n = _product(
                (k.value, int_value(v, module, env))
                for k, v in zip(node.keys, node.values, strict=True)
                if isinstance(k, ast.Constant) and k.value in _SIZES
            )
            label = "parallel sizes in a dict"
        elif isinstance(node, ast.expr) and (text := _text(node, env, module)) is not None:
            mpi = [int(m) for m in _MPIRUN.findall(text)]
            flags = _product((k, int(v)) for k, v in _FLAG.findall(text))
            label, n = f"command `{text[:60]}`", max([*mpi, flags or 0]) or None
        if n is not None and n >= 1:
            out.append(Found(n, label, getattr(node, "lineno", func.lineno), False, where))
    return out


def case_hits(
    func: FunctionNode, case_id: str | None, values: Env, module: TestModule
) -> list[Found]:
    """Parallel sizes of the case's parameters, and labels of its id and the test's name."""
    out: list[Found] = []
    known = {name: int_value(v, module, values) for name, v in values.items()}
    size = _product((name.split("_")[0], n) for name, n in known.items() if name in _SIZES)
    world = max([size or 0, *(n or 0 for name, n in known.items() if name in _WORLD)])
    if world >= 1:
        shown = ", ".join(f"{k}={n}" for k, n in known.items() if n and k in _SIZES | _WORLD)
        out.append(Found(world, f"case parameters {shown}", func.lineno))
    for text, what in ((case_id, "case id"), (func.name, "test name")):
        if not text:
            continue
        grid = [("attn2d", int(a) * int(b)) for a, b in _GRID.findall(text)]
        n = _product(iter([*((k, int(v)) for k, v in _LABEL.findall(text)), *grid]))
        n = max([n or 0, *(int(g) for g in _GPUS.findall(text))])
        if n >= 1:
            out.append(Found(n, f"{what} {text!r} labels", func.lineno))
    return out
