"""What a submit leaves behind: ``WORK_DIR/run.json``, and the build it came from.

:func:`load_build` reads ``job_spec.json`` and checks that the build is whole
(the script it names is there, and matches ``script_sha256`` when the build
recorded one). :class:`RunRecord` is the submitted run: job id, where and how
it was submitted, the log paths as the job writes them, and the sha256 of the
``job_spec.json`` and of the script it came from, so a run.json left by another
build is told apart; ``kind``, the backend that started it; once the job has ended,
``report``, its verdict report, which later looks return without asking the
scheduler. It is written by temporary file and rename, so a reader sees the old
record or the new one; it is written under the work_dir's lock
(:func:`scriptbuilder.outputs.atomic.locked`), and :func:`update` reads and
changes it there.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from scriptbuilder.lifecycle.errors import LifecycleError
from scriptbuilder.models.job_spec import JobSpec
from scriptbuilder.outputs.atomic import locked, write_atomic
from scriptbuilder.scenarios.base import Scenario
from scriptbuilder.scenarios.docker import SCRIPT_NAME as DOCKER_SCRIPT
from scriptbuilder.scenarios.registry import spec_scenario

RUN_FILE = "run.json"
_DIRECTIVE = re.compile(r"^#SBATCH\s+(--output|--error|-o|-e)(?:=|\s+)(.+)$", re.MULTILINE)
#: The backends (see :mod:`scriptbuilder.lifecycle.backends`).
Kind = Literal["sbatch", "persistent", "docker"]


@dataclass
class Build:
    """A written build: its job_spec.json (read through :class:`JobSpec`) and the file
    to run."""

    work_dir: Path
    spec: JobSpec
    spec_sha256: str
    script: Path
    script_sha256: str

    @property
    def where(self) -> Scenario | None:
        """The scenario the build names (None: not one this version knows)."""
        return spec_scenario(self.spec)

    @property
    def scenario(self) -> str:
        return self.where.name if self.where else self.spec.scenario


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def load_build(work_dir: Path) -> Build:
    """The build in ``work_dir``; LifecycleError when there is none or it is half written."""
    work_dir = work_dir.absolute()
    spec_path = work_dir / "job_spec.json"
    fix = f"run the build again for {work_dir}"
    try:
        raw = spec_path.read_bytes()
    except FileNotFoundError:
        raise LifecycleError(f"{spec_path} not found: nothing built there ({fix})") from None
    try:
        spec = JobSpec.model_validate_json(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        if first["type"] == "json_invalid":
            raise LifecycleError(f"{spec_path} is not JSON (half written?): {fix}") from None
        where = ".".join(str(p) for p in first["loc"]) or "document"
        raise LifecycleError(
            f"{spec_path} is not a job spec ({where}: {first['msg']}): {fix}"
        ) from None
    if (scenario := spec_scenario(spec)) is not None and scenario.backend(spec) == "docker":
        script = work_dir / DOCKER_SCRIPT
    elif spec.script_path:
        script = Path(spec.script_path)
    else:
        raise LifecycleError(f"{spec_path} names no script_path: {fix}")
    try:
        body = script.read_bytes()
    except OSError:
        raise LifecycleError(f"{script} (named by {spec_path}) is missing: {fix}") from None
    want = spec.script_sha256
    if want is not None and want != sha256(body):
        raise LifecycleError(f"{script} does not match script_sha256 of {spec_path}: {fix}")
    return Build(work_dir, spec, sha256(raw), script, sha256(body))


def slurm_log_paths(script_text: str, submit_dir: str, job_id: str, name: str) -> tuple[str, str]:
    """``--output``/``--error`` of the script's ``#SBATCH`` lines as the job writes them
    (``%j`` the job id, ``%x`` the job name, ``%%`` a ``%``), relative ones under
    ``submit_dir``; Slurm's default ``slurm-%j.out`` without them, ``.err`` = ``.out``."""
    found: dict[str, str] = {}
    for flag, value in _DIRECTIVE.findall(script_text):
        words = shlex.split(value, comments=True)
        if words:
            found.setdefault("err" if flag in ("--error", "-e") else "out", words[0])
    table = {"j": job_id, "x": name, "%": "%"}

    def expand(pattern: str) -> str:
        text = re.sub(r"%(.)", lambda m: table.get(m.group(1), m.group(0)), pattern)
        return text if text.startswith("/") else f"{submit_dir.rstrip('/')}/{text}"

    out = expand(found.get("out", "slurm-%j.out"))
    return out, expand(found["err"]) if "err" in found else out


class Replaced(BaseModel):
    """The earlier job of the work_dir that ``submit --again`` replaced."""

    model_config = ConfigDict(extra="forbid")

    job_id: str
    cancelled: bool


class RunRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    job_id: str
    kind: Kind
    scenario: str
    workflow: str
    host: str
    transport: dict[str, Any] = {}
    script_path: str
    submit_dir: str
    stdout_path: str | None
    stderr_path: str | None
    submitted_at: datetime
    scriptbuilder_version: str
    job_spec_sha256: str
    script_sha256: str
    after: str | None = None
    container_name: str | None = None
    exit_file: str | None = None
    pid: int | None = None
    allocation: dict[str, Any] = {}
    ended_by: str | None = None
    replaces: Replaced | None = None
    #: The verdict report, once the job has ended.
    report: dict[str, Any] | None = None

    def of(self, build: Build) -> bool:
        """Whether this run was submitted from ``build``."""
        built = (build.spec_sha256, build.script_sha256)
        return (self.job_spec_sha256, self.script_sha256) == built

    def write(self, work_dir: Path) -> None:
        write_atomic(work_dir / RUN_FILE, self.model_dump_json(indent=2) + "\n")


def update(build: Build, record: RunRecord, **changes: Any) -> RunRecord:
    """``record`` with ``changes``, over what run.json holds now for the same job (a
    cancel from another process is kept), written back; a run.json that now
    records another job is left alone."""
    with locked(build.work_dir):
        latest = read_record(build, required=False, any_build=True)
        if latest is not None and latest.job_id != record.job_id:
            return record.model_copy(update=changes)
        new = (latest or record).model_copy(update=changes)
        new.write(build.work_dir)
    return new


def read_record(
    build: Build, *, required: bool = True, any_build: bool = False
) -> RunRecord | None:
    """``run.json`` of ``build``; LifecycleError when it belongs to another build
    (unless ``any_build``), or when there is none and ``required``."""
    path = build.work_dir / RUN_FILE
    try:
        record = RunRecord.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        if not required:
            return None
        raise LifecycleError(
            f"{path} not found: nothing submitted yet (run submit first)"
        ) from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "record"
        raise LifecycleError(f"{path} is not a run record ({where}: {first['msg']})") from None
    except OSError as exc:
        raise LifecycleError(f"{path}: {exc.strerror} (remove it, then submit again)") from None
    if not any_build and not record.of(build):
        raise LifecycleError(
            f"{path} is from another build of {build.work_dir} (job {record.job_id}): "
            "submit this build with --again, or delete run.json"
        )
    return record
