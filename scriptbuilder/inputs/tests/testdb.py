"""Where TensorRT-LLM's CI runs a test: the stages of the test-db lists
(``tests/integration/test_lists/test-db/*.yml`` in the checkout) that list it,
and their ``system_gpu_count``."""

from __future__ import annotations

import glob
import os
import posixpath
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import yaml

from scriptbuilder.inputs.request_file import SAFE_LOADER
from scriptbuilder.inputs.tests.selectors import TestId

LISTS = "tests/integration/test_lists/test-db"
_HOMES = ("tests/integration/defs/", "tests/")


@dataclass(frozen=True)
class Stage:
    list_name: str
    number: int
    gpus: int
    tests: tuple[str, ...]  # the ids it lists, each without its options

    def __str__(self) -> str:
        return f"{self.list_name} stage {self.number} (system_gpu_count {self.gpus})"


StageReader = Callable[[str], tuple[Stage, ...]]


def _covers(entry: str, name: str) -> bool:
    short, long = sorted((entry, name), key=len)
    return long == short or (long.startswith(short) and long[len(short)] in ":[/")


def read_stages(repo_root: str) -> tuple[Stage, ...]:
    """Every stage with a ``system_gpu_count`` in the test-db lists of ``repo_root``."""
    found = []
    for path in sorted(glob.glob(os.path.join(repo_root, LISTS, "*.yml"))):
        try:
            with open(path, encoding="utf-8") as file:
                doc = yaml.load(file, Loader=SAFE_LOADER)
        except (OSError, yaml.YAMLError):
            continue
        for blocks in doc.values() if isinstance(doc, dict) else ():
            for number, block in enumerate(blocks if isinstance(blocks, list) else (), 1):
                block = block if isinstance(block, dict) else {}
                ranges = (block.get("condition") or {}).get("ranges") or {}
                gpus = (ranges.get("system_gpu_count") or {}).get("gte")
                tests = tuple(str(t).split()[0] for t in block.get("tests") or () if str(t).strip())
                if isinstance(gpus, int):
                    found.append(Stage(os.path.basename(path), number, gpus, tests))
    return tuple(found)


def listing(stages: Iterable[Stage], tid: TestId) -> list[Stage]:
    """The stages listing ``tid`` (or a test inside it, or the selector holding it)."""
    name = posixpath.normpath(posixpath.join(tid.cwd or "", str(tid)))
    name = next((name[len(h) :] for h in _HOMES if name.startswith(h)), name)  # as listed
    return [s for s in stages if any(_covers(t, name) for t in s.tests)]
