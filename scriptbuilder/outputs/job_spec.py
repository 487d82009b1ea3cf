"""job_spec.json (procedure Step 5): the document, in the ``JobSpec`` field order."""

from __future__ import annotations

import hashlib
import json
import math
import posixpath
from collections.abc import Mapping
from typing import Any

from scriptbuilder.errors import BuildError
from scriptbuilder.models.job_spec import PASS_THROUGH, JobSpec
from scriptbuilder.resolution.context import Context
from scriptbuilder.scenarios.base import Scenario

#: Fields the builder owns: a stale value from an earlier file never survives.
OWNED = frozenset(JobSpec.model_fields) - frozenset(PASS_THROUGH)
#: Connection fields an executor reads that slurm_env.json may know.
_FROM_SLURM_ENV = ("ssh_host", "slurm_user", "remote_cwd")
_ORDER = {name: i for i, name in enumerate(JobSpec.model_fields)}


def job_spec_document(**fields: Any) -> dict[str, Any]:
    """The job spec with the model's field order and defaults (each document its
    own copy of them); fields whose value is None are left out."""
    if unknown := fields.keys() - JobSpec.model_fields.keys():
        raise TypeError(f"not job_spec fields: {sorted(unknown)}")
    doc = {}
    for name, info in JobSpec.model_fields.items():
        if name in fields:
            value = fields[name]
        else:
            value = None if info.is_required() else info.get_default(call_default_factory=True)
        if value is not None:
            doc[name] = value
    return doc


def _pass_through(ctx: Context, env: Mapping[str, Any]) -> dict[str, Any]:
    """Request values, else the earlier job_spec.json's, else the connection fields
    the scenario knows (``env``)."""
    req, earlier = ctx.request, ctx.earlier_job_spec or {}
    out = {
        name: earlier.get(name) if (v := getattr(req, name)) is None else v for name in PASS_THROUGH
    }
    out |= {name: env.get(name) for name in _FROM_SLURM_ENV if out[name] is None}
    if req.repo_root:
        out["repo_root"] = posixpath.normpath(req.repo_root)
    return out


def job_spec_for(
    ctx: Context, scenario: Scenario, *, job_name: str, **fields: Any
) -> dict[str, Any]:
    """The whole job_spec.json of a build: the job's ``fields``, ``scenario``'s, the
    fields every executor reads, then the earlier file's keys that the builder does not own.
    The orchestrator's own device and node counts must match the build's."""
    req = ctx.request
    devices, nodes = fields["required_devices"], fields["node_count"]
    per_node = math.ceil(devices / max(nodes, 1))
    for name, given, derived in (
        ("total_required_devices", req.total_required_devices, devices),
        ("required_devices_per_node", req.required_devices_per_node, per_node),
        ("node_count", req.node_count, nodes),
    ):
        if given is not None and given != derived:
            raise BuildError(
                f"{name} = {given} from the request, but this build needs {derived} ({devices} "
                f"GPUs on {nodes} node(s); see --explain); pass {name} {derived} or leave it out"
            )
    if req.job_name and req.job_name != job_name:
        ctx.trace.warn(
            f"job_name {req.job_name!r} from the request is not used: the script names the "
            f"job {job_name!r}, and job_spec.json records that"
        )
    doc = job_spec_document(
        **scenario.job_spec_fields(ctx),
        work_dir=posixpath.normpath(req.work_dir),
        job_name=job_name,
        total_required_devices=devices,
        required_devices_per_node=per_node,
        slurm_env=ctx.slurm_env_raw,
        warnings=list(ctx.trace.warnings),
        **_pass_through(ctx, scenario.connection_fallback(ctx)),
        **fields,
    )
    for key, value in (ctx.earlier_job_spec or {}).items():
        if key not in OWNED and key not in doc:
            doc[key] = value
    return doc


def job_spec_json(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def _sha256(data: str | bytes) -> str:
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


def with_hashes(
    doc: dict[str, Any], script_path: str, data: Mapping[str, str | bytes]
) -> dict[str, Any]:
    """``doc`` with ``extra_files_sha256`` and, when ``script_path`` is in ``data``
    (path to what was written there), ``script_sha256``; in the model's order."""
    merged = {**doc, "extra_files_sha256": {p: _sha256(data[p]) for p in doc["extra_files"]}}
    if script_path in data:
        merged["script_sha256"] = _sha256(data[script_path])
    return dict(sorted(merged.items(), key=lambda item: _ORDER.get(item[0], len(_ORDER))))
