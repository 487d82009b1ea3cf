"""Where the test step runs: the directory from which pytest finds every selector.

TensorRT-LLM's lists name tests relative to ``tests/integration/defs`` (``unittest/...``
relative to ``tests``) and CI runs pytest there; so, without a ``cd``, the first of the
project folder, ``tests/integration/defs`` and ``tests`` that holds every selector in the
local checkout (``repo_root``) is where the step runs, under ``step_dir`` (the project
folder on the execution host).  Selectors after a ``cd``, and absolute ones, stay put."""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass, field

from scriptbuilder.inputs.tests.selectors import PytestCommand, TestId

#: Candidate step directories, relative to the project folder, in order.
STEP_DIRS = ("", "tests/integration/defs", "tests")


@dataclass(frozen=True)
class Located:
    """Local paths of the selectors found, and the step's directory when it must change."""

    paths: dict[TestId, str] = field(default_factory=dict)
    #: Relative to the project folder; None: the step's own directory.
    workdir: str | None = None
    reason: str = ""
    #: One line per selector found nowhere (or no directory holding them all).
    missing: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def exists(tid: TestId, path: str) -> bool:
    return os.path.isdir(path) if tid.folder else os.path.isfile(path)


def locate(cmd: PytestCommand, repo_root: str | None, step_dir: str | None) -> Located:
    if not repo_root:
        return Located(
            warnings=["no local checkout (repo_root) to check the test ids against; pass repo_root"]
        )
    join = posixpath.join
    step_dir = step_dir or repo_root
    paths: dict[TestId, str] = {}
    missing: list[str] = []
    warnings: list[str] = []
    free: list[TestId] = []
    for tid in cmd.ids:
        base = tid.cwd if tid.cwd is not None else ""
        path = join(base, tid.path)
        if not posixpath.isabs(path):
            if tid.cwd is None and not cmd.has_cd:
                free.append(tid)
                continue
            local = join(repo_root, path)
        elif path == step_dir or path.startswith(step_dir.rstrip("/") + "/"):
            local = join(repo_root, posixpath.relpath(path, step_dir))
        elif step_dir != repo_root:
            warnings.append(f"test path {path} is outside {step_dir} and cannot be checked here")
            continue
        else:
            local = path
        if exists(tid, local):
            paths[tid] = local
        else:
            missing.append(f"test {'folder' if tid.folder else 'file'} {path} not found ({tid})")
    # The first directory holding every free selector; all of them are looked in
    # only when none does.
    found = {d: [t for t in free if exists(t, join(repo_root, d, t.path))] for d in STEP_DIRS}
    chosen = next((d for d in STEP_DIRS if len(found[d]) == len(free)), None)
    if chosen is None:
        chosen = max(STEP_DIRS, key=lambda d: len(found[d]))  # the first of the largest
        for tid in (t for t in free if t not in found[chosen]):
            homes = [d for d in STEP_DIRS if tid in found[d]]
            if homes:
                missing.append(
                    f"no directory holds every test: {tid} is under "
                    f"{homes[0] or 'the project folder'}, {found[chosen][0]} under "
                    f"{chosen or 'the project folder'} only"
                )
            else:
                tried = ", ".join(join(step_dir, d).rstrip("/") for d in STEP_DIRS)
                kind = "folder" if tid.folder else "file"
                missing.append(f"test {kind} {tid.path} not found under {tried} ({tid})")
    paths |= {tid: join(repo_root, chosen, tid.path) for tid in found[chosen]}
    reason = (
        f"the test ids resolve under {chosen}, not in the project folder, and the command "
        "has no cd (pytest reads them from its working directory)"
    )
    return Located(paths, chosen or None, reason if chosen else "", missing, warnings)
