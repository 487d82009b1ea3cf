"""One line from a pydantic ``ValidationError``: the field, what was wrong, the fix
(a misspelt field gets "did you mean"; values are shortened).
"""

from __future__ import annotations

import difflib
import reprlib
import typing
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from scriptbuilder.errors import BuildError

#: Longest value or field name quoted in a message.
MAX_QUOTED = 60
#: Longest list of known field names in a message (the schema has them all).
MAX_LISTED = 240

_repr = reprlib.Repr()
_repr.maxstring = _repr.maxother = MAX_QUOTED
_repr.maxlevel, _repr.maxlist, _repr.maxdict = 2, 4, 4

_EXPECTED = {
    "int_type": "an integer", "int_parsing": "an integer", "int_from_float": "an integer",
    "float_type": "a number", "string_type": "a string", "bool_type": "true or false",
    "bool_parsing": "true or false", "list_type": "a list", "dict_type": "an object",
    "model_type": "an object", "model_attributes_type": "an object", "none_required": "null",
}  # fmt: skip
_BOUNDS = {
    "greater_than_equal": ("ge", "at least"), "greater_than": ("gt", "more than"),
    "less_than_equal": ("le", "at most"), "less_than": ("lt", "less than"),
}  # fmt: skip
_LINE_BREAKS = {"\n": "a newline", "\r": "a carriage return", "\x00": "a NUL character"}


def shorten(value: Any) -> str:
    """``repr(value)``, bounded in length and depth."""
    return _repr.repr(value)


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _nested_model(arg)
        if found is not None:
            return found
    return None


def _walk(loc: Sequence[int | str], model: type[BaseModel]) -> tuple[str, type[BaseModel] | None]:
    """The dotted field path of ``loc`` (union member tags dropped) and the model
    holding its last name."""
    parts: list[str] = []
    current: type[BaseModel] | None = model
    holder: type[BaseModel] | None = model
    for item in loc:
        if isinstance(item, int):
            parts.append(str(item))
            continue
        if current is None:
            break
        holder = current
        parts.append(item)
        field = current.model_fields.get(item)
        current = _nested_model(field.annotation) if field is not None else None
    return ".".join(parts), holder


def _problem(error: ErrorDetails) -> str:
    kind, ctx, value = error["type"], error.get("ctx") or {}, error.get("input")
    got = f", got {shorten(value)}"
    if kind in _EXPECTED:
        return f"expected {_EXPECTED[kind]}{got}"
    if kind == "literal_error":
        return f"expected one of {ctx.get('expected')}{got}"
    if kind in _BOUNDS:
        key, words = _BOUNDS[kind]
        return f"must be {words} {ctx.get(key)}{got}"
    if kind == "string_pattern_mismatch" and isinstance(value, str):
        found = next((name for char, name in _LINE_BREAKS.items() if char in value), "")
        return f"holds {found or 'a line break'}, which would break a #SBATCH line or a path{got}"
    if kind == "string_unicode":
        return f"holds a lone surrogate, which is not text{got}"
    message = str(error.get("msg", "is not valid"))
    return f"{message[:1].lower()}{message[1:]}{got}"


def describe(exc: ValidationError, model: type[BaseModel], subject: str, fix: str) -> str:
    """The first problem of ``exc`` as ``<subject> '<field>' ...; <fix>``.

    ``model`` is the model that was validated (to find known field names)."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    path, holder = _walk(first["loc"], model)
    name = shorten(path) if len(path) > MAX_QUOTED else repr(path)
    if first["type"] == "extra_forbidden":
        unknown = str(first["loc"][-1])
        known = list(holder.model_fields) if holder is not None else []
        close = difflib.get_close_matches(unknown[: MAX_QUOTED * 2], known, n=1)
        if close:
            return f"{subject} {name} is unknown; did you mean {close[0]!r}?"
        listed = ", ".join(known)
        if len(listed) > MAX_LISTED:
            listed = listed[: listed.rfind(", ", 0, MAX_LISTED)] + ", ..."
        return f"{subject} {name} is unknown; known fields: {listed}"
    if first["type"] == "missing":
        return f"{subject} {name} is required; add it"
    # A value refused by every member of a union: one error per member, same field.
    same = [e for e in errors if _walk(e["loc"], model)[0] == path]
    expected = [_EXPECTED[e["type"]] for e in same if e["type"] in _EXPECTED]
    if len(same) > 1 and len(expected) == len(same):
        problem = f"expected {' or '.join(dict.fromkeys(expected))}, got {shorten(first['input'])}"
    else:
        problem = _problem(first)
    kinds = {e["type"] for e in same}  # a field that takes a string (or null) only
    if isinstance(first["input"], int | float) and kinds - {"none_required"} == {"string_type"}:
        problem += " (YAML reads an unquoted 30:00, 0123 or yes as a number or true: quote it)"
    return f"{subject} {name}: {problem}; {fix}"


M = typing.TypeVar("M", bound=BaseModel)


def validated(model: type[M], data: Any, subject: str, fix: str) -> M:
    """``model.model_validate(data)``; a refusal becomes a one-line BuildError."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise BuildError(describe(exc, model, subject, fix)) from None
