"""Per-test records: the plugin shipped with a pytest job, run by real pytest on real
test files, and what the reader, ``results`` and the JUnit report make of them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import tracemalloc
import xml.etree.ElementTree as ET
from pathlib import Path

from scriptbuilder.cli.lifecycle import status_line
from scriptbuilder.lifecycle.junit import UNFINISHED, junit_xml
from scriptbuilder.lifecycle.logs import LogView
from scriptbuilder.lifecycle.outcomes import parse_records, read_records
from scriptbuilder.lifecycle.run import Status
from scriptbuilder.lifecycle.slurm import JobState
from scriptbuilder.lifecycle.transport import LocalTransport
from scriptbuilder.lifecycle.verdict import Verdict, decide, report
from scriptbuilder.models.job_spec import JobSpec
from tests.build_env import BuildEnv
from tests.script_runner import FAKE_BIN

PLUGIN_DIR = Path(__file__).resolve().parent.parent / "scriptbuilder" / "data"

#: A test file with every outcome (what tests/test_lifecycle_tests.py runs in a job too).
EVERY_OUTCOME = textwrap.dedent(
    """
    import pytest

    @pytest.fixture
    def broken():
        raise RuntimeError("fixture broke")

    def test_pass():
        pass

    def test_fail():
        assert 1 == 2, "values differ"

    def test_error(broken):
        pass

    def test_skip():
        pytest.skip("not on this machine")

    @pytest.mark.xfail(reason="known bug")
    def test_xfail():
        assert False

    @pytest.mark.xfail(reason="fixed now")
    def test_xpass():
        pass

    def test_needs_gpus():  # as TensorRT-LLM's skip_less_device fixture says it
        pytest.skip("Device count 1 is less than 4")
    """
)
EXPECTED = {
    "test_pass": ("passed", ""),
    "test_fail": ("failed", "AssertionError: values differ"),
    "test_error": ("error", "RuntimeError: fixture broke"),
    "test_skip": ("skipped", "not on this machine"),
    "test_xfail": ("xfailed", "known bug"),
    "test_xpass": ("xpassed", "fixed now"),
    "test_needs_gpus": ("skipped", "Device count 1 is less than 4"),
}


def run_pytest(
    tmp_path: Path, argv: list[str], records: Path, **env: str
) -> subprocess.CompletedProcess[str]:
    environ = {
        **os.environ,
        "PYTHONPATH": str(PLUGIN_DIR),
        "PYTEST_ADDOPTS": "-p sb_test_records",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        "SB_TEST_RECORDS": str(records),
        **env,
    }
    environ.pop("SB_TEST_RECORDS_SESSION", None)
    return subprocess.run(
        argv, cwd=tmp_path, env=environ, capture_output=True, text=True, timeout=120
    )


def outcomes(records: Path) -> dict[str, tuple[str, str]]:
    found = read_records(LocalTransport(), str(records))
    assert found is not None
    return {t.id.split("::")[-1]: (t.outcome, t.message) for t in found.ended().tests}


def test_every_outcome_recorded_with_its_message(tmp_path: Path) -> None:
    (tmp_path / "test_all.py").write_text(EVERY_OUTCOME)
    junit = tmp_path / "own.xml"
    records = tmp_path / "records.jsonl"
    done = run_pytest(
        tmp_path,
        [sys.executable, "-m", "pytest", "test_all.py", f"--junitxml={junit}"],
        records,
    )
    assert done.returncode == 1, done.stdout
    assert outcomes(records) == EXPECTED
    # the user's own report option keeps working
    assert ET.parse(junit).getroot().find("testsuite") is not None
    lines = records.read_text().splitlines()
    assert json.loads(lines[0])["event"] == "session"
    assert json.loads(lines[-1]) == {"event": "end", "exit_status": 1}
    found = parse_records(records.read_bytes())
    assert found.under_allocated() == ["test_all.py::test_needs_gpus"]
    assert found.counts() == {
        "failed": 1,
        "error": 1,
        "unfinished": 0,
        "xpassed": 1,
        "passed": 1,
        "skipped": 2,
        "xfailed": 1,
    }


def test_killed_interpreter_leaves_the_test_unfinished(tmp_path: Path) -> None:
    """A script calling pytest.main, killed inside a test: the pass before it is kept."""
    (tmp_path / "test_kill.py").write_text(
        "import os, signal\n"
        "def test_first():\n    pass\n"
        "def test_killer():\n    os.kill(os.getpid(), signal.SIGKILL)\n"
        "def test_never():\n    pass\n"
    )
    (tmp_path / "run.py").write_text(
        "import sys, pytest\nsys.exit(pytest.main(['test_kill.py']))\n"
    )
    records = tmp_path / "records.jsonl"
    done = run_pytest(tmp_path, [sys.executable, "run.py"], records)
    assert done.returncode == -9
    found = read_records(LocalTransport(), str(records))
    assert found is not None
    ended = found.ended()
    assert [(t.id, t.outcome) for t in ended.tests] == [
        ("test_kill.py::test_first", "passed"),
        ("test_kill.py::test_killer", "unfinished"),
    ]
    assert ended.unfinished == "test_kill.py::test_killer"
    assert found.unfinished is None  # still running, as far as the records tell


def test_pytest_command_nested_sessions_and_collection_errors(tmp_path: Path) -> None:
    """The ``pytest`` command: a pytest started inside a recorded test records nothing
    of its own; a file that does not import is an error of that file."""
    (tmp_path / "inner").mkdir()
    (tmp_path / "inner" / "test_inner.py").write_text("def test_inner():\n    pass\n")
    (tmp_path / "test_outer.py").write_text(
        "import subprocess, sys\n"
        "def test_outer():\n"
        "    subprocess.run([sys.executable, '-m', 'pytest', 'inner'], check=True)\n"
    )
    (tmp_path / "test_broken.py").write_text("import no_such_module\n")
    records = tmp_path / "records.jsonl"
    pytest_bin = str(Path(sys.executable).with_name("pytest"))
    done = run_pytest(tmp_path, [pytest_bin, "test_outer.py", "test_broken.py"], records)
    assert done.returncode == 2, done.stdout  # interrupted by the collection error
    assert outcomes(records) == {
        "test_broken.py": ("error", "ModuleNotFoundError: No module named 'no_such_module'")
    }
    done = run_pytest(tmp_path, [pytest_bin, "test_outer.py"], records)
    assert done.returncode == 0, done.stdout
    assert outcomes(records)["test_outer"] == ("passed", "")
    assert "test_inner" not in outcomes(records)


def test_without_the_variable_nothing_is_recorded(tmp_path: Path) -> None:
    (tmp_path / "test_one.py").write_text("def test_one():\n    pass\n")
    argv = [sys.executable, "-m", "pytest", "test_one.py"]
    done = run_pytest(tmp_path, argv, tmp_path / "x", SB_TEST_RECORDS="")
    assert done.returncode == 0 and not (tmp_path / "x").exists()


def test_cut_line_and_masked_long_messages() -> None:
    records = [
        {"event": "session", "pid": 1},
        {"event": "start", "id": "t.py::a"},
        {"event": "outcome", "id": "t.py::a", "outcome": "failed", "duration": 1.5,
         "message": "token hunter2 leaked " + "x" * 900 + "\nsecond line"},
        {"event": "start", "id": "t.py::b"},
    ]  # fmt: skip
    data = b"".join(json.dumps(r).encode() + b"\n" for r in records)
    cut = data + b'{"event": "outcome", "id": "t.py::b", "outc'
    found = parse_records(cut, secrets=["hunter2"])
    (a, b) = found.ended().tests
    assert a.outcome == "failed" and a.duration_seconds == 1.5
    assert a.message.startswith("token *** leaked x") and len(a.message) == 500
    assert "\n" not in a.message
    assert (b.id, b.outcome) == ("t.py::b", "unfinished")


def test_twenty_thousand_records_read_in_bounded_time_and_memory(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    with path.open("w") as f:
        f.write(json.dumps({"event": "session", "pid": 1}) + "\n")
        for i in range(20_000):
            test_id = f"tests/integration/defs/test_e2e.py::test_case[param-{i}]"
            f.write(json.dumps({"event": "start", "id": test_id, "time": 1.0}) + "\n")
            outcome = "failed" if i % 100 == 0 else "passed"
            message = "AssertionError: " + "m" * 200 if outcome == "failed" else ""
            f.write(
                json.dumps(
                    {"event": "outcome", "id": test_id, "outcome": outcome, "duration": 0.5,
                     "message": message}
                ) + "\n"
            )  # fmt: skip
    started = time.monotonic()
    found = read_records(LocalTransport(), str(path))
    assert found is not None
    xml = junit_xml(found.failures_first())
    assert time.monotonic() - started < 5
    tracemalloc.start()  # (slows the run down: timed above, measured here)
    read_records(LocalTransport(), str(path))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 40 * 1024 * 1024, peak
    assert found.counts()["passed"] == 19_800 and found.counts()["failed"] == 200
    assert len(ET.fromstring(xml).find("testsuite")) == 20_000  # type: ignore[arg-type]


def test_junit_report_parsed_back(tmp_path: Path) -> None:
    (tmp_path / "test_all.py").write_text(EVERY_OUTCOME)
    records = tmp_path / "records.jsonl"
    run_pytest(tmp_path, [sys.executable, "-m", "pytest", "test_all.py"], records)
    with records.open("a") as f:  # a test the job ended in
        f.write(json.dumps({"event": "start", "id": "test_all.py::test_last"}) + "\n")
    found = read_records(LocalTransport(), str(records))
    assert found is not None
    suite = ET.fromstring(junit_xml(found.ended().tests)).find("testsuite")
    assert suite is not None
    attrs = {k: suite.get(k) for k in ("tests", "failures", "errors", "skipped")}
    assert attrs == {"tests": "8", "failures": "1", "errors": "2", "skipped": "3"}
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert {c.get("classname") for c in cases.values()} == {"test_all"}

    def child(name: str) -> tuple[str, str | None] | None:
        kids = list(cases[name])
        return (kids[0].tag, kids[0].get("message")) if kids else None

    assert child("test_pass") is None and child("test_xpass") is None
    assert child("test_fail") == ("failure", "AssertionError: values differ")
    assert child("test_error") == ("error", "RuntimeError: fixture broke")
    assert child("test_skip") == ("skipped", "not on this machine")
    assert child("test_xfail") == ("skipped", "xfail: known bug")
    assert child("test_last") == ("error", UNFINISHED)


def _records(*lines: dict[str, object]) -> bytes:
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def test_verdict_from_records_and_the_live_line() -> None:
    """A successful job whose records show only skips ran no tests, whatever its
    log says; while it runs, the live line shows the counts and the running test."""
    session = {"event": "session", "pid": 1, "time": 10.0}
    skipped = _records(
        session,
        {"event": "start", "id": "t.py::a"},
        {"event": "outcome", "id": "t.py::a", "outcome": "skipped", "message": "needs 8 GPUs"},
    )
    passed = _records(session, {"event": "outcome", "id": "t.py::b", "outcome": "passed"})
    logs = LogView("x.out", "x.err", out_tail="==== 3 passed in 1.0s ====\n")
    done = JobState("COMPLETED", "", 0, 0)
    spec = JobSpec.model_construct(
        workflow_type="pytest",
        required_devices=2,
        success_patterns=[],
        failure_patterns=[],
        timeout_patterns=[],
    )
    assert decide(done, logs, spec, None, parse_records(skipped)) is Verdict.NO_TESTS_RAN
    assert decide(done, logs, spec, None, parse_records(passed)) is Verdict.PASSED
    assert decide(done, logs, spec, None, None) is Verdict.PASSED  # no records: the log
    data = report(Verdict.NO_TESTS_RAN, "7", done, logs, spec, parse_records(skipped))
    assert data["under_allocated"] == ["t.py::a"] and data["gpus"] == 2
    assert data["tests"] == [
        {"id": "t.py::a", "outcome": "skipped", "duration_seconds": None, "message": "needs 8 GPUs"}
    ]
    running = parse_records(skipped + _records({"event": "start", "id": "t.py::c[x]"}))
    live = JobState("RUNNING", "", None, None, 65.0)
    view = report(None, "7", live, logs, spec, running)
    assert view["running"] == "t.py::c[x]" and view["unfinished"] is None
    line = status_line("7", Status(live, logs, None, view, running))
    assert line == "job 7 RUNNING 0:01:05 | 1 skipped | t.py::c[x]"


def test_an_earlier_run_in_the_same_file_is_left_out(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    path.write_bytes(
        _records(
            {"event": "session", "pid": 1, "time": 100.0},
            {"event": "outcome", "id": "t.py::old", "outcome": "failed"},
            {"event": "session", "pid": 2, "time": 200.0},
            {"event": "outcome", "id": "t.py::new", "outcome": "passed"},
        )
    )
    found = read_records(LocalTransport(), str(path), since=150.0)
    assert found is not None and [t.id for t in found.tests] == ["t.py::new"]
    assert found.sessions == 1
    assert read_records(LocalTransport(), str(tmp_path / "none.jsonl")) is None


def real_pytest_bin(folder: Path) -> Path:
    """A folder whose ``pytest`` and ``python`` run this interpreter (which has pytest),
    to put first on a job's PATH (before the stand-ins)."""
    folder.mkdir()
    for name, run in (("pytest", "-m pytest"), ("python", "")):
        (folder / name).write_text(f'#!/bin/sh\nexec {sys.executable} {run} "$@"\n')
        (folder / name).chmod(0o755)
    return folder


