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
    from scriptbuilder.schemas import schema

    properties = schema("job-spec")["properties"]
    unknown = set(fields) - set(properties)
    if unknown:
        raise TypeError(f"not job_spec fields: {sorted(unknown)}")
    doc: dict[str, Any] = {}
    for name, sub in properties.items():
        value = fields.get(name, sub.get("default"))
        if value is not None:
            doc[name] = value
    return doc


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
    if isinstance(value, str):
        return _string(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)
    inner = newline + "  "
    if isinstance(value, list):
        if not value:
            return "[]"
        return "[" + inner + ("," + inner).join(_encode(v, inner) for v in value) + newline + "]"
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = (
            _string(k)
            + ": "
            + (_embedded(v) if k == "slurm_env" and newline == "\n" else _encode(v, inner))
            for k, v in value.items()
        )
        return "{" + inner + ("," + inner).join(items) + newline + "}"
    return json.dumps(value, ensure_ascii=False)
