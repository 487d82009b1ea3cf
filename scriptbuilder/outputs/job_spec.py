"""job_spec.json (procedure Step 5): the document, in the ``JobSpec`` field order."""

from __future__ import annotations

import json
from typing import Any

from scriptbuilder.models import JobSpec


def job_spec_document(**fields: Any) -> dict[str, Any]:
    """The job spec with the model's field order and defaults; fields whose value
    is None are left out (scenario-specific ones appear only for their scenario)."""
    unknown = set(fields) - JobSpec.model_fields.keys()
    if unknown:
        raise TypeError(f"not job_spec fields: {sorted(unknown)}")
    doc: dict[str, Any] = {}
    for name, info in JobSpec.model_fields.items():
        if name in fields:
            value = fields[name]
        else:
            value = None if info.is_required() else info.get_default(call_default_factory=True)
        if value is not None:
            doc[name] = value
    return doc


def job_spec_json(doc: dict[str, Any]) -> str:
    """The text of job_spec.json."""
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
