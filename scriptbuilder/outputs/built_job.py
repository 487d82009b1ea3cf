"""What a build produced, and how it reaches the disk."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scriptbuilder.outputs.atomic import generation, write_atomic

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
        """Create ``work_dir`` and write every file; returns the documented paths.

        The files in ``work_dir`` (job_spec.json, the script, a run script copy)
        are published together as one generation (see
        :mod:`scriptbuilder.outputs.atomic`): a reader, or a build killed at any
        moment, sees either the earlier files or all the new ones. Builds into one
        ``work_dir`` take its lock, so they follow one another. On the
        perf-sanity path submit.py runs first and writes the launch script into
        the new generation (its full output is kept in ``work_dir``); if it
        fails, nothing is published."""
        written: list[Path] = []
        with generation(self.request.work_dir) as gen:
            if self.submit is not None:
                from scriptbuilder.outputs.submit import run_submit

                for out in self.submit.inputs:
                    write_atomic(out.path, out.text, out.mode)
                    written.append(Path(out.path))
                script = str(self.job_spec_data["script_path"])
                argv = list(self.submit.argv)
                if gen.owns(script):
                    # submit.py writes the launch script into the new generation
                    argv = [gen.path_for(script) if a == script else a for a in argv]
                run_submit(
                    argv,
                    cwd=self.submit.cwd,
                    timeout=self.submit.timeout,
                    output_log=self.submit.output_log,
                )
                written.append(Path(script))
            for out in self.files:
                name = gen.name_of(out.path)
                if name is not None:
                    gen.write(name, out.text, out.mode)
                else:
                    write_atomic(out.path, out.text, out.mode)
                written.append(Path(out.path))
            gen.commit()
        return written
