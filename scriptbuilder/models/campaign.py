"""``campaign.json``: the jobs of a campaign, their entries and GPUs (written by
``scriptbuilder build`` for a ``test_list`` or ``test_db`` request)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class CampaignEntry(_Model):
    test_id: str
    where: str = Field(description="file:line of the list (the test-db file for a selection).")
    selector: str = Field(description="The entry as pytest arguments (id, -k/-m).")
    gpus: int
    gpus_source: str
    minutes: float
    minutes_source: str = Field(
        description=".test_durations, TIMEOUT marker or default_test_minutes."
    )
    isolation: bool = False


class CampaignJob(_Model):
    name: str
    work_dir: str = Field(description="The job's own work_dir (an ordinary build).")
    gpus: int = Field(description="The GPUs the job asks for (--gres=gpu:N).")
    exact_gpus: bool = Field(description="Its tests run only with exactly that many GPUs.")
    estimated_minutes: float = Field(description="Start-up plus its entries' minutes.")
    test_cmd: str
    entries: list[CampaignEntry]


class LeftOut(_Model):
    test_id: str
    where: str
    reason: str


class Estimate(_Model):
    makespan_minutes: float
    gpu_hours: float
    lower_bound_minutes: float = Field(
        description="The larger of the tests' GPU-minutes over the partition's GPUs and "
        "the longest test."
    )


class Attempt(_Model):
    """A job submitted after the plan's: an infrastructure retry of one job, or a
    rerun of failed and unfinished tests."""

    name: str
    work_dir: str
    of: str = Field(description="The job it retries (its name), or 'rerun'.")
    reason: str = Field(description="Why it was submitted (the ended job and its verdict).")
    tests: list[str] = Field(description="The entries (pytest selectors) it runs.")
    gpus: int
    exclude: list[str] = Field(description="Nodes it may not run on.")


class CampaignFile(_Model):
    schema_version: Literal[1] = 1
    work_dir: str
    source: str = Field(description="test_list <file>, or test_db <context> and its values.")
    nodes: int = Field(description="Nodes of the partition the plan was made for.")
    gpus_per_node: int
    time_limit: str | None
    usable_minutes: float | None = Field(description="The share of time_limit a job may fill.")
    startup_minutes: float
    estimate: Estimate
    jobs: list[CampaignJob]
    skipped: list[LeftOut] = Field(description="Entries marked SKIP.")
    missing: list[LeftOut] = Field(description="Tests not found (allow_missing_tests).")
    warnings: list[str]
    request: dict[str, Any] | None = Field(
        None, description="The campaign request, from which retries and reruns are built."
    )
    attempts: list[Attempt] = Field(
        default_factory=list, description="Retries and reruns submitted since the build."
    )
