"""The lifecycle commands over a campaign folder (one holding campaign.json), and
``scriptbuilder rerun --failed DIR``.

``submit`` submits every job and prints each job's run record; ``status`` and
``watch`` print the campaign's JSON (:meth:`CampaignStatus.report`) and exit with its
code; ``watch`` shows, on a terminal, one live line per running job and a total, else one
line per change; ``cancel`` cancels every job still queued or running; ``results``
prints the merged tests (see :mod:`scriptbuilder.campaign.life`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

from scriptbuilder.api import build
from scriptbuilder.campaign.life import DONE, Campaign, CampaignStatus, JobView
from scriptbuilder.cli.group import write_out
from scriptbuilder.lifecycle.run import DEFAULT_MONITOR_TIMEOUT


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    total = int(seconds)
    return f"{total // 3600}:{total // 60 % 60:02d}:{total % 60:02d}"


def _json(data: Any) -> None:
    write_out(json.dumps(data, ensure_ascii=False) + "\n")


def job_line(job: JobView) -> str:
    """``NAME JOBID STATE H:MM:SS | counts | running test`` (``-> VERDICT`` once ended)."""
    if job.status is None or job.run is None:
        return f"{job.name} not submitted"
    report = job.status.report
    line = f"{job.name} {job.run.job_id} {report.get('state')} {_clock(job.status.job.elapsed)}"
    counts = {k: n for k, n in (report.get("counts") or {}).items() if n}
    if counts:
        line += " | " + ", ".join(f"{n} {k}" for k, n in counts.items())
    if report.get("running"):
        line += f" | {report['running']}"
    if job.verdict is not None:
        line += f" -> {job.verdict.value}"
    return line


def total_line(status: CampaignStatus) -> str:
    """Tests passed/failed/left, jobs queued/running/done, and the time since the first
    submit."""
    counts = status.counts()
    failed = counts["failed"] + counts["error"]
    phases = [job.phase for job in status.jobs]
    retried = len(status.campaign.attempts)
    return (
        f"total: tests {counts['passed']} passed, {failed} failed, {len(status.left())} left"
        f" | jobs {phases.count('queued')} queued, {phases.count('running')} running, "
        f"{phases.count('ended')} done"
        + (f", {retried} added" if retried else "")
        + f" | {_clock(status.elapsed)}"
    )


def progress(live: bool) -> tuple[Callable[[CampaignStatus], None], Callable[[], None]]:
    """watch's on_round callback and what ends its display: on a terminal the running
    jobs' lines and the total, redrawn in place; else each changed line once."""
    drawn = [0]
    shown: dict[str, str] = {}

    def on_round(status: CampaignStatus) -> None:
        if live:
            lines = [job_line(j) for j in status.jobs if j.phase == "running"]
            lines.append(total_line(status))
            up = f"\x1b[{drawn[0]}F" if drawn[0] else "\r"
            write_out(up + "".join(f"\x1b[K{line}\n" for line in lines), err=True)
            drawn[0] = len(lines)
            return
        for job in status.jobs:
            state = f"{job.phase} {job.verdict.value if job.verdict else ''}"
            if shown.get(job.name) != state:
                shown[job.name] = state
                write_out(job_line(job) + "\n", err=True)
        total = total_line(status).rsplit(" | ", 1)[0]
        if shown.get("") != total:
            shown[""] = total
            write_out(total_line(status) + "\n", err=True)

    def done() -> None:
        pass

    return on_round, done


def submit(folder: str, again: bool) -> None:
    jobs = Campaign(folder).submit(again=again)
    records = [j.run.record.model_dump(mode="json") if j.run else {} for j in jobs]
    _json(
        [
            {"name": j.name, "work_dir": j.work_dir, **record}
            for j, record in zip(jobs, records, strict=True)
        ]
    )


def status(folder: str, as_json: bool) -> int:
    looked = Campaign(folder).look()
    if as_json:
        _json(looked.report())
    else:
        write_out("".join(job_line(j) + "\n" for j in looked.jobs) + total_line(looked) + "\n")
    return looked.exit_code


def watch(folder: str, timeout: float | None, interval: float, retries: int) -> int:
    campaign = Campaign(folder, build=build)
    on_round, done = progress(sys.stderr is not None and sys.stderr.isatty())
    try:
        looked = campaign.wait(timeout or DEFAULT_MONITOR_TIMEOUT, interval, retries, on_round)
    finally:
        done()
    report = looked.report()
    _json(report)
    return looked.exit_code


def cancel(folder: str) -> None:
    cancelled = Campaign(folder).cancel()
    write_out(f"cancelled {' '.join(cancelled)}\n" if cancelled else "nothing to cancel\n")


def results(folder: str) -> list[dict[str, Any]]:
    """The merged tests of the campaign, failures first; each planned entry no test has
    an outcome for is listed as ``not_run``."""
    looked = Campaign(folder).look()
    order = {name: i for i, name in enumerate(("failed", "error", "unfinished", *DONE))}
    tests = sorted(looked.tests, key=lambda t: order.get(t["outcome"], len(order)))
    return tests + [
        {"id": left, "outcome": "not_run", "duration_seconds": None, "message": _NOT_RUN}
        for left in looked.left()
        if not any(t["id"] == left for t in tests)
    ]


_NOT_RUN = "no outcome recorded: its job has not run it (yet)"


def rerun(folder: str) -> None:
    campaign = Campaign(folder, build=build)
    job = campaign.rerun(campaign.look())
    record = job.run.record.model_dump(mode="json") if job.run else {}
    _json({"name": job.name, "tests": job.entries, **record})
