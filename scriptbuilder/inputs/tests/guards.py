"""Device guards in a test's body: ``if <device count compared with N>: pytest.skip(...)``.

Many multi-GPU tests carry no device mark and skip in their body instead, the
count written as a number or an expression of the case's parameters::

    if get_device_count() != tp_size * pp_size:   # exactly tp_size * pp_size
        pytest.skip(...)
    if ctx_pp + gen_tp > get_device_count():       # at least ctx_pp + gen_tp
        pytest.skip(...)

Read are the ``if`` statements at the top of the body (in order, after simple
local assignments such as ``world_size = tp * pp`` or ``n = get_device_count()``)
whose block calls ``skip``.  ``<``, ``<=``, ``>``, ``>=`` give at least N;
``!=`` (and ``not ... ==``) gives exactly N.  ``or`` takes every side; an
``and`` tells nothing for sure and is ignored.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from scriptbuilder.inputs.tests.marks import callee_name, int_value, is_device_count
from scriptbuilder.inputs.tests.outline import FunctionNode, TestModule


@dataclass(frozen=True)
class Guard:
    devices: int
    exact: bool
    label: str
    lineno: int


def _calls_skip(body: list[ast.stmt]) -> bool:
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and callee_name(node.func) == "skip":
                return True
    return False


def _is_count(node: ast.expr, env: dict[str, ast.expr]) -> bool:
    if isinstance(node, ast.Name) and node.id in env:
        node = env[node.id]
    return is_device_count(node)


_FLIP = {ast.Lt: ast.Gt, ast.LtE: ast.GtE, ast.Gt: ast.Lt, ast.GtE: ast.LtE, ast.NotEq: ast.NotEq}


def _needs(
    cond: ast.expr, env: dict[str, ast.expr], module: TestModule, negated: bool = False
) -> list[tuple[int, bool]]:
    """``(count, exact)`` needs for the test to run, from a skip condition."""
    if isinstance(cond, ast.BoolOp):
        if isinstance(cond.op, ast.Or) and not negated:
            return [need for value in cond.values for need in _needs(value, env, module)]
        return []
    if isinstance(cond, ast.UnaryOp) and isinstance(cond.op, ast.Not):
        return _needs(cond.operand, env, module, not negated)
    if not isinstance(cond, ast.Compare) or len(cond.ops) != 1:
        return []
    op, left, right = type(cond.ops[0]), cond.left, cond.comparators[0]
    if _is_count(right, env) and not _is_count(left, env):
        op, left, right = _FLIP.get(op, op), right, left
    if not _is_count(left, env):
        return []
    n = int_value(right, module, env)
    if n is None:
        return []
    if negated:  # "not (count == n)": skip unless exactly n
        return [(n, True)] if op is ast.Eq else []
    if op is ast.Lt:
        return [(n, False)]
    if op is ast.LtE:
        return [(n + 1, False)]
    if op is ast.NotEq:
        return [(n, True)]
    return []


def body_guard(func: FunctionNode, params: dict[str, ast.expr], module: TestModule) -> Guard | None:
    """The largest device need of the guards in ``func``'s body, with ``params`` bound."""
    env = dict(params)
    found: Guard | None = None
    for stmt in func.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0]
            if isinstance(target, ast.Name):
                env[target.id] = stmt.value
            continue
        if not isinstance(stmt, ast.If) or not _calls_skip(stmt.body):
            continue
        for devices, exact in _needs(stmt.test, env, module):
            if devices < 1:
                continue
            if found is None or devices > found.devices or (devices == found.devices and exact):
                shown = f"{'exactly' if exact else 'at least'} {devices}"
                label = f"guard `{ast.unparse(stmt.test)}` ({shown})"
                found = Guard(devices, exact, label, stmt.lineno)
    return found
