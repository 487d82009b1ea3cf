"""scriptbuilder.inputs.model_lookup: bounded breadth-first search for a model folder."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from scriptbuilder.inputs import model_lookup
from scriptbuilder.inputs.model_lookup import find_model_dir

TREE = [
    "llama-3.1-model/Llama-3.1-8B-Instruct/",
    "llama-3.1-model/Meta-Llama-3.1-8B/",
    "Qwen3/Qwen3-8B/",
    "Qwen3/qwen3-8b-fp8/",
    "a/b/c/Deep-Model/",  # depth 4
    "a/Mid-Model/",
    "b/Mid-Model/",  # same depth as a/Mid-Model: sorted order wins
    "z-Mid-Model/",
    "Shallow/",
    "nested/Shallow/",  # deeper than Shallow/
    "files/Not-A-Dir",  # a file with a model's name
]


@pytest.fixture
def models(tmp_path: Path) -> Path:
    for item in TREE:
        path = tmp_path / item
        if item.endswith("/"):
            path.mkdir(parents=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("")
    return tmp_path


@pytest.mark.parametrize(
    ("name", "max_depth", "expected"),
    [
        ("Llama-3.1-8B-Instruct", 3, "llama-3.1-model/Llama-3.1-8B-Instruct"),
        ("llama-3.1-8b-instruct", 3, "llama-3.1-model/Llama-3.1-8B-Instruct"),  # any case
        ("LLAMA-3.1-MODEL", 3, "llama-3.1-model"),
        ("Qwen3-8B", 3, "Qwen3/Qwen3-8B"),
        ("qwen3-8b-FP8", 3, "Qwen3/qwen3-8b-fp8"),
        ("Mid-Model", 3, "a/Mid-Model"),  # tie at depth 2: first in sorted order
        ("Shallow", 3, "Shallow"),  # shallowest wins
        ("Deep-Model", 3, None),  # depth 4 is beyond the bound
        ("Deep-Model", 4, "a/b/c/Deep-Model"),
        ("Llama-3.1-8B-Instruct", 1, None),
        ("Not-A-Dir", 3, None),  # files never match
        ("missing", 3, None),
        ("", 3, None),
        ("Shallow", 0, None),
    ],
)
def test_find_model_dir(models: Path, name: str, max_depth: int, expected: str | None) -> None:
    found = find_model_dir(models, name, max_depth)
    assert found == (models / expected if expected is not None else None)


def test_missing_root(tmp_path: Path) -> None:
    assert find_model_dir(tmp_path / "nope", "x") is None


def test_result_is_under_root_for_relative_to(models: Path) -> None:
    found = find_model_dir(models, "Qwen3-8B")
    assert found is not None
    assert found.relative_to(models).as_posix() == "Qwen3/Qwen3-8B"


def test_symlinks_are_followed_and_cycles_guarded(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "Linked-Model").mkdir(parents=True)
    root = tmp_path / "root"
    (root / "a").mkdir(parents=True)
    (root / "link").symlink_to(elsewhere)
    (root / "a" / "loop").symlink_to(root)  # a cycle back to the root
    (root / "a" / "loop2").symlink_to(root / "a")
    assert find_model_dir(root, "Linked-Model") == root / "link" / "Linked-Model"
    assert find_model_dir(root, "nothing", max_depth=6) is None


def test_unreadable_folders_are_skipped(models: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    original = os.scandir

    def flaky(path: str) -> Iterator[os.DirEntry[str]]:
        if Path(path).name == "a":
            raise PermissionError(13, "Permission denied", path)
        return original(path)

    monkeypatch.setattr(model_lookup.os, "scandir", flaky)
    assert find_model_dir(models, "Mid-Model") == models / "b" / "Mid-Model"
