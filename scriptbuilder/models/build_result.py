"""A build's machine-readable result (``build --json``, a line of ``build --many``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class TraceEntry(BaseModel):
    """One resolved value and the rule that chose it (a line of ``--explain``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    field: str
    value: Any = Field(description="The value chosen (a string, number, boolean or null).")
    rule: str


class BuildResult(BaseModel):
    """One build: what it wrote (or would write, with ``--dry-run``), job_spec.json
    and the warnings; or, when it was refused, the error and the exit status a
    single build would end with. Fields that do not apply are left out."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    line: int | None = Field(
        None, ge=1, description="build --many only: the request's line number in FILE."
    )
    ok: bool = Field(description="true: the job was built (and, unless written is false, written).")
    exit_code: int = Field(
        description="0 when built; else the exit status of a single build of this request "
        "(2 refused, 1 an OS error while writing)."
    )
    error: str | None = Field(None, description="Why the build failed: one line, ok false only.")
    work_dir: str | None = Field(None, description="The request's work_dir.")
    written: bool | None = Field(
        None, description="false with --dry-run: nothing was written, files lists the paths."
    )
    files: list[str] | None = Field(
        None,
        description="Absolute paths of the files written, job_spec.json last (the script, "
        "a run script copy, a derived config; on the perf-sanity path the launch script).",
    )
    job_spec: dict[str, Any] | None = Field(
        None,
        description="job_spec.json as written, secret values shown as *** "
        "(its shape: scriptbuilder schema job-spec).",
    )
    campaign: dict[str, Any] | None = Field(
        None,
        description="A test_list or test_db request: campaign.json as written (its shape: "
        "scriptbuilder schema campaign); files then lists every job's files, campaign.json "
        "last, and job_spec is left out.",
    )
    warnings: list[str] | None = Field(None, description="The build's warnings.")
    trace: list[TraceEntry] | None = Field(
        None, description="build --json --explain only: every resolved value and its rule."
    )
