"""The container image from TensorRT-LLM's image-tags properties file (procedure Step 1)."""

from __future__ import annotations

import os
from pathlib import Path

# Architecture (as ``uname -m`` / Slurm report it, normalized) -> properties key.
ARCH_KEYS: dict[str, str] = {"aarch64": "LLM_SBSA_DOCKER_IMAGE", "x86_64": "LLM_DOCKER_IMAGE"}

_ARCH_ALIASES = {
    "arm64": "aarch64", "aarch64": "aarch64", "sbsa": "aarch64",
    "amd64": "x86_64", "x86_64": "x86_64", "x86-64": "x86_64", "x64": "x86_64",
}  # fmt: skip

_CANONICAL = "jenkins/current_image_tags.properties"
_SEARCH_DIRS = ("jenkins", ".ci", "ci")
_SKIP_DIRS = frozenset({".git", "node_modules", "__pycache__", ".venv", "venv"})
_MAX_DEPTH = 3


def normalize_arch(arch: str) -> str:
    """``arm64``/``sbsa`` -> ``aarch64``, ``amd64``/``x64`` -> ``x86_64``; others lower-cased."""
    key = arch.strip().lower()
    return _ARCH_ALIASES.get(key, key)


def _search(top: Path, skip: frozenset[str]) -> Path | None:
    """Breadth-first, each level in sorted name order."""
    level = [top]
    for depth in range(1, _MAX_DEPTH + 1):
        deeper: list[Path] = []
        for folder in level:
            try:
                with os.scandir(folder) as it:
                    entries = sorted(it, key=lambda entry: entry.name)
            except OSError:
                continue
            for entry in entries:
                try:
                    if (
                        entry.is_file()
                        and "image_tags" in entry.name
                        and entry.name.endswith(".properties")
                    ):
                        return Path(entry.path)
                    if (
                        depth < _MAX_DEPTH
                        and entry.name not in skip
                        and entry.is_dir(follow_symlinks=False)
                    ):
                        deeper.append(Path(entry.path))
                except OSError:
                    continue
        level = deeper
    return None


def find_properties_file(repo_root: str | Path) -> str | None:
    """``jenkins/current_image_tags.properties``, else the first ``*image_tags*.properties``
    to depth 3 under ``jenkins/``, ``.ci/``, ``ci/``, then the repository root."""
    canonical = os.path.join(repo_root, _CANONICAL)
    if os.path.isfile(canonical):
        return canonical
    root = Path(repo_root)
    for name in _SEARCH_DIRS:
        folder = root / name
        if folder.is_dir():
            found = _search(folder, _SKIP_DIRS)
            if found is not None:
                return str(found)
    found = _search(root, _SKIP_DIRS | frozenset(_SEARCH_DIRS))
    return None if found is None else str(found)


def read_properties(path: str | Path) -> dict[str, str]:
    """``KEY=VALUE`` lines (``#``/``!`` comments skipped, a leading ``export`` ignored, since
    ``sh`` sources the file too; a ``#`` inside a value is kept: ``nvcr.io#nvidia/x``)."""
    props: dict[str, str] = {}
    for raw in Path(path).read_text(encoding="utf-8", errors="replace").splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if not sep:
            continue
        key = key.strip()
        if key.startswith("export ") or key.startswith("export\t"):
            key = key[len("export") :].strip()
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        if key:
            props[key] = value
    return props


def image_for_arch(props: dict[str, str], arch: str) -> str | None:
    """The image for ``arch`` by its exact key (``LLM_SBSA_DOCKER_IMAGE_12_9`` never matches)."""
    key = ARCH_KEYS.get(normalize_arch(arch))
    return None if key is None else props.get(key) or None
