"""A campaign's build: the plan's jobs, each built as an ordinary request into its own
work_dir below the campaign folder (``job-01``, ...), and ``campaign.json`` beside them.

Each job's request is the campaign request with ``test_cmd`` (its pytest invocations)
in place of the list, its own ``work_dir`` (and ``remote_work_dir``), the campaign's
slurm_env.json, ``share_node`` (it asks for exactly its GPUs), ``persistent_mode``
false (a sbatch job of its own), and ``required_devices`` and ``total_required_devices``
its group's GPUs (each entry was sized alone; a job whose build derives another count
from its joined command stops instead of asking for it).
"""

from __future__ import annotations

import glob
import os
import posixpath
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scriptbuilder.campaign.entries import Entry, read_list, select_test_db
from scriptbuilder.campaign.plan import MARGIN, STARTUP_MINUTES, Job, Need, Plan, plan_campaign
from scriptbuilder.errors import BuildError
from scriptbuilder.inputs.slurm_time import checked_minutes
from scriptbuilder.inputs.tests.testdb import StageReader
from scriptbuilder.models.campaign import (
    CampaignEntry,
    CampaignFile,
    CampaignJob,
    Estimate,
    LeftOut,
)
from scriptbuilder.models.request import BuildRequest
from scriptbuilder.outputs.atomic import publishing
from scriptbuilder.outputs.built_job import BuiltJob
from scriptbuilder.scenarios.base import SlurmEnvReader
from scriptbuilder.scenarios.registry import request_scenario

CAMPAIGN_JSON = "campaign.json"
#: Request fields a campaign sets per job, so a campaign request may not give them.
_PER_JOB = ("total_required_devices", "required_devices_per_node", "required_devices")
_CAMPAIGN_FIELDS = {"test_list", "test_db", "default_test_minutes", "max_jobs", "share_node"}


@dataclass(frozen=True)
class BuiltCampaign:
    """Every job of a campaign and its campaign.json; nothing is on disk until :meth:`write`."""

    request: BuildRequest
    plan: Plan
    jobs: tuple[BuiltJob, ...]
    campaign: CampaignFile

    @property
    def campaign_json(self) -> str:
        return self.campaign.model_dump_json(indent=2) + "\n"

    @property
    def path(self) -> str:
        return posixpath.join(self.request.work_dir, CAMPAIGN_JSON)

    def write(self) -> list[Path]:
        """Write every job into its work_dir, then campaign.json (atomically, under the
        campaign folder's lock); returns the paths, campaign.json last."""
        written: list[Path] = []
        with publishing(os.path.normpath(self.request.work_dir)) as publication:
            for job in self.jobs:
                written += job.write()
            publication.stage(self.path, self.campaign_json, 0o644)
        return [*written, Path(self.path)]

    @property
    def plan_lines(self) -> list[str]:
        """The plan as text: the estimate, then each job with its entries."""
        c = self.campaign
        est, count = c.estimate, sum(len(job.entries) for job in c.jobs)
        lines = [
            f"Campaign: {self.path}",
            f"Source: {c.source}",
            f"Tests: {count} in {len(c.jobs)} jobs ({len(c.skipped)} skipped, "
            f"{len(c.missing)} not found)",
            f"Estimate: {est.makespan_minutes:.1f} min on {c.nodes} nodes x {c.gpus_per_node} "
            f"GPUs (lower bound {est.lower_bound_minutes:.1f} min), {est.gpu_hours:.2f} GPU-hours",
        ]
        for job in c.jobs:
            lines.append(
                f"  {job.name}  {job.gpus} GPUs  {job.estimated_minutes:.1f} min  "
                f"{len(job.entries)} tests  {job.work_dir}"
            )
            lines += [f"    {e.selector}  ({e.where})" for e in job.entries]
        lines += [f"Skipped: {s.test_id} ({s.where}): {s.reason}" for s in c.skipped]
        lines += [f"Warning: {w}" for w in c.warnings]
        return lines

    @property
    def explanation(self) -> list[str]:
        """Every entry's GPUs and minutes with the rule that chose them, and its job."""
        job_of = {id(need): job.name for need, job in self._needs()}
        limit = self.campaign.time_limit
        lines = [
            f"time limit  {limit}  <- a job's estimate fits {MARGIN:.0%} of it "
            f"({self.campaign.usable_minutes} min)"
            if limit
            else "time limit  none  <- local_docker: a job may run as long as it needs",
            f"start-up  {STARTUP_MINUTES} min per job  <- image, container and install step",
        ]
        for need, _ in self._needs():
            e = need.entry
            lines.append(
                f"{e.where}  {e.test_id}  {need.gpus} GPUs <- {need.gpus_source}; "
                f"{need.minutes:.2f} min <- {need.minutes_source}; {job_of[id(need)]}"
            )
        return lines

    def _needs(self) -> list[tuple[Need, CampaignJob]]:
        return [
            (need, job)
            for planned, job in zip(self.plan.jobs, self.campaign.jobs, strict=True)
            for need in planned.needs
        ]


