"""``scriptbuilder build --env-info FILE``: ``arch``, ``partitions.<name>.arch`` and
``default_models_repo_host``; anything absent stays unknown.
"""

from __future__ import annotations

from typing import Any

from scriptbuilder.inputs.request_file import read_json_object


class FileEnvInfo:
    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    @classmethod
    def load(cls, path: str) -> FileEnvInfo:
        return cls(read_json_object(path, f"--env-info {path}", "pass a JSON object"))

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
