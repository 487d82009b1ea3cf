"""OS errors while writing: one line naming the file, the folder and the fix; a
folder that cannot be used exits 2 (usage), a full disk 1; nothing half-written
is left. The full disk is a real small tmpfs (skipped where it cannot be
mounted, except under ``CI=true``)."""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.build_env import BuildEnv
from tests.test_build_stops import run_cli, snapshot_tree
from tests.test_compat_flags import base
from tests.test_dropin_output import drop_in

NO_SPACE = "No space left on device; free space or choose another"


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs, unmounted afterwards."""
    folder = tmp_path / "small"
    folder.mkdir()
    try:
        proc = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)],
            capture_output=True,
            text=True,
            check=False,
        )
        problem = proc.stderr.strip() if proc.returncode else ""
    except OSError as exc:
        problem = str(exc)
    if problem:
        if os.environ.get("CI", "").strip().lower() in ("1", "true", "yes"):
            pytest.fail(f"a small tmpfs is needed in CI: {problem}")
        pytest.skip(f"cannot mount a small tmpfs: {problem}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def _fill(folder: Path) -> None:
    """Take the file system's last free byte."""
    fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        while True:
            os.write(fd, b"x" * 512)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)


def _request_file(build_env: BuildEnv, work_dir: Path, **fields: Any) -> Path:
    request = build_env.request(
        work_dir=str(work_dir), slurm_env_file=str(build_env.work_dir / "slurm_env.json"), **fields
    )
    path = build_env.root / f"request-{len(list(build_env.root.glob('request-*')))}.json"
    path.write_text(json.dumps(request))
    return path


def test_a_full_disk_under_work_dir_names_the_file_and_changes_nothing(
    build_env: BuildEnv, small_fs: Path
) -> None:
    work_dir = small_fs / "work"
    assert run_cli(["build", str(_request_file(build_env, work_dir))])[0] == 0
    _fill(small_fs)
    before = snapshot_tree(small_fs)
    other = _request_file(build_env, work_dir, container_image="nvcr.io#nvidia/other:1")
    code, out, err = run_cli(["build", str(other)])
    assert (code, out) == (1, "")
    pattern = rf"scriptbuilder: error: cannot write (\S+) into work_dir {work_dir}: {NO_SPACE} "
    match = re.fullmatch(pattern + "work_dir\n", err)
    assert match is not None, err
    assert match[1] in os.listdir(work_dir)  # the script or job_spec.json
    assert snapshot_tree(small_fs) == before  # the earlier pair, no temporary file


def test_a_full_disk_under_the_drop_ins_output_keeps_the_earlier_file(
    tmp_path: Path, small_fs: Path
) -> None:
    out = small_fs / "job.slurm"
    args = [*base("pytest", tmp_path), "--output", str(out)]
    assert drop_in(args).returncode == 0
    _fill(small_fs)
    before = snapshot_tree(small_fs)
    proc = drop_in([*args, "--partition", "other"])
    assert proc.returncode == 1
    assert proc.stderr.decode().splitlines() == [
        f"build_slurm_script: error: cannot write job.slurm into --output folder {small_fs}: "
        f"{NO_SPACE} --output folder"
    ]
    assert snapshot_tree(small_fs) == before


def test_a_work_dir_whose_parent_is_missing_is_a_usage_error(build_env: BuildEnv) -> None:
    work_dir = build_env.root / "no" / "such" / "work"
    code, out, err = run_cli(["build", str(_request_file(build_env, work_dir))])
    assert (code, out) == (2, "")
    assert err == (
        f"scriptbuilder: error: cannot create work_dir {work_dir}: No such file or directory; "
        f"create {work_dir.parent} or choose another work_dir\n"
    )
    assert not (build_env.root / "no").exists()


def test_a_local_log_dir_on_a_read_only_file_system_is_a_usage_error(
    tmp_path: Path, small_fs: Path
) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(small_fs)], check=True)
    out = tmp_path / "job.slurm"
    log_dir = small_fs / "logs"
    proc = drop_in(
        [*base("pytest", tmp_path), "--local-log-dir", str(log_dir), "--output", str(out)]
    )
    assert proc.returncode == 2
    assert proc.stderr.decode().splitlines() == [
        f"build_slurm_script: error: cannot create --local-log-dir {log_dir}: Read-only file "
        f"system; make {small_fs} a writable folder or choose another --local-log-dir"
    ]
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["small"]
