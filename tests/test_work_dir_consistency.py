"""work_dir always holds a consistent pair: job_spec.json and the script it names
come from the same build, whatever moment a build is killed, and builds into one
work_dir follow one another.

Builds run in forked child processes (``BuiltJob.write`` of prepared jobs) and
are killed with SIGKILL at random moments (fixed seed, bounded trials), or stop
just before each of their changes to the disk in turn.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import random
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from scriptbuilder.api import BuiltJob
from scriptbuilder.outputs.atomic import Generation
from tests.build_env import REAL_FILES, BuildEnv

IMAGES = [f"nvcr.io#nvidia/tensorrt-llm:1.{i}" for i in range(4)]
TRIALS = 40


def _jobs(build_env: BuildEnv) -> list[BuiltJob]:
    """Custom jobs with different images; two share a model name (so the same
    file names), the others have their own script names."""
    jobs = []
    for i, image in enumerate(IMAGES):
        model = "shared" if i < 2 else f"model_{i}"
        request = build_env.request(
            "custom",
            custom_cmd=f"echo build {i}",
            container_image=image,
            model_name=model,
        )
        jobs.append(build_env.build(request))
    return jobs


def _shown(work_dir: Path) -> tuple[str, str] | None:
    """(job_spec.json text, text of the script it names), or None before any build."""
    spec_path = work_dir / "job_spec.json"
    if not spec_path.exists():
        return None
    spec_text = spec_path.read_text(encoding="utf-8")
    script = Path(json.loads(spec_text)["script_path"])
    assert script.parent == work_dir
    assert os.access(script, os.X_OK), f"{script} is not executable"
    return spec_text, script.read_text(encoding="utf-8")


def _assert_consistent(work_dir: Path, jobs: list[BuiltJob]) -> None:
    shown = _shown(work_dir)
    if shown is None:
        return
    pairs = [(job.job_spec_json, job.script_text) for job in jobs]
    assert shown in pairs, "job_spec.json and the script come from different builds"
    spec = json.loads(shown[0])
    assert spec["docker_image"] in shown[1] and spec["model_name"] in shown[1]


def _assert_no_leftovers(work_dir: Path, job: BuiltJob) -> None:
    state = work_dir / ".scriptbuilder"
    assert sorted(os.listdir(state)) == ["current", "gen-1", "gen-2", "lock"]
    in_use = os.readlink(state / "current")
    other = "gen-2" if in_use == "gen-1" else "gen-1"
    assert os.listdir(state / other) == []  # the earlier generation's files are gone
    assert sorted(os.listdir(state / in_use)) == sorted(["job_spec.json", job.script_name])
    visible = sorted(e for e in os.listdir(work_dir) if e != ".scriptbuilder")
    assert [e for e in visible if e.endswith(".tmp")] == []
    # the documented files of the last build, and the inputs that were there before
    assert set(visible) == {"job_spec.json", job.script_name, "slurm_env.json"}, visible


def _fork_writer(job: BuiltJob, *, loop: bool, ready: int | None = None) -> int:
    pid = os.fork()
    if pid == 0:  # the child: writes, then leaves without running any test teardown
        try:
            if ready is not None:
                os.write(ready, b"x")
            while True:
                job.write()
                if not loop:
                    break
        finally:
            os._exit(0)
    return pid


def _reap(pid: int) -> int:
    return os.waitpid(pid, 0)[1]


def test_a_build_killed_at_any_moment_leaves_a_consistent_pair(build_env: BuildEnv) -> None:
    jobs = _jobs(build_env)
    work_dir = build_env.work_dir
    rng = random.Random(1414)
    jobs[0].write()
    start = time.perf_counter()
    jobs[1].write()
    one_write = time.perf_counter() - start
    for _ in range(TRIALS):
        job = rng.choice(jobs)
        read, write = os.pipe()
        pid = _fork_writer(job, loop=True, ready=write)
        os.read(read, 1)
        os.close(read)
        os.close(write)
        time.sleep(rng.uniform(0, 3 * one_write))
        os.kill(pid, signal.SIGKILL)
        _reap(pid)
        _assert_consistent(work_dir, jobs)
    last = rng.choice(jobs)
    last.write()
    _assert_consistent(work_dir, jobs)
    assert _shown(work_dir) == (last.job_spec_json, last.script_text)
    _assert_no_leftovers(work_dir, last)


def test_concurrent_builds_follow_one_another(build_env: BuildEnv) -> None:
    first, second = _jobs(build_env)[:2]  # same file names, different images
    work_dir = build_env.work_dir
    for _ in range(10):
        pids = [_fork_writer(first, loop=False), _fork_writer(second, loop=False)]
        assert [_reap(pid) for pid in pids] == [0, 0]
        _assert_consistent(work_dir, [first, second])
    second.write()
    _assert_no_leftovers(work_dir, second)


def test_a_build_waits_for_the_one_holding_the_lock(build_env: BuildEnv) -> None:
    first, second = _jobs(build_env)[:2]
    work_dir = build_env.work_dir
    first.write()
    lock = os.open(work_dir / ".scriptbuilder" / "lock", os.O_RDWR)
    fcntl.flock(lock, fcntl.LOCK_EX)
    pid = _fork_writer(second, loop=False)
    time.sleep(0.3)
    assert _shown(work_dir) == (first.job_spec_json, first.script_text)  # still waiting
    fcntl.flock(lock, fcntl.LOCK_UN)
    os.close(lock)
    assert _reap(pid) == 0
    assert _shown(work_dir) == (second.job_spec_json, second.script_text)


def test_files_written_before_this_layout_are_taken_over(build_env: BuildEnv) -> None:
    first, second = _jobs(build_env)[:2]
    work_dir = build_env.work_dir
    work_dir.mkdir(parents=True, exist_ok=True)
    (work_dir / "job_spec.json").write_text(first.job_spec_json, encoding="utf-8")
    script = work_dir / first.script_name
    script.write_text(first.script_text, encoding="utf-8")
    script.chmod(0o755)
    second.write()
    assert _shown(work_dir) == (second.job_spec_json, second.script_text)
    assert (work_dir / "job_spec.json").is_symlink()
    _assert_no_leftovers(work_dir, second)


def test_a_job_spec_rewritten_by_another_tool_is_kept_until_the_next_build(
    build_env: BuildEnv,
) -> None:
    first, second = _jobs(build_env)[:2]
    work_dir = build_env.work_dir
    first.write()
    # the orchestrator adds its keys by writing a new file in place of the link
    spec = json.loads(first.job_spec_json)
    spec["repo_url"] = "https://example.invalid/repo.git"
    edited = json.dumps(spec)
    tmp = work_dir / "job_spec.json.new"
    tmp.write_text(edited, encoding="utf-8")
    os.replace(tmp, work_dir / "job_spec.json")
    assert _shown(work_dir) == (edited, first.script_text)
    second.write()
    assert _shown(work_dir) == (second.job_spec_json, second.script_text)
    _assert_no_leftovers(work_dir, second)


# ------------------------------------------------- a build stopped at every step

#: The calls of ``os`` that change the disk (or the lock file) during a build.
CHANGES = ("open", "write", "pwrite", "fchmod", "symlink", "replace", "rename", "unlink", "mkdir")
STOPPED = 3


def _write_stopped_at(job: BuiltJob, step: int) -> bool:
    """``job.write()`` in a child that exits just before its ``step``-th change (as
    a SIGKILL there would); True when it stopped, False when the build finished."""
    pid = os.fork()
    if pid == 0:
        try:
            count = 0

            def stop_first(call: Any) -> Any:
                def stopping(*args: Any, **kwargs: Any) -> Any:
                    nonlocal count
                    count += 1
                    if count == step:
                        os._exit(STOPPED)
                    return call(*args, **kwargs)

                return stopping

            for name in CHANGES:
                setattr(os, name, stop_first(getattr(os, name)))
            job.write()
        finally:
            os._exit(0)
    status = _reap(pid)
    assert os.WIFEXITED(status), status
    return os.WEXITSTATUS(status) == STOPPED


def _reset(work_dir: Path, start: list[BuiltJob], layout: str) -> None:
    """work_dir with only slurm_env.json, then ``start`` written as ``layout``."""
    for entry in os.listdir(work_dir):
        path = work_dir / entry
        if entry == ".scriptbuilder":
            shutil.rmtree(path)
        elif entry != "slurm_env.json":
            path.unlink()
    if layout == "generations":
        for job in start:
            job.write()
        return
    # regular files, as written before this layout
    job = start[-1]
    (work_dir / "job_spec.json").write_text(job.job_spec_json, encoding="utf-8")
    script = work_dir / job.script_name
    script.write_text(job.script_text, encoding="utf-8")
    script.chmod(0o755)


@pytest.mark.parametrize("layout", ["generations", "regular files"])
def test_a_build_stopped_before_any_change_is_cleaned_up_by_the_next(
    build_env: BuildEnv, layout: str
) -> None:
    jobs = _jobs(build_env)
    work_dir = build_env.work_dir
    # the stopped and the recovery builds have their own script names; the last
    # one has the start's (a regular file is left alone when no build names it)
    start, stopped, recovery, last = [jobs[3], jobs[0]], jobs[2], jobs[3], jobs[1]
    step = 1
    while True:
        _reset(work_dir, start, layout)
        if not _write_stopped_at(stopped, step):
            break
        _assert_consistent(work_dir, jobs)
        # the next build, itself stopped anywhere, then one more: no leftovers
        recovery_step = 1
        while _write_stopped_at(recovery, recovery_step):
            _assert_consistent(work_dir, jobs)
            last.write()
            assert _shown(work_dir) == (last.job_spec_json, last.script_text)
            _assert_no_leftovers(work_dir, last)
            _reset(work_dir, start, layout)
            _write_stopped_at(stopped, step)
            recovery_step += 1
        assert recovery_step > 1
        step += 1
    assert step > 10  # the build did stop at each of its changes


def test_a_build_failing_after_its_switch_keeps_what_it_published(
    build_env: BuildEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, _, second, third = _jobs(build_env)
    work_dir = build_env.work_dir
    first.write()

    def failing(self: Generation, earlier: str) -> None:
        raise OSError(errno.EIO, "Input/output error", earlier)

    with monkeypatch.context() as patch:
        patch.setattr(Generation, "_retire", failing)
        with pytest.raises(OSError):
            second.write()
    assert _shown(work_dir) == (second.job_spec_json, second.script_text)
    assert (work_dir / ".scriptbuilder" / "lock").read_bytes() == b"1"  # not done
    third.write()  # searches for what the failed build left
    assert _shown(work_dir) == (third.job_spec_json, third.script_text)
    _assert_no_leftovers(work_dir, third)
    assert (work_dir / ".scriptbuilder" / "lock").read_bytes() == b"0"


def test_work_dirs_of_earlier_layouts_are_taken_over(build_env: BuildEnv) -> None:
    first, _, second, third = _jobs(build_env)
    work_dir = build_env.work_dir
    state = work_dir / ".scriptbuilder"
    # one numbered generation folder per build, an empty lock file
    first.write()
    os.rename(state / os.readlink(state / "current"), state / "gen-000007")
    (state / "gen-2").rmdir()
    (state / "gen-000006").mkdir()
    os.symlink("gen-000007", state / ".current.tmp")
    os.replace(state / ".current.tmp", state / "current")
    (state / "lock").write_bytes(b"")
    assert _shown(work_dir) == (first.job_spec_json, first.script_text)
    second.write()
    assert _shown(work_dir) == (second.job_spec_json, second.script_text)
    _assert_no_leftovers(work_dir, second)
    # two folders, the second never made (one build by the first version of them)
    (state / os.readlink(state / "current")).rename(state / "gen-1")
    (state / "gen-2").rmdir()
    os.symlink("gen-1", state / ".current.tmp")
    os.replace(state / ".current.tmp", state / "current")
    (state / "lock").write_bytes(b"")
    third.write()
    assert _shown(work_dir) == (third.job_spec_json, third.script_text)
    _assert_no_leftovers(work_dir, third)
    # what a build of that version left when it was killed (it never wrote the lock file)
    (state / "lock").write_bytes(b"")
    free = state / ("gen-2" if os.readlink(state / "current") == "gen-1" else "gen-1")
    (free / "job_spec.json").write_text(first.job_spec_json, encoding="utf-8")
    (free / first.script_name).write_text(first.script_text, encoding="utf-8")
    os.symlink(f".scriptbuilder/current/{first.script_name}", work_dir / first.script_name)
    gone = os.fork()
    if gone == 0:
        os._exit(0)
    _reap(gone)
    os.symlink(".scriptbuilder/current/job_spec.json", work_dir / f".job_spec.json.{gone}.tmp")
    os.symlink("gen-2", state / f".current.{gone}.tmp")
    second.write()
    assert _shown(work_dir) == (second.job_spec_json, second.script_text)
    _assert_no_leftovers(work_dir, second)


def test_a_perf_build_writes_into_a_free_folder_removed_meanwhile(build_env: BuildEnv) -> None:
    first = _jobs(build_env)[0]
    req = build_env.request(
        "benchmark",
        perf_config_yaml=str(REAL_FILES / "gpt_oss_120b_fp4_blackwell.yaml"),
        perf_test_name="gpt_oss_fp4_tp2_mtp0_1k1k",
        model_name="demo",
    )
    perf = build_env.build(req)
    assert perf.submit is not None
    first.write()
    state = build_env.work_dir / ".scriptbuilder"
    (state / ("gen-2" if os.readlink(state / "current") == "gen-1" else "gen-1")).rmdir()
    perf.write()  # submit.py writes the launch script into the free folder
    assert _shown(build_env.work_dir) == (perf.job_spec_json, _read(perf.script_name, build_env))
    assert sorted(os.listdir(state)) == ["current", "gen-1", "gen-2", "lock"]


def _read(name: str, build_env: BuildEnv) -> str:
    return (build_env.work_dir / name).read_text(encoding="utf-8")
