"""work_dir holds plain files, and job_spec.json tells whether the script (and every
extra file) beside it came from the same build: its sha256 fields match them, or
show the mismatch. Builds are ``scriptbuilder build`` runs in forked children,
killed with SIGKILL at random moments (fixed seed) or run twenty at once.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import signal
import stat
import time
from pathlib import Path
from typing import Any

import pytest

from scriptbuilder.cli.build import main
from scriptbuilder.errors import BuildError
from tests.build_env import REAL_FILES, BuildEnv

IMAGES = [f"nvcr.io#nvidia/tensorrt-llm:1.{i}" for i in range(4)]
#: A build's files as written: path -> bytes (job_spec.json included).
Files = dict[str, bytes]


def _requests(build_env: BuildEnv) -> list[Path]:
    """Request files into one work_dir: two pytest jobs sharing a script name, two
    remote custom jobs sharing a script and a run script copy (an extra file). Each
    names the connection fields, which a build otherwise takes from the earlier
    job_spec.json."""
    connection = {"ssh_host": "login", "slurm_user": "alice", "remote_cwd": "/home/alice/work"}
    requests = [
        build_env.request("pytest", container_image=image, **connection) for image in IMAGES[:2]
    ]
    requests += [
        build_env.request(
            "custom", execution_scenario="remote_slurm", container_image=image, **connection
        )
        for image in IMAGES[2:]
    ]
    paths = []
    for i, request in enumerate(requests):
        path = build_env.root / f"request-{i}.json"
        path.write_text(json.dumps(request))
        paths.append(path)
    return paths


def _run(request: Path) -> None:
    """``scriptbuilder build REQUEST`` in this (forked) process; exits it when done."""
    try:
        main(["build", str(request)])
    except SystemExit as exc:
        if exc.code:
            os._exit(int(exc.code))


def _fork(requests: list[Path], *, loop: bool, start: int | None = None) -> int:
    pid = os.fork()
    if pid == 0:  # the child: builds, then leaves without running any test teardown
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            if start is not None:
                os.read(start, 1)
            while True:
                for request in requests:
                    _run(request)
                if not loop:
                    break
        finally:
            os._exit(0)
    return pid


def _reap(pid: int) -> int:
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def _built(work_dir: Path, names: set[str]) -> Files:
    """The files a build wrote (job_spec.json and the files it names)."""
    spec = json.loads((work_dir / "job_spec.json").read_bytes())
    paths = [spec["script_path"], *spec["extra_files"], str(work_dir / "job_spec.json")]
    names.update(Path(p).name for p in paths)
    return {path: Path(path).read_bytes() for path in paths}


def _references(requests: list[Path], work_dir: Path, names: set[str]) -> list[Files]:
    """What each request writes, from one finished build of each."""
    references = []
    for request in requests:
        assert _reap(_fork([request], loop=False)) == 0
        references.append(_built(work_dir, names))
    return references


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _check(work_dir: Path, references: list[Files], names: set[str]) -> bool:
    """Asserts what a reader may see at any moment; True when job_spec.json and the
    files it names are one build's pair (every sha256 matches)."""
    for entry in os.listdir(work_dir):
        if not entry.endswith(".tmp"):  # temporary files of a build under way
            assert stat.S_ISREG(os.lstat(work_dir / entry).st_mode), entry
    spec_path = str(work_dir / "job_spec.json")
    spec_bytes = Path(spec_path).read_bytes()
    (own,) = [ref for ref in references if ref[spec_path] == spec_bytes]  # a whole file
    spec = json.loads(spec_bytes)
    named = {spec["script_path"]: spec["script_sha256"], **spec["extra_files_sha256"]}
    assert set(named) == set(own) - {spec_path}
    matching = True
    for path, digest in named.items():
        data = Path(path).read_bytes()
        assert data in [ref[path] for ref in references if path in ref]  # whole too
        if _sha256(data) == digest:
            assert data == own[path]  # a matching hash: the same build's file
        else:
            matching = False
    return matching


def _finished(work_dir: Path, references: list[Files], names: set[str]) -> None:
    """After a finished build: its pair, plain files only, nothing left over but
    the empty lock file."""
    assert _check(work_dir, references, names)
    extra = set(os.listdir(work_dir)) - names - {"slurm_env.json"}
    assert len(extra) == 1 and os.path.getsize(work_dir / extra.pop()) == 0, extra


def test_a_build_killed_at_any_moment_leaves_a_pair_or_a_visible_mismatch(
    build_env: BuildEnv,
) -> None:
    requests, work_dir, names = _requests(build_env), build_env.work_dir, set[str]()
    start = time.perf_counter()
    references = _references(requests, work_dir, names)
    one_build = (time.perf_counter() - start) / len(requests)
    rng = random.Random(1414)
    for _ in range(40):
        pid = _fork(rng.sample(requests, len(requests)), loop=True)
        time.sleep(rng.uniform(0, 2 * one_build))
        os.kill(pid, signal.SIGKILL)
        assert _reap(pid) == -signal.SIGKILL
        _check(work_dir, references, names)
    assert _reap(_fork(requests[:1], loop=False)) == 0  # removes what the killed ones left
    assert _built(work_dir, names) == references[0]
    _finished(work_dir, references, names)


def test_twenty_builds_at_once_follow_one_another(build_env: BuildEnv) -> None:
    requests, work_dir, names = _requests(build_env), build_env.work_dir, set[str]()
    references = _references(requests, work_dir, names)
    start, go = os.pipe()
    pids = [_fork([requests[i % len(requests)]], loop=False, start=start) for i in range(20)]
    os.write(go, b"x" * len(pids))
    seen, codes = 0, dict[int, int]()
    while len(codes) < len(pids):  # read work_dir while the builds run
        with contextlib.suppress(FileNotFoundError):  # a file renamed while read
            _check(work_dir, references, names)
            seen += 1
        for pid in set(pids) - set(codes):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                codes[pid] = os.waitstatus_to_exitcode(status)
    assert list(codes.values()) == [0] * len(pids)
    assert seen > 0
    _finished(work_dir, references, names)


def test_a_failed_perf_build_changes_nothing(
    build_env: BuildEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    work_dir = build_env.work_dir
    request: dict[str, Any] = build_env.request(
        "benchmark",
        perf_config_yaml=str(REAL_FILES / "gpt_oss_120b_fp4_blackwell.yaml"),
        perf_test_name="gpt_oss_fp4_tp2_mtp0_1k1k",
        model_name="demo",
    )
    job = build_env.build(request)
    job.write()
    spec = json.loads((work_dir / "job_spec.json").read_text())
    launch = (work_dir / "slurm_launch.sh").read_bytes()
    assert spec["script_sha256"] == _sha256(launch)  # written by submit.py
    before = {name: (work_dir / name).read_bytes() for name in ("job_spec.json", "slurm_launch.sh")}
    monkeypatch.setenv("SUBMIT_STANDIN_FAIL", "1")
    other = build_env.build({**request, "container_image": IMAGES[0]})
    with pytest.raises(BuildError, match=r"submit\.py failed"):
        other.write()
    assert {name: (work_dir / name).read_bytes() for name in before} == before
    assert [e for e in os.listdir(work_dir) if e.endswith(".tmp")] == []
