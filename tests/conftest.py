"""Shared fixtures: snapshots stored as plain files under tests/snapshots/."""

from __future__ import annotations

import pytest
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode


class _TextSnapshot(SingleFileSnapshotExtension):
    """One reviewable text file per snapshot: tests/snapshots/<test file>/<test>.<ext>."""

    _write_mode = WriteMode.TEXT


class ScriptSnapshot(_TextSnapshot):
    file_extension = "sh"


class JsonSnapshot(_TextSnapshot):
    file_extension = "json"


class TextSnapshot(_TextSnapshot):
    file_extension = "txt"


@pytest.fixture
def script_snapshot(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    return snapshot.use_extension(ScriptSnapshot)


@pytest.fixture
def json_snapshot(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    return snapshot.use_extension(JsonSnapshot)


@pytest.fixture
def text_snapshot(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    return snapshot.use_extension(TextSnapshot)
