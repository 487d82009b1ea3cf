"""A request file (JSON or YAML, or ``-`` for standard input) read into a mapping.

Too large, not UTF-8, nested too deeply or using YAML aliases (which can expand a few
hundred bytes into gigabytes) is a one-line :class:`BuildError` before anything is resolved.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import yaml

from scriptbuilder.errors import BuildError

#: Far above any real request, which holds field values only.
MAX_REQUEST_BYTES = 2 * 1024 * 1024
#: Local paths that a request file may give relative to its own folder.
LOCAL_PATH_FIELDS = (
    "work_dir", "repo_root", "skill_dir", "slurm_env_file", "custom_script", "perf_config_yaml",
    "test_list",
)  # fmt: skip
#: libyaml's safe loader: several times faster, and it refuses nesting beyond 1,000 levels
#: at once (the pure-Python loader, without libyaml, is quadratic in the nesting).
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_limited(source: str, label: str, limit: int = MAX_REQUEST_BYTES) -> str:
    """The UTF-8 text of file ``source`` (``-``: standard input), at most ``limit`` bytes."""
    try:
        if source == "-":
            stream = getattr(sys.stdin, "buffer", None)
            raw = stream.read(limit + 1) if stream else sys.stdin.read(limit + 1).encode()
        else:
            with open(source, "rb") as handle:
                raw = handle.read(limit + 1)
    except OSError as exc:
        raise BuildError(f"{label}: {exc.strerror}; pass a readable file") from None
    return decoded(raw, label, limit)


def decoded(raw: bytes, label: str, limit: int = MAX_REQUEST_BYTES) -> str:
    """``raw`` as UTF-8 text; more than ``limit`` bytes, or not UTF-8, is a BuildError."""
    if len(raw) > limit:
        raise BuildError(
            f"{label} is larger than {limit // 1024} KiB; a request holds field values "
            "only, pass a smaller file"
        )
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BuildError(
            f"{label} is not UTF-8 text (byte {raw[exc.start]:#04x} at offset {exc.start}); "
            "save it as UTF-8"
        ) from None


def parse_json(text: str, label: str) -> Any:
    """``json.loads(text)``; nesting beyond what the parser can hold is a BuildError."""
    try:
        return json.loads(text)
    except RecursionError:
        raise BuildError(f"{label} is nested too deeply; flatten it") from None


def read_json_object(
    path: str, label: str, fix: str, limit: int = MAX_REQUEST_BYTES
) -> dict[str, Any]:
    """The JSON object in file ``path``; anything else is a BuildError ending in ``fix``."""
    text = read_limited(path, label, limit)
    try:
        raw = parse_json(text, label)
        # Such objects are copied into job_spec.json, so they must be writable as UTF-8.
        json.dumps(raw, ensure_ascii=False).encode("utf-8")
    except json.JSONDecodeError as exc:
        raise BuildError(f"{label} is not valid JSON ({exc}); {fix}") from None
    except UnicodeEncodeError:
        raise BuildError(f"{label} holds a lone surrogate (not text); {fix}") from None
    if not isinstance(raw, dict):
        raise BuildError(f"{label} must hold a JSON object; {fix}")
    return raw


def _parse_yaml(text: str, label: str) -> Any:
    try:
        for event in yaml.parse(text, Loader=SAFE_LOADER):
            if isinstance(event, yaml.AliasEvent):
                raise BuildError(
                    f"{label} uses the YAML alias *{str(event.anchor)[:60]}; aliases are "
                    "not accepted in requests, write the value out"
                )
        return yaml.load(text, Loader=SAFE_LOADER)
    except RecursionError:
        raise BuildError(f"{label} is nested too deeply; flatten it") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        problem = getattr(exc, "problem", None)
        why = f" ({str(problem)[:80]})" if problem else ""
        raise BuildError(f"{label} is neither JSON nor YAML{where}{why}; fix its syntax") from None


def read_request(source: str) -> dict[str, Any]:
    """A request from a JSON or YAML file (``-``: stdin), relative paths made absolute."""
    label = f"request file {source}"
    text = read_limited(source, label)
    try:
        data = parse_json(text, label)
    except json.JSONDecodeError:
        data = _parse_yaml(text, label)
    if not isinstance(data, dict):
        raise BuildError(f"{label} must hold a mapping of field names to values")
    if source != "-":
        base = Path(source).resolve().parent
        for name in LOCAL_PATH_FIELDS:
            value = data.get(name)
            if isinstance(value, str) and value and not value.startswith(("/", "~")):
                data[name] = os.path.normpath(base / value)
    return data