def _job_request(req: BuildRequest, job: Job, name: str, slurm_env: str) -> dict[str, Any]:
    data = req.model_dump(exclude_none=True, exclude=_CAMPAIGN_FIELDS)
    data |= {"test_cmd": job.test_cmd, "work_dir": posixpath.join(req.work_dir, name)}
    data |= {"total_required_devices": job.gpus, "required_devices": job.gpus}
    data |= {"share_node": True, "persistent_mode": False}
    data |= request_scenario(req).campaign_fields(req, slurm_env)
    if req.remote_work_dir:
        data["remote_work_dir"] = posixpath.join(req.remote_work_dir, name)
    if req.job_name:
        data["job_name"] = f"{req.job_name}-{name}"
    return data


def later_job_request(
    req: BuildRequest, selectors: list[str], gpus: int, name: str
) -> dict[str, Any]:
    """The request of a job added to the campaign of ``req`` after its build (a retry or
    a rerun, into ``<work_dir>/<name>``) that runs ``selectors`` (entries as pytest
    arguments, as campaign.json lists them) on ``gpus`` GPUs."""
    needs = []
    for selector in selectors:
        words = shlex.split(selector)
        options = dict(zip(words[1::2], words[2::2], strict=False))
        entry = Entry(words[0], name, keyword=options.get("-k"), mark=options.get("-m"))
        needs.append(Need(entry, gpus, False, None, "campaign.json", 0.0, "campaign.json"))
    slurm_env = req.slurm_env_file or posixpath.join(req.work_dir, "slurm_env.json")
    return _job_request(req, Job(tuple(needs)), name, slurm_env)


def _entries(req: BuildRequest) -> tuple[list[Entry], str]:
    if req.test_list is not None:
        return read_list(req.test_list), f"test_list {req.test_list}"
    assert req.test_db is not None and req.repo_root
    sel = req.test_db
    values = {"gpus": sel.gpus, "gpu": sel.gpu, "stage": sel.stage, "backend": sel.backend}
    shown = [f"{k}={v}" for k, v in {**values, **sel.terms}.items() if v is not None]
    return select_test_db(req.repo_root, sel), f"test_db {sel.context} ({', '.join(shown)})"


def _check(req: BuildRequest) -> None:
    for name in _PER_JOB:
        if getattr(req, name) is not None:
            raise BuildError(
                f"{name} is derived for each job of a campaign (test_list/test_db); leave it out"
            )
    if req.persistent_mode:
        raise BuildError(
            "persistent_mode: campaign jobs run side by side as jobs of their own; pass "
            "persistent_mode false or leave it out"
        )
    if not req.repo_root:
        raise BuildError(
            "repo_root is required for a test_list or test_db request (the tests are read "
            "there); pass the local checkout"
        )
    if not req.work_dir.startswith("/"):
        raise BuildError(
            f"work_dir must be an absolute path, got {req.work_dir!r}; pass an absolute path"
        )


