"""job_spec.json (procedure Step 5): the document, in the ``JobSpec`` field order.

Built as plain data so a build needs no pydantic; :class:`scriptbuilder.models.JobSpec`
declares the shape and ``BuiltJob.job_spec`` returns it as that model.
"""

from __future__ import annotations

import json
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
    """The document as indented JSON. The embedded slurm_env (the largest part,
    the same object for every build of a sweep) is encoded once and spliced in."""
    env = doc.get("slurm_env")
    if env is None:
        return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    text = json.dumps({**doc, "slurm_env": _PLACEHOLDER}, indent=2, ensure_ascii=False)
    return text.replace(json.dumps(_PLACEHOLDER), _embedded(env), 1) + "\n"


_PLACEHOLDER = "\u0000slurm_env\u0000"
_fragments: dict[int, tuple[dict[str, Any], str]] = {}


def _embedded(env: dict[str, Any]) -> str:
    """``env`` as indented JSON one level deep, remembered per object."""
    hit = _fragments.get(id(env))
    if hit is not None and hit[0] is env:
        return hit[1]
    text = json.dumps(env, indent=2, ensure_ascii=False).replace("\n", "\n  ")
    if len(_fragments) >= 64:
        _fragments.clear()
    _fragments[id(env)] = (env, text)
    return text
