"""Parsed input files kept across builds while their size and mtime stay the same.

A sweep builds thousands of jobs from the same slurm_env.json, properties file
and test files; reading and checking them once is enough. What is read from a
file can be kept the same way (the GPUs a test needs): ``parse`` then takes
more arguments, which are part of the key. Cached values are shared: treat
them as read-only.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")

_LIMIT = 256
_Key = tuple[str, Callable[..., Any], tuple[Hashable, ...]]
_Store = dict[_Key, tuple[tuple[int, int], Any]]
#: Parsed files, and what was read from them (keyed by ``args`` too). Apart, so a
#: sweep over thousands of test ids never pushes a parsed file out.
_cache: _Store = {}
_derived: _Store = {}
#: Values read from files are small; a test list has thousands of ids.
_DERIVED_LIMIT = 4096


def load(path: str | os.PathLike[str], parse: Callable[..., T], *args: Hashable) -> T:
    """``parse(path, *args)``, or its earlier result for the unchanged file and the
    same ``args``. Errors (a missing file, for one) are not cached: ``parse`` sees
    the path every time."""
    name = os.fspath(path)
    try:
        info = os.stat(name)
    except OSError:
        return parse(name, *args)
    stamp = (info.st_mtime_ns, info.st_size)
    key = (name, parse, args)
    store, limit = (_derived, _DERIVED_LIMIT) if args else (_cache, _LIMIT)
    hit = store.get(key)
    if hit is not None and hit[0] == stamp:
        return hit[1]  # type: ignore[no-any-return]
    value = parse(name, *args)
    if len(store) >= limit:
        store.clear()
    store[key] = (stamp, value)
    return value


def clear() -> None:
    """Forget every cached value (benchmarks measure cold reads with it)."""
    _cache.clear()
    _derived.clear()
