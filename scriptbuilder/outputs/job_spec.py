"""job_spec.json (procedure Step 5): the document, in the ``JobSpec`` field order.

Built as plain data so a build needs no pydantic; :class:`scriptbuilder.models.JobSpec`
declares the shape and ``BuiltJob.job_spec`` returns it as that model.
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring as _string
from typing import Any


def job_spec_document(**fields: Any) -> dict[str, Any]:
    """The job spec with the schema's field order and defaults; fields whose value
    is None are left out (scenario-specific ones appear only for their scenario)."""
    order, names = _fields()
    if not names.issuperset(fields):
        raise TypeError(f"not job_spec fields: {sorted(set(fields) - names)}")
    doc: dict[str, Any] = {}
    for name, default in order:
        value = fields.get(name, default)
        if value is not None:
            doc[name] = value
    return doc


_FIELDS: list[tuple[list[tuple[str, Any]], frozenset[str]]] = []


def _fields() -> tuple[list[tuple[str, Any]], frozenset[str]]:
    """``(field, default)`` in the job-spec schema's order, and the field names; read once."""
    if not _FIELDS:
        from scriptbuilder.schemas import schema

        properties = schema("job-spec")["properties"]
        order = [(name, sub.get("default")) for name, sub in properties.items()]
        _FIELDS.append((order, frozenset(properties)))
    return _FIELDS[0]


def job_spec_json(doc: dict[str, Any]) -> str:
    """The document as ``json.dumps(doc, indent=2, ensure_ascii=False)`` writes it.

    Written by :func:`_encode`, which gives the same text several times faster
    for this document's plain types; the embedded slurm_env (the largest part,
    the same object for every build of a sweep) is encoded once and reused."""
    return _encode(doc, "\n") + "\n"


_fragments: dict[int, tuple[dict[str, Any], str]] = {}


def _embedded(env: dict[str, Any]) -> str:
    """``env`` encoded one level deep, remembered per object."""
    hit = _fragments.get(id(env))
    if hit is not None and hit[0] is env:
        return hit[1]
    text = json.dumps(env, indent=2, ensure_ascii=False).replace("\n", "\n  ")
    if len(_fragments) >= 64:
        _fragments.clear()
    _fragments[id(env)] = (env, text)
    return text


def _encode(value: Any, newline: str) -> str:
    """JSON for str, bool, None, int, list and dict (str keys), indented by 2;
    ``newline`` is the line break plus the current indentation."""
    kind = type(value)
    if kind is str:
        return _string(value)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return int.__repr__(value)
    if kind is dict:
        return _encode_dict(value, newline)
    if kind is list:
        if not value:
            return "[]"
        inner = newline + "  "
        items = [_encode(v, inner) for v in value]
        return "[" + inner + ("," + inner).join(items) + newline + "]"
    return json.dumps(value, ensure_ascii=False)


def _encode_dict(value: dict[str, Any], newline: str) -> str:
    if not value:
        return "{}"
    inner = newline + "  "
    top = newline == "\n"
    items = []
    for key, item in value.items():
        head = _string(key) + ": "
        kind = type(item)
        if kind is str:
            items.append(head + _string(item))
        elif kind is int:
            items.append(head + int.__repr__(item))
        elif item is None:
            items.append(head + "null")
        elif kind is dict and top and key == "slurm_env":
            items.append(head + _embedded(item))
        else:
            items.append(head + _encode(item, inner))
    return "{" + inner + ("," + inner).join(items) + newline + "}"
