"""Shared fixtures: snapshots stored as plain files under tests/snapshots/."""

from __future__ import annotations

from pathlib import Path

import pytest
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from tests.build_env import BuildEnv, make_build_env
from tests.slurm_cluster.fixtures import slurm_cluster, standin_record  # noqa: F401
from tests.ssh_server.fixtures import ssh_server  # noqa: F401


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


@pytest.fixture
def build_env(tmp_path: Path) -> BuildEnv:
    """A checkout, a work_dir with slurm_env.json and request defaults (tests/build_env.py)."""
    return make_build_env(tmp_path)
