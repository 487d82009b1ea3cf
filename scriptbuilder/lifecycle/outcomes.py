"""Per-test outcomes: the records a pytest job writes as its tests run, read back.

The job's pytest loads the plugin shipped with the build
(``scriptbuilder/data/sb_test_records.py``), which appends one JSON line per test
start and per outcome to the file job_spec.json names in ``test_records`` (``%j``
the job id). The file is read in pieces of :data:`PIECE_BYTES`, at most
:data:`MAX_BYTES` in all, and only the last record of each test is kept, so
20,000 tests cost a few MB; a line cut by a kill (no newline yet) is left out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from scriptbuilder.lifecycle.transport import Transport
from scriptbuilder.models.job_spec import JobSpec
from scriptbuilder.resolution.secrets import mask

PIECE_BYTES = 4 * 1024 * 1024
MAX_BYTES = 64 * 1024 * 1024
MESSAGE_CHARS = 500
#: Outcomes, failures first (the order of ``results``).
OUTCOMES = ("failed", "error", "unfinished", "xpassed", "passed", "skipped", "xfailed")
_RAN = ("passed", "xpassed", "failed", "error", "unfinished")
#: TensorRT-LLM's skip reasons for a job with fewer GPUs than the test needs: its
#: ``skip_less_device`` fixture, ``skipif(device_count() < N)`` conditions, "needs 4 GPUs".
UNDER_ALLOCATED = re.compile(
    r"device count \d+ is less than \d+"
    r"|device_count\(\)\s*(?:<|!=)\s*\d+"
    r"|(?:needs?|requires?|required|at least)\s+(?:at least\s+)?\d+\s+(?:gpus?|devices)\b"
    r"|(?:not enough|too few|insufficient)\s+(?:gpus|devices)",
    re.IGNORECASE,
)


@dataclass
class TestResult:
    """One test: the last record seen for its id."""

    id: str
    outcome: str  # one of OUTCOMES, or "running" while a live job is in it
    duration_seconds: float | None = None
    message: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "outcome": self.outcome,
            "duration_seconds": self.duration_seconds,
            "message": self.message,
        }


@dataclass
class TestRecords:
    """What the records say: the tests in the order they first appeared, and whether
    any pytest session started at all (``sessions``)."""

    tests: list[TestResult] = field(default_factory=list)
    sessions: int = 0
    last_started: str | None = None

    def ended(self) -> TestRecords:
        """The records of a job that has ended: a test still running is ``unfinished``."""
        tests = [
            TestResult(t.id, "unfinished", t.duration_seconds, t.message)
            if t.outcome == "running"
            else t
            for t in self.tests
        ]
        return TestRecords(tests, self.sessions, self.last_started)

    @property
    def unfinished(self) -> str | None:
        """The test the job ended in (the last one started, when several were)."""
        left = [t.id for t in self.tests if t.outcome == "unfinished"]
        if not left:
            return None
        return self.last_started if self.last_started in left else left[-1]

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(OUTCOMES, 0)
        for test in self.tests:
            if test.outcome in counts:
                counts[test.outcome] += 1
        return counts

    @property
    def ran_tests(self) -> bool:
        """True when a test passed, failed, errored or was cut short."""
        return any(t.outcome in (*_RAN, "running") for t in self.tests)

    def under_allocated(self) -> list[str]:
        return [
            t.id
            for t in self.tests
            if t.outcome == "skipped" and UNDER_ALLOCATED.search(t.message) is not None
        ]

    def failures_first(self) -> list[TestResult]:
        order = {name: i for i, name in enumerate(OUTCOMES)}
        return sorted(self.tests, key=lambda t: order.get(t.outcome, len(order)))


def _message(text: str, secrets: Sequence[str]) -> str:
    """The first non-blank line of ``text``, secrets masked, at most MESSAGE_CHARS."""
    text = mask(text, tuple(secrets))
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return first[:MESSAGE_CHARS]


class _Reader:
    """Folds records into one result per test id (the dict keeps first appearance);
    with ``since`` (seconds since the epoch), the records of pytest sessions started
    before it (an earlier run writing the same file) are left out."""

    def __init__(self, secrets: Sequence[str], since: float | None = None) -> None:
        self.secrets, self.since = secrets, since
        self.tests: dict[str, TestResult] = {}
        self.sessions = 0
        self.last_started: str | None = None
        self.taken = since is None

    def add(self, line: bytes) -> None:
        try:
            record = json.loads(line)
        except ValueError:  # not a record (a torn or foreign line): skip it
            return
        if not isinstance(record, dict):
            return
        event, test_id = record.get("event"), record.get("id")
        if event == "session":
            started = record.get("time")
            self.taken = self.since is None or (
                isinstance(started, (int, float)) and started >= self.since
            )
            self.sessions += self.taken
        if not isinstance(test_id, str) or not self.taken:
            return
        if event == "start":
            self.tests[test_id] = TestResult(test_id, "running")
            self.last_started = test_id
        elif event == "outcome" and record.get("outcome") in OUTCOMES:
            duration = record.get("duration")
            self.tests[test_id] = TestResult(
                test_id,
                str(record["outcome"]),
                float(duration) if isinstance(duration, (int, float)) else None,
                _message(str(record.get("message") or ""), self.secrets),
            )

    def records(self) -> TestRecords:
        return TestRecords(list(self.tests.values()), self.sessions, self.last_started)


def parse_records(data: bytes, secrets: Sequence[str] = ()) -> TestRecords:
    """The records in ``data``, up to its last whole line."""
    reader = _Reader(secrets)
    for line in data.split(b"\n")[:-1]:
        reader.add(line)
    return reader.records()


def read_records(
    transport: Transport, path: str, secrets: Sequence[str] = (), since: float | None = None
) -> TestRecords | None:
    """The records in ``path`` (None when the job wrote none), read in bounded pieces;
    ``since``: see :class:`_Reader`."""
    reader = _Reader(secrets, since)
    offset, rest = 0, b""
    while offset < MAX_BYTES:
        piece = transport.read_range(path, offset, PIECE_BYTES)
        if piece is None:
            return None if offset == 0 else reader.records()
        lines = (rest + piece).split(b"\n")
        rest = lines.pop()  # no newline yet: the next piece, or a line cut by a kill
        for line in lines:
            reader.add(line)
        offset += len(piece)
        if len(piece) < PIECE_BYTES:
            break
    return reader.records()


def records_path(spec: JobSpec, job_id: str) -> str | None:
    """job_spec.json's ``test_records`` with ``%j`` replaced by the job id."""
    return spec.test_records.replace("%j", job_id) if spec.test_records else None


def verdict_fields(records: TestRecords | None, gpus: Any) -> dict[str, Any]:
    """The verdict JSON's ``tests``, ``counts``, ``unfinished``, ``running`` (the test a
    live job is in), ``under_allocated`` and the job's ``gpus`` (empty when the job
    recorded no tests)."""
    records = records or TestRecords()
    live = [t.id for t in records.tests if t.outcome == "running"]
    return {
        "tests": [t.as_dict() for t in records.tests if t.outcome != "running"],
        "counts": records.counts() if records.sessions or records.tests else {},
        "unfinished": records.unfinished,
        "running": live[-1] if live else None,
        "under_allocated": records.under_allocated(),
        "gpus": gpus if isinstance(gpus, int) else None,
    }
