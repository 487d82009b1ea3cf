"""Find a model's folder under the models root (procedure Step 3, eval model path), breadth-first
to ``max_depth`` (folders at the last level are matched by name, never listed).
"""

from __future__ import annotations

import os
from pathlib import Path


def _listing(path: str) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(path) as entries:
            return sorted(entries, key=lambda entry: entry.name)
    except OSError:  # unreadable, vanished, not a directory: skip silently
        return []


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()  # follows symlinks
    except OSError:
        return False


def find_model_dir(root: Path, name: str, max_depth: int = 3) -> Path | None:
    """The shallowest folder below ``root`` named ``name`` (any case), first in sorted
    order; symlinks followed (each real folder listed once) but not resolved."""
    target = name.casefold()
    if max_depth < 1 or not target:
        return None
    try:
        root_stat = os.stat(root)
    except OSError:
        return None
    seen = {(root_stat.st_dev, root_stat.st_ino)}
    level = [str(root)]
    for depth in range(1, max_depth + 1):
        deeper: list[str] = []
        for folder in level:
            for entry in _listing(folder):
                matches = entry.name.casefold() == target
                if not matches and depth == max_depth:
                    continue  # the last level is only looked at, never listed
                if not _is_dir(entry):
                    continue
                if matches:
                    return Path(entry.path)
                try:
                    info = entry.stat()  # follows symlinks: the real folder
                except OSError:
                    continue
                key = (info.st_dev, info.st_ino)
                if key not in seen:
                    seen.add(key)
                    deeper.append(entry.path)
        level = deeper
    return None