def build_campaign(
    req: BuildRequest,
    build_one: Callable[[Mapping[str, Any]], BuiltJob],
    *,
    read_slurm_env: SlurmEnvReader,
    read_test_stages: StageReader,
) -> BuiltCampaign:
    """Plan ``req`` (a test_list or test_db request) and build each job with
    ``build_one``; reads inputs, writes nothing."""
    _check(req)
    assert req.repo_root
    entries, source = _entries(req)
    scenario = request_scenario(req)
    nodes, gpus_per_node, where = scenario.campaign_room(req, read_slurm_env)
    usable = None
    if (time_limit := scenario.campaign_time_limit(req)) is not None:
        limit = checked_minutes("time_limit", time_limit)
        usable = None if limit is None else limit * MARGIN
    plan = plan_campaign(
        entries,
        repo_root=req.repo_root,
        read_stages=read_test_stages,
        default_minutes=req.default_test_minutes,
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        where=where,
        usable=usable,
        max_jobs=req.max_jobs,
        allow_missing=bool(req.allow_missing_tests),
    )
    width = max(2, len(str(len(plan.jobs))))
    slurm_env = req.slurm_env_file or posixpath.join(req.work_dir, "slurm_env.json")
    built: list[BuiltJob] = []
    jobs: list[CampaignJob] = []
    for number, job in enumerate(plan.jobs, 1):
        name = f"job-{number:0{width}d}"
        try:
            built.append(build_one(_job_request(req, job, name, slurm_env)))
        except BuildError as exc:
            lines = ", ".join(need.entry.where for need in job.needs[:3])
            raise BuildError(f"{name} ({lines}): {exc}") from None
        entries_out = [
            CampaignEntry(
                test_id=n.entry.test_id,
                where=n.entry.where,
                selector=n.entry.selector,
                gpus=n.gpus,
                gpus_source=n.gpus_source,
                minutes=round(n.minutes, 3),
                minutes_source=n.minutes_source,
                isolation=n.entry.isolation,
            )
            for n in job.needs
        ]
        jobs.append(
            CampaignJob(
                name=name,
                work_dir=posixpath.join(req.work_dir, name),
                gpus=job.gpus,
                exact_gpus=job.needs[0].exact,
                estimated_minutes=round(job.minutes, 3),
                test_cmd=job.test_cmd,
                entries=entries_out,
            )
        )
    names = {job.name for job in jobs}
    earlier = sorted(glob.glob(posixpath.join(glob.escape(req.work_dir), "job-*")))
    plan.warnings += [
        f"{path} is not a job of this campaign (an earlier build's?); campaign.json lists "
        "the jobs, remove it"
        for path in earlier
        if os.path.isdir(path) and posixpath.basename(path) not in names
    ]
    s, skipped, missing = plan.schedule, plan.skipped, plan.missing
    campaign = CampaignFile(
        work_dir=req.work_dir,
        source=source,
        nodes=plan.nodes,
        gpus_per_node=plan.gpus_per_node,
        time_limit=time_limit,
        usable_minutes=usable,
        startup_minutes=STARTUP_MINUTES,
        estimate=Estimate(
            makespan_minutes=round(s.makespan, 3),
            gpu_hours=round(s.gpu_hours, 3),
            lower_bound_minutes=round(s.lower_bound, 3),
        ),
        jobs=jobs,
        skipped=[LeftOut(test_id=e.test_id, where=e.where, reason=e.skip or "") for e in skipped],
        missing=[LeftOut(test_id=e.test_id, where=e.where, reason=why) for e, why in missing],
        warnings=[
            *plan.warnings,
            *(f"{j.name}: {w}" for j, b in zip(jobs, built, strict=True) for w in b.warnings),
        ],
        request=req.model_dump(mode="json", exclude_none=True),
    )
    return BuiltCampaign(req, plan, tuple(built), campaign)
