"""An internal-env-info source read from a JSON file (``scriptbuilder build --env-info``).

The file may hold ``"arch"`` (one architecture for every partition),
``"partitions": {"<name>": {"arch": "..."}}`` and ``"default_models_repo_host"``;
anything absent stays unknown and the procedure's fallbacks apply.
"""

from __future__ import annotations

import json
from typing import Any

from scriptbuilder.errors import BuildError
from scriptbuilder.inputs.request_file import parse_json, read_limited


class FileEnvInfo:
    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    @classmethod
    def load(cls, path: str) -> FileEnvInfo:
        label = f"--env-info {path}"
        text = read_limited(path, label)
        try:
            data = parse_json(text, label)
        except json.JSONDecodeError as exc:
            raise BuildError(f"{label} is not valid JSON ({exc}); pass a JSON object") from None
        if not isinstance(data, dict):
            raise BuildError(f"{label} must hold a JSON object")
        return cls(data)

    def arch(self, partition: str | None) -> str | None:
        partitions = self.data.get("partitions")
        if partition and isinstance(partitions, dict):
            entry = partitions.get(partition)
            if isinstance(entry, dict) and isinstance(entry.get("arch"), str):
                return str(entry["arch"])
        value = self.data.get("arch")
        return value if isinstance(value, str) else None

    def default_models_repo_host(self) -> str | None:
        value = self.data.get("default_models_repo_host")
        return value if isinstance(value, str) and value else None
