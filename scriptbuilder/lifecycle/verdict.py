"""One verdict for every scenario and workflow, and its exit code.

Decided from the scheduler state and the exit code first; the logs come second
and only tell apart what a failure was (a time-limit line, a hang, a pytest run
that ran nothing): no log line turns a non-zero exit into a pass. A pytest job's
own records of its tests (:mod:`scriptbuilder.lifecycle.outcomes`), when it wrote
any, say whether tests ran, and the verdict JSON lists them.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from scriptbuilder.lifecycle.logs import LogView, matched, pytest_summary
from scriptbuilder.lifecycle.outcomes import TestRecords, verdict_fields
from scriptbuilder.lifecycle.slurm import JobState
from scriptbuilder.models.job_spec import JobSpec


class Verdict(str, Enum):
    PASSED = "PASSED"
    FAILED = "FAILED"
    NO_TESTS_RAN = "NO_TESTS_RAN"
    TIMEOUT = "TIMEOUT"
    HANG_DETECTED = "HANG_DETECTED"
    CANCELLED = "CANCELLED"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    NODE_FAILURE = "NODE_FAILURE"
    MONITOR_TIMEOUT = "MONITOR_TIMEOUT"

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self]


#: ``status``/``watch`` exit codes; 2 is a usage or input error, NOT_FINISHED is
#: ``status`` of a job still queued or running.
EXIT_CODES = {
    Verdict.PASSED: 0,
    Verdict.FAILED: 1,
    Verdict.NO_TESTS_RAN: 3,
    Verdict.TIMEOUT: 4,
    Verdict.HANG_DETECTED: 5,
    Verdict.CANCELLED: 6,
    Verdict.OUT_OF_MEMORY: 7,
    Verdict.NODE_FAILURE: 8,
    Verdict.MONITOR_TIMEOUT: 9,
}
NOT_FINISHED = 10
PYTEST_NO_TESTS = 5  # pytest's exit code when nothing was collected
_NODE = {"NODE_FAIL", "BOOT_FAIL", "PREEMPTED"}


def decide(
    job: JobState,
    logs: LogView,
    spec: JobSpec,
    ended_by: str | None,
    records: TestRecords | None = None,
) -> Verdict:
    """The verdict of a finished job (``ended_by``: what watch did to it, if anything;
    ``records``: its tests, when it recorded them)."""
    failed = job.state != "COMPLETED" or job.exit_code != 0
    if ended_by == "node_failure" or job.state in _NODE:
        return Verdict.NODE_FAILURE
    if ended_by == "hang" or (failed and logs.hang):
        return Verdict.HANG_DETECTED
    if job.state == "OUT_OF_MEMORY":
        return Verdict.OUT_OF_MEMORY
    if job.state in ("TIMEOUT", "DEADLINE"):
        return Verdict.TIMEOUT
    if job.state == "CANCELLED" or (failed and ended_by == "cancel"):
        return Verdict.CANCELLED  # (a docker or persistent run stopped by cancel)
    if failed:
        if matched(logs.out_tail, spec.timeout_patterns):
            return Verdict.TIMEOUT
        if job.exit_code == PYTEST_NO_TESTS and spec.workflow_type == "pytest":
            return Verdict.NO_TESTS_RAN
        return Verdict.FAILED
    if records is not None and records.sessions:
        return Verdict.PASSED if records.ran_tests else Verdict.NO_TESTS_RAN
    counts = pytest_summary(logs.out_tail)
    if counts is not None and not any(counts.get(k) for k in ("passed", "failed", "errors")):
        return Verdict.NO_TESTS_RAN  # "no tests ran", or every selected test skipped
    return Verdict.PASSED


def report(
    verdict: Verdict | None,
    job_id: str,
    job: JobState,
    logs: LogView,
    spec: JobSpec,
    records: TestRecords | None = None,
) -> dict[str, Any]:
    """The verdict JSON (``verdict`` null while the job is not finished): ``phase``
    (queued, running, ended) beside the scheduler's own ``state``, and
    ``state_source``, what told the state (the scheduler, the run's exit file, or
    the script's closing line once Slurm no longer knew the job)."""
    text = logs.out_tail + "\n" + logs.err_tail
    patterns = {
        "success": matched(text, spec.success_patterns),
        "failure": matched(text, spec.failure_patterns),
        "timeout": matched(text, spec.timeout_patterns),
    }
    patterns["hang"] = ["hang detected"] if logs.hang else []
    bad = verdict not in (None, Verdict.PASSED, Verdict.MONITOR_TIMEOUT)
    return {
        "verdict": verdict.value if verdict else None,
        "exit_code": verdict.exit_code if verdict else NOT_FINISHED,
        "job_id": job_id,
        "phase": job.phase.value,
        "state": job.state,
        "state_source": job.source,
        "reason": job.reason if job.reason not in ("", "None") else None,
        "job_exit_code": job.exit_code,
        "signal": job.signal,
        "elapsed_seconds": job.elapsed,
        "queued_seconds": job.queued,
        "pytest": pytest_summary(logs.out_tail),
        "matched_patterns": patterns,
        "logs": {"out": logs.out_path, "err": logs.err_path},
        "excerpt": logs.excerpt(failed=bad),
        **verdict_fields(records, spec.required_devices),
    }
