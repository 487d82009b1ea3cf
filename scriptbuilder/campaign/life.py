"""A campaign's life after the build: its jobs submitted, looked at together, and their
tests merged into one report.

A campaign folder holds ``campaign.json``; each of its jobs is an ordinary work_dir (a
run.json once submitted). :meth:`Campaign.look` is one round: the jobs whose end is
not recorded yet are looked at with one question to their backend
(:meth:`Backend.look_many`: one ``squeue`` and at most one ``sacct`` for Slurm), then
each job's verdict report is made as for one job. :class:`CampaignStatus` merges the
jobs' reports: each test once (the last attempt's outcome, every outcome kept in
``outcomes`` when it ran more than once), the counts, the tests planned with no outcome
yet (``left``), and the exit code: 0 when every job ended and no test failed or
errored, 1 when a test failed or errored, else the highest code of a job's verdict
(10 while a job has not ended).

A job (or an attempt) that ended by the infrastructure (:func:`infrastructure`) may be
replaced by a retry (:meth:`Campaign.retry`), a new work_dir running only its entries
that have no outcome; ``rerun`` (:meth:`Campaign.rerun`) submits one job of the failed
and unfinished tests. Both are recorded in campaign.json (``attempts``).
"""

from __future__ import annotations

import contextlib
import json
import os
import posixpath
import shlex
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from scriptbuilder.campaign.build import CAMPAIGN_JSON, later_job_request
from scriptbuilder.errors import BuildError
from scriptbuilder.lifecycle.backends import BACKENDS
from scriptbuilder.lifecycle.errors import LifecycleError
from scriptbuilder.lifecycle.outcomes import OUTCOMES
from scriptbuilder.lifecycle.record import RUN_FILE
from scriptbuilder.lifecycle.run import Run, Status, open_run, submit
from scriptbuilder.lifecycle.slurm import JobState, nodes_to_exclude
from scriptbuilder.lifecycle.verdict import NOT_FINISHED, Verdict
from scriptbuilder.models.campaign import Attempt, CampaignEntry, CampaignFile
from scriptbuilder.models.messages import validated
from scriptbuilder.models.request import BuildRequest
from scriptbuilder.outputs.atomic import locked, write_atomic
from scriptbuilder.outputs.built_job import BuiltJob

#: sbatch options every campaign job is submitted with: Slurm does not requeue it (the
#: campaign replaces a job the infrastructure lost by one running only what is left).
CAMPAIGN_SBATCH = ("--no-requeue",)
#: Outcomes that failed (exit code 1 of the campaign).
FAILED = ("failed", "error")
#: Outcomes after which a test is not run again by a retry.
DONE = ("failed", "error", "xpassed", "passed", "skipped", "xfailed")
Clock = Callable[[], datetime]


def is_campaign(folder: str | os.PathLike[str]) -> bool:
    """Whether ``folder`` is a campaign folder (it holds campaign.json)."""
    return os.path.isfile(os.path.join(folder, CAMPAIGN_JSON))


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


def belongs(test_id: str, entry_id: str) -> bool:
    """Whether the recorded test ``test_id`` was selected by the entry ``entry_id`` (the
    same id, or a test below its file, class or parametrised name)."""
    if test_id == entry_id:
        return True
    return test_id.startswith(entry_id) and test_id[len(entry_id)] in ":[/"


@dataclass
class JobView:
    """One job of the campaign (a planned job, or a retry or rerun) and its run."""

    name: str
    work_dir: str
    entries: list[str]
    of: str | None = None  # the planned job it retries; "rerun" for a rerun
    run: Run | None = None
    status: Status | None = None

    @property
    def phase(self) -> str:
        if self.status is None:
            return "not submitted"
        return str(self.status.report.get("phase") or self.status.job.phase.value)

    @property
    def verdict(self) -> Verdict | None:
        return None if self.status is None else self.status.verdict

    def summary(self) -> dict[str, Any]:
        report = self.status.report if self.status is not None else {}
        return {
            "name": self.name,
            "work_dir": self.work_dir,
            "job_id": self.run.job_id if self.run is not None else None,
            "of": self.of,
            "phase": self.phase,
            "state": report.get("state"),
            "verdict": report.get("verdict"),
            "exit_code": report.get("exit_code"),
            "elapsed_seconds": report.get("elapsed_seconds"),
            "counts": report.get("counts") or {},
        }


