"""A pytest plugin that travels with a scriptbuilder job and records its tests as they run.

Loaded with ``-p sb_test_records`` (``PYTEST_ADDOPTS``, with this file's folder on
``PYTHONPATH``), it appends one JSON line per event to the file named by
``SB_TEST_RECORDS``, written by one ``write`` and synced at once, so the records
outlive a crash, a kill at the time limit, a cancel or a lost node:

- ``{"event": "session", "pid": ..., "time": ...}`` when pytest starts;
- ``{"event": "start", "id": NODEID, "time": ...}`` when a test starts;
- ``{"event": "outcome", "id": NODEID, "outcome": ..., "duration": ..., "message": ...}``
  when its outcome is known (``passed``, ``failed``, ``error``, ``skipped``, ``xfailed``,
  ``xpassed``; a collection error is an ``error`` of the file or folder);
- ``{"event": "end", "exit_status": ...}`` when pytest ends.

A test with a start and no outcome was running when the job ended. Without
``SB_TEST_RECORDS``, in an xdist worker (its controller records) and in a pytest
started by a recorded one (its tests are that test's business), it records nothing.
It needs only the standard library and runs on any Python pytest supports.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from typing import Any

RECORDS_VAR = "SB_TEST_RECORDS"
_SESSION_VAR = "SB_TEST_RECORDS_SESSION"
MESSAGE_CHARS = 500


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:MESSAGE_CHARS]
    return ""


def _failure_message(longrepr: Any) -> str:
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None and getattr(crash, "message", None):
        return _first_line(str(crash.message))
    text = str(longrepr)
    for line in text.splitlines():
        if line.startswith("E "):
            return _first_line(line[2:])
    lines = [line for line in text.splitlines() if line.strip()]
    return _first_line(lines[-1]) if lines else ""


def _skip_reason(longrepr: Any) -> str:
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        reason = str(longrepr[2])
        return _first_line(reason[len("Skipped: ") :] if reason.startswith("Skipped: ") else reason)
    return _failure_message(longrepr)


def _xfail_reason(report: Any) -> str:
    reason = str(getattr(report, "wasxfail", "") or "")
    return _first_line(reason[len("reason: ") :] if reason.startswith("reason: ") else reason)


def outcome_of(report: Any) -> tuple[str, str] | None:
    """The outcome and message a setup or call report decides (None: not decided yet)."""
    xfail = hasattr(report, "wasxfail")
    if report.when == "setup":
        if report.failed:
            return "error", _failure_message(report.longrepr)
        if report.skipped:
            if xfail:
                return "xfailed", _xfail_reason(report)
            return "skipped", _skip_reason(report.longrepr)
        return None
    if report.passed:
        return ("xpassed", _xfail_reason(report)) if xfail else ("passed", "")
    if report.failed:
        return "failed", _failure_message(report.longrepr)
    if xfail:
        return "xfailed", _xfail_reason(report)
    return "skipped", _skip_reason(report.longrepr)


class Recorder:
    """Writes the records of one pytest session to an open file."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.durations: dict[str, float] = {}
        self.outcomes: dict[str, str] = {}

    def write(self, record: dict[str, Any]) -> None:
        os.write(self.fd, (json.dumps(record, ensure_ascii=False) + "\n").encode())
        with contextlib.suppress(OSError):  # a file system that cannot sync keeps it anyway
            os.fsync(self.fd)

    def pytest_sessionstart(self) -> None:
        self.write({"event": "session", "pid": os.getpid(), "time": time.time()})

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.write({"event": "start", "id": nodeid, "time": time.time()})

    def _outcome(self, nodeid: str, outcome: str, message: str) -> None:
        self.outcomes[nodeid] = outcome
        duration = round(self.durations.get(nodeid, 0.0), 6)
        self.write(
            {
                "event": "outcome",
                "id": nodeid,
                "outcome": outcome,
                "duration": duration,
                "message": message,
            }
        )

    def pytest_runtest_logreport(self, report: Any) -> None:
        if report.outcome == "rerun":  # pytest-rerunfailures: the test runs again
            return
        nodeid = report.nodeid
        self.durations[nodeid] = self.durations.get(nodeid, 0.0) + (report.duration or 0.0)
        if report.when == "teardown":
            if report.failed and self.outcomes.get(nodeid) not in ("failed", "error"):
                self._outcome(nodeid, "error", _failure_message(report.longrepr))
            return
        decided = outcome_of(report)
        if decided is not None:
            self._outcome(nodeid, *decided)

    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:
            self._outcome(report.nodeid or ".", "error", _failure_message(report.longrepr))

    def pytest_sessionfinish(self, exitstatus: Any) -> None:
        self.write({"event": "end", "exit_status": int(exitstatus)})

    def close(self) -> None:
        os.close(self.fd)


def pytest_configure(config: Any) -> None:
    path = os.environ.get(RECORDS_VAR)
    if not path or hasattr(config, "workerinput") or os.environ.get(_SESSION_VAR):
        return
    try:
        recorder = Recorder(path)
    except OSError as exc:
        print(f"sb_test_records: cannot write {path} ({exc.strerror}): tests not recorded")
        return
    os.environ[_SESSION_VAR] = str(os.getpid())
    config.pluginmanager.register(recorder, "sb_test_records_recorder")
    config._sb_test_records = recorder


def pytest_unconfigure(config: Any) -> None:
    recorder = getattr(config, "_sb_test_records", None)
    if recorder is not None:
        config.pluginmanager.unregister(recorder)
        recorder.close()
        os.environ.pop(_SESSION_VAR, None)
