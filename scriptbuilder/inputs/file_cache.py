"""Parsed input files kept across builds while their size and mtime stay the same.

A sweep builds thousands of jobs from the same slurm_env.json and properties
file; reading and checking them once is enough. Cached values are shared:
treat them as read-only.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_LIMIT = 256
_cache: dict[tuple[str, Callable[[str], Any]], tuple[tuple[int, int], Any]] = {}


def load(path: str | os.PathLike[str], parse: Callable[[str], T]) -> T:
    """``parse(path)``, or its earlier result for the unchanged file. Errors (a
    missing file, for one) are not cached: ``parse`` sees the path every time."""
    key = (os.fspath(path), parse)
    try:
        info = os.stat(key[0])
    except OSError:
        return parse(key[0])
    stamp = (info.st_mtime_ns, info.st_size)
    hit = _cache.get(key)
    if hit is not None and hit[0] == stamp:
        return hit[1]  # type: ignore[no-any-return]
    value = parse(key[0])
    if len(_cache) >= _LIMIT:
        _cache.clear()
    _cache[key] = (stamp, value)
    return value


def clear() -> None:
    """Forget every cached value (benchmarks measure cold reads with it)."""
    _cache.clear()