@dataclass
class CampaignStatus:
    """One round over every job: their states and the tests merged (module text)."""

    jobs: list[JobView]
    campaign: CampaignFile
    elapsed: float | None = None
    tests: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.tests = merge_tests(self.jobs)

    @property
    def finals(self) -> list[JobView]:
        """The last attempt of each planned job, and each rerun."""
        last: dict[str, JobView] = {}
        for job in self.jobs:
            last[job.of if job.of not in (None, "rerun") else job.name] = job
        return list(last.values())

    @property
    def ended(self) -> bool:
        return all(job.verdict is not None for job in self.jobs)

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(OUTCOMES, 0)
        for test in self.tests:
            if test["outcome"] in counts:
                counts[test["outcome"]] += 1
        return counts

    def left(self) -> list[str]:
        """Planned entries that no test of has an outcome yet."""
        done = [t["id"] for t in self.tests if t["outcome"] in DONE]
        return [
            e.test_id
            for job in self.campaign.jobs
            for e in job.entries
            if not any(belongs(test, e.test_id) for test in done)
        ]

    @property
    def exit_code(self) -> int:
        if any(t["outcome"] in FAILED for t in self.tests):
            return 1
        if not self.ended:
            return NOT_FINISHED
        return max((job.verdict.exit_code for job in self.finals if job.verdict), default=0)

    def report(self) -> dict[str, Any]:
        """The campaign's JSON: each job's verdict, the merged tests and counts, the
        retries and reruns made, and the exit code."""
        phases = [job.phase for job in self.jobs]
        return {
            "campaign": self.campaign.work_dir,
            "exit_code": self.exit_code,
            "ended": self.ended,
            "jobs": [job.summary() for job in self.jobs],
            "job_phases": {p: phases.count(p) for p in dict.fromkeys(phases)},
            "counts": self.counts(),
            "tests": self.tests,
            "left": self.left(),
            "running": [
                job.status.report["running"]
                for job in self.jobs
                if job.status is not None and job.status.report.get("running")
            ],
            "under_allocated": [
                test
                for job in self.jobs
                if job.status is not None
                for test in job.status.report.get("under_allocated") or []
            ],
            "attempts": [a.model_dump(mode="json") for a in self.campaign.attempts],
            "elapsed_seconds": self.elapsed,
        }


def merge_tests(jobs: Iterable[JobView]) -> list[dict[str, Any]]:
    """Each recorded test once, in the order first seen: its last outcome, with every
    outcome in order under ``outcomes`` when it ran in more than one job, and ``flaky``
    when it failed and later passed."""
    merged: dict[str, dict[str, Any]] = {}
    for job in jobs:
        tests = job.status.report.get("tests") if job.status is not None else None
        for test in tests or []:
            if not isinstance(test, Mapping) or not isinstance(test.get("id"), str):
                continue
            earlier = merged.get(test["id"])
            outcomes = [*(earlier["outcomes"] if earlier else []), str(test.get("outcome"))]
            merged[test["id"]] = {**test, "job": job.name, "outcomes": outcomes}
    for test in merged.values():
        seen = test["outcomes"]
        test["flaky"] = test["outcome"] == "passed" and any(o in FAILED for o in seen)
        if len(seen) == 1:
            del test["outcomes"]
    return list(merged.values())