def test_local_docker_job_records_its_tests(build_env: BuildEnv, tmp_path: Path) -> None:
    """Through the docker stand-in, real pytest in the container records every
    outcome; a second run of the same build reports its own tests only."""
    defs = build_env.repo / "tests/integration/defs"
    (defs / "test_sb_outcomes.py").write_text(EVERY_OUTCOME)
    request = build_env.request(
        "pytest",
        execution_scenario="local_docker",
        test_cmd=f"cd {defs} && pytest -v test_sb_outcomes.py",
        skip_install=True,
        required_devices=1,
    )
    build_env.build(request).write()
    work_dir = build_env.work_dir
    shim = real_pytest_bin(tmp_path / "bin")
    env = {
        **os.environ,
        "PATH": f"{shim}{os.pathsep}{FAKE_BIN}{os.pathsep}{os.environ['PATH']}",
        "FAKE_DOCKER_STATE": str(tmp_path / "docker-state"),
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    }
    env.pop("SB_TEST_RECORDS_SESSION", None)
    env.pop("PYTEST_ADDOPTS", None)

    def sb(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "scriptbuilder", *args]
        return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)

    for again in ((), ("--again",)):
        assert sb("submit", str(work_dir), *again).returncode == 0
        done = sb("watch", str(work_dir), "--interval", "0.2s")
        verdict = json.loads(done.stdout)
        assert verdict["verdict"] == "FAILED" and done.returncode == 1, done.stderr
        found = {t["id"].split("::")[-1]: (t["outcome"], t["message"]) for t in verdict["tests"]}
        assert found == EXPECTED, verdict
        assert verdict["counts"]["passed"] == 1  # the first run's records are not counted
    listed = sb("results", str(work_dir), "--json")
    assert listed.returncode == 0 and len(json.loads(listed.stdout)) == 7
    assert (work_dir / "sb_test_records.py").is_file()
