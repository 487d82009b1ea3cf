"""What a build produced, and how it reaches the disk."""

from __future__ import annotations

import contextlib
import errno
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scriptbuilder.inputs.earlier_job_spec import JOB_SPEC
from scriptbuilder.outputs.atomic import (
    LOCK_NAME,
    lock,
    stage,
    sync_folder,
    temp_path,
    write_atomic,
    write_error,
)
from scriptbuilder.outputs.job_spec import job_spec_json, with_hashes

if TYPE_CHECKING:
    from scriptbuilder.models import BuildRequest, JobSpec
    from scriptbuilder.resolution.trace import TraceRecord


@dataclass(frozen=True)
class OutputFile:
    path: str
    text: str
    mode: int


@dataclass(frozen=True)
class SubmitRun:
    """A submit.py run that writes the launch script (the perf-sanity path)."""

    argv: tuple[str, ...]
    cwd: Path
    output_log: Path
    timeout: float
    #: Files submit.py reads, written before it runs (a derived config).
    inputs: tuple[OutputFile, ...] = ()

    def display(self) -> str:
        from scriptbuilder.script.render import quote_literal

        return " ".join(quote_literal(a) for a in self.argv)


@dataclass(frozen=True)
class BuiltJob:
    """Everything a build produced. Nothing is on disk until :meth:`write`."""

    request: BuildRequest
    #: job_spec.json as plain data, and as its text.
    job_spec_data: dict[str, Any]
    job_spec_json: str
    script_name: str
    #: The script text; empty on the perf-sanity path, where submit.py writes it.
    script_text: str
    report: str
    warnings: tuple[str, ...]
    #: Every resolved value with the rule that chose it (see :attr:`explanation`).
    trace: TraceRecord
    files: tuple[OutputFile, ...] = field(default=())
    #: Set on the perf-sanity path: submit.py writes the script during :meth:`write`.
    submit: SubmitRun | None = None
    #: Secret values of the request: every printout shows them as ``***``.
    secrets: tuple[str, ...] = ()

    @property
    def explanation(self) -> tuple[str, ...]:
        """One line per resolved value: ``field  value  <- rule`` (secrets masked)."""
        from scriptbuilder.resolution.secrets import mask

        return tuple(mask(line, self.secrets) for line in self.trace.lines())

    @property
    def shown_script(self) -> str:
        """The script text for printing, secret values shown as ``***``."""
        from scriptbuilder.resolution.secrets import mask

        return mask(self.script_text, self.secrets)

    @property
    def job_spec(self) -> JobSpec:
        """The job spec as the pydantic model (imports pydantic on first use)."""
        from scriptbuilder.models import JobSpec

        return JobSpec.model_validate(self.job_spec_data)

    def write(self) -> list[Path]:
        """Create ``work_dir`` (its parent must exist) and write every file into
        it; returns their paths.

        Builds into one ``work_dir`` take its lock, so they follow one another.
        Each file is written to a temporary file beside it and flushed; when all
        are written they are renamed into place, ``job_spec.json`` last, which
        records the sha256 of the files it names. On the perf-sanity path
        submit.py first writes the launch script (to its temporary name; its full
        output is kept in ``work_dir``). A failure leaves no temporary file and
        changes nothing in ``work_dir`` (an OS error raises :class:`WriteError`)."""
        work_dir = os.path.normpath(self.request.work_dir)
        try:
            os.mkdir(work_dir, 0o755)
        except FileExistsError:
            pass
        except OSError as exc:
            parent = os.path.dirname(work_dir)
            fix = {errno.ENOENT: f"create {parent}", errno.ENOTDIR: f"make {parent} a folder"}
            raise write_error(
                exc, "create", "work_dir", work_dir, fix.get(exc.errno or 0, "")
            ) from None
        written: list[Path] = []
        staged: list[tuple[str, str]] = []  # (temporary file, path)
        name = LOCK_NAME
        try:
            fd = lock(work_dir)
            try:
                files = sorted(self.files, key=lambda out: os.path.basename(out.path) == JOB_SPEC)
                if self.submit is not None:
                    for out in self.submit.inputs:
                        name = os.path.basename(out.path)
                        write_atomic(out.path, out.text, out.mode)
                        written.append(Path(out.path))
                    spec = self._run_submit(self.submit, staged)
                    files[-1] = replace(files[-1], text=spec)
                    written.append(Path(self.job_spec_data["script_path"]))
                for out in files:
                    name = os.path.basename(out.path)
                    staged.append((stage(out.path, out.text, out.mode), out.path))
                    written.append(Path(out.path))
                for tmp, path in staged:
                    name = os.path.basename(path)
                    os.replace(tmp, path)
                sync_folder(work_dir)
            finally:
                os.close(fd)
        except OSError as exc:
            folder = os.path.dirname(os.path.join(work_dir, name))
            label = "work_dir" if folder == work_dir else "folder"
            raise write_error(exc, f"write {name} into", label, folder) from None
        finally:
            for tmp, _ in staged:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
        return written

    def _run_submit(self, submit: SubmitRun, staged: list[tuple[str, str]]) -> str:
        """Run submit.py, which writes the launch script to its temporary name
        (added to ``staged``); returns the text of job_spec.json with its sha256."""
        from scriptbuilder.workflows.perf_sanity import run_submit

        script = str(self.job_spec_data["script_path"])
        argv = list(submit.argv)
        if script in argv:
            tmp = temp_path(script)
            staged.append((tmp, script))
            argv = [tmp if a == script else a for a in argv]
        else:
            tmp = script
        run_submit(argv, cwd=submit.cwd, timeout=submit.timeout, output_log=submit.output_log)
        with open(tmp, "rb") as file:
            data = file.read()
            os.fsync(file.fileno())
        return job_spec_json(with_hashes(self.job_spec_data, script, {script: data}))