class Campaign:
    """A campaign folder (see the module text)."""

    def __init__(
        self,
        folder: str | os.PathLike[str],
        clock: Clock | None = None,
        build: Callable[[Mapping[str, Any]], BuiltJob] | None = None,
    ) -> None:
        """``build``: how a retry's or rerun's job is built (``scriptbuilder.api.build``)."""
        self.folder = Path(folder).absolute()
        self.clock = clock or _utc_now
        self.build = build
        self.file = self._read()

    @property
    def path(self) -> Path:
        return self.folder / CAMPAIGN_JSON

    def _read(self) -> CampaignFile:
        try:
            return CampaignFile.model_validate_json(self.path.read_bytes())
        except OSError as exc:
            raise LifecycleError(f"{self.path}: {exc.strerror}") from None
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "campaign"
            raise LifecycleError(
                f"{self.path} is not a campaign.json ({where}: {first['msg']}): build the "
                "campaign again"
            ) from None

    def _write(self, campaign: CampaignFile) -> None:
        write_atomic(self.path, campaign.model_dump_json(indent=2) + "\n")
        self.file = campaign

    def jobs(self) -> list[JobView]:
        """Every job: the planned ones in order, each followed by its retries, then the
        reruns; each with its run once submitted."""
        views: list[JobView] = []
        for job in self.file.jobs:
            views.append(JobView(job.name, job.work_dir, [e.selector for e in job.entries]))
            views += [
                JobView(a.name, a.work_dir, a.tests, a.of)
                for a in self.file.attempts
                if a.of == job.name
            ]
        views += [
            JobView(a.name, a.work_dir, a.tests, a.of)
            for a in self.file.attempts
            if a.of == "rerun"
        ]
        for view in views:
            if os.path.isfile(os.path.join(view.work_dir, RUN_FILE)):
                view.run = open_run(view.work_dir, clock=self.clock)
        return views

    def submit(self, *, again: bool = False) -> list[JobView]:
        """Submit every planned job (each as ``scriptbuilder submit`` does, with
        :data:`CAMPAIGN_SBATCH`); the jobs, with their runs."""
        views = self.jobs()
        for view in views:
            if view.of is None:
                view.run = submit(view.work_dir, again=again, clock=self.clock, options=_opts())
        return views

    def cancel(self) -> list[str]:
        """Cancel every job whose end is not recorded; the job ids cancelled."""
        cancelled = []
        for view in self.jobs():
            if view.run is None:
                continue
            status = view.run.status()
            if status.verdict is None:
                view.run.cancel()
                cancelled.append(view.run.job_id)
        return cancelled

    def look(self, views: list[JobView] | None = None) -> CampaignStatus:
        """One round (see the module text)."""
        views = views if views is not None else self.jobs()
        live = [v.run for v in views if v.run is not None and v.run.record.report is None]
        looked: dict[str, JobState] = {}
        groups: dict[tuple[str, str], list[Run]] = {}
        for run in live:
            settings = json.dumps(run.record.transport, sort_keys=True)
            groups.setdefault((run.record.kind, settings), []).append(run)
        now = self.clock()
        for (kind, _), runs in groups.items():
            records = [run.record for run in runs]
            looked |= BACKENDS[kind].look_many(records, runs[0].transport, now)  # type: ignore[index]
        for view in views:
            if view.run is not None:
                view.status = view.run.status(looked.get(view.run.job_id))
        submitted = [v.run.record.submitted_at for v in views if v.run is not None]
        elapsed = (now - min(submitted)).total_seconds() if submitted else None
        return CampaignStatus(views, self.file, elapsed)

    # ----- retries and reruns -------------------------------------------------------------

    def _add(
        self, name: str, of: str, reason: str, tests: Sequence[str], gpus: int, exclude: list[str]
    ) -> JobView:
        """Build the job of ``tests`` into ``<folder>/<name>``, record it in campaign.json
        and submit it."""
        if self.file.request is None:
            raise LifecycleError(
                f"{self.path} holds no request (built by an earlier version): build the "
                "campaign again to retry or rerun its tests"
            )
        work_dir = posixpath.join(str(self.folder), name)
        if self.build is None:
            raise LifecycleError(f"{name}: no builder given to build the job with")
        try:
            req = validated(BuildRequest, self.file.request, "campaign.json request", "build again")
            self.build(later_job_request(req, list(tests), gpus, name)).write()
        except BuildError as exc:
            raise LifecycleError(f"{name}: {exc}") from None
        attempt = Attempt(
            name=name,
            work_dir=work_dir,
            of=of,
            reason=reason,
            tests=list(tests),
            gpus=gpus,
            exclude=exclude,
        )
        with locked(self.folder):
            current = self._read()
            self._write(current.model_copy(update={"attempts": [*current.attempts, attempt]}))
        options = _opts(exclude)
        run = submit(work_dir, clock=self.clock, options=options)
        return JobView(name, work_dir, list(tests), of, run)

    def retry(self, status: CampaignStatus, retries: int) -> list[JobView]:
        """A fresh job for each planned job whose last attempt the infrastructure ended
        (:func:`infrastructure`) and that has entries without an outcome, at most
        ``retries`` per planned job; the jobs submitted."""
        added = []
        for last in status.finals:
            name = last.of if last.of not in (None, "rerun") else last.name
            planned = next((j for j in self.file.jobs if j.name == name), None)
            if planned is None or last.status is None or last.run is None:
                continue
            if not infrastructure(last.status):
                continue
            made = sum(a.of == name for a in self.file.attempts)
            mine = [t for t in status.tests if t["job"] == name or t["job"].startswith(name + "-")]
            left = entries_left(planned.entries, mine)
            if made >= retries or not left:
                continue
            exclude = []
            if last.run.record.kind == "sbatch":
                with contextlib.suppress(LifecycleError):
                    exclude = nodes_to_exclude(last.run.transport, last.run.job_id)
            why = f"job {last.run.job_id} ({last.name}) ended {last.status.report.get('state')}"
            added.append(
                self._add(f"{name}-retry{made + 1}", name, why, left, planned.gpus, exclude)
            )
        return added

    def wait(
        self,
        timeout: float,
        interval: float,
        retries: int,
        on_round: Callable[[CampaignStatus], None] | None = None,
    ) -> CampaignStatus:
        """Look every ``interval`` seconds until every job has ended (retrying jobs the
        infrastructure ended, :meth:`retry`) or ``timeout`` passes; the last round."""
        deadline = time.monotonic() + timeout
        views = self.jobs()
        while True:
            status = self.look(views)
            if on_round is not None:
                on_round(status)
            if retries and self.retry(status, retries):
                views = self.jobs()
                continue
            if status.ended or time.monotonic() >= deadline:
                return status
            time.sleep(max(0.0, min(interval, deadline - time.monotonic())))

    def rerun(self, status: CampaignStatus) -> JobView:
        """Submit one job of the failed, errored and unfinished tests of ``status``."""
        wanted = [t for t in status.tests if t["outcome"] in (*FAILED, "unfinished")]
        if not wanted:
            raise LifecycleError(
                f"no test of {self.folder} failed or was left unfinished: nothing to rerun"
            )
        gpus_of = {job.name: job.gpus for job in self.file.jobs}
        gpus_of |= {a.name: a.gpus for a in self.file.attempts}
        gpus = max(gpus_of.get(t["job"], 1) for t in wanted)
        number = 1 + sum(a.of == "rerun" for a in self.file.attempts)
        ids = [shlex.quote(t["id"]) for t in wanted]
        why = ", ".join(f"{t['id']} {t['outcome']}" for t in wanted)
        return self._add(f"rerun-{number}", "rerun", why, ids, gpus, [])


#: Slurm states of a job the infrastructure ended (a node lost or not booted, preempted).
_INFRASTRUCTURE = ("NODE_FAIL", "BOOT_FAIL", "PREEMPTED")


def infrastructure(status: Status) -> bool:
    """Whether the infrastructure ended the job: node failure, boot failure, preemption,
    or a launch failure (Slurm could not start the batch script)."""
    job = status.job
    launch = job.state == "FAILED" and "launch" in job.reason.lower()
    return status.verdict is not None and (job.state in _INFRASTRUCTURE or launch)


def _opts(exclude: Sequence[str] = ()) -> tuple[str, ...]:
    return (*CAMPAIGN_SBATCH, *((f"--exclude={','.join(exclude)}",) if exclude else ()))


def entries_left(entries: Sequence[CampaignEntry], tests: Sequence[Mapping[str, Any]]) -> list[str]:
    """The selectors of ``entries`` that none of ``tests`` has an outcome for."""
    done = [str(t["id"]) for t in tests if t.get("outcome") in DONE]
    return [e.selector for e in entries if not any(belongs(t, e.test_id) for t in done)]
