"""The ``<work_dir>/job_spec.json`` the orchestrator (or an earlier build) left, read for
the remote paths; a file there that is not a JSON object stops the build, left as it was.
"""

from __future__ import annotations

import os.path
import posixpath
from typing import Any

from scriptbuilder.inputs.request_file import read_json_object
from scriptbuilder.models.job_spec import EarlierJobSpec
from scriptbuilder.models.messages import validated

JOB_SPEC = "job_spec.json"
_FIX = "fix it or remove it (it is read for remote_repo_path and remote_work_dir)"


def read_earlier_job_spec(work_dir: str) -> tuple[EarlierJobSpec, dict[str, Any]] | None:
    """The checked fields and the raw object, or None when there is no file."""
    path = posixpath.join(work_dir, JOB_SPEC)
    if not os.path.isfile(path):
        return None
    label = f"existing {path}"
    raw = read_json_object(path, label, _FIX)
    return validated(EarlierJobSpec, raw, f"{label}: field", _FIX), raw
