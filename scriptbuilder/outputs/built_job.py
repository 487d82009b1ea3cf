"""What a build produced, and how it reaches the disk."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scriptbuilder.models.job_spec import JobSpec
from scriptbuilder.outputs.atomic import publishing, write_atomic
from scriptbuilder.outputs.job_spec import job_spec_json, with_hashes
from scriptbuilder.outputs.submit import LoginNode, run_submit, run_submit_remote
from scriptbuilder.resolution.secrets import mask
from scriptbuilder.script.render import quote_literal
from scriptbuilder.workflows.perf_sanity import SubmitLogin

if TYPE_CHECKING:
    from scriptbuilder.models.request import BuildRequest
    from scriptbuilder.resolution.trace import TraceRecord


@dataclass(frozen=True)
class OutputFile:
    path: str
    text: str
    mode: int


@dataclass(frozen=True)
class SubmitRun:
    """A submit.py run that writes the launch script (the perf-sanity path): on this
    machine, or on the cluster's login node when ``login`` is set (then ``cwd`` and
    the ``inputs`` paths are the cluster's)."""

    argv: tuple[str, ...]
    cwd: Path
    output_log: Path
    timeout: float
    #: Files submit.py reads, written before it runs (a derived config, a config file).
    inputs: tuple[OutputFile, ...] = ()
    login: SubmitLogin | None = None
    #: How to reach the login node; :func:`scriptbuilder.api.build` attaches it.
    node: LoginNode | None = field(default=None, compare=False)

    def display(self) -> str:
        command = " ".join(quote_literal(a) for a in self.argv)
        if self.login is None:
            return command
        return f"{self.login.describe()} (in {quote_literal(str(self.cwd))}): {command}"


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
        """``field  value  <- rule`` per resolved value (secrets masked)."""
        width = max((len(c.field) for c in self.trace.choices), default=0)
        lines = (f"{c.field:<{width}}  {c.value!s}  <- {c.rule}" for c in self.trace.choices)
        return tuple(mask(line, self.secrets) for line in lines)

    @property
    def shown_script(self) -> str:
        return mask(self.script_text, self.secrets)

    @property
    def job_spec(self) -> JobSpec:
        return JobSpec.model_validate(self.job_spec_data)

    def write(self) -> list[Path]:
        """Create ``work_dir`` (its parent must exist) and write every file into it,
        job_spec.json last (see :mod:`scriptbuilder.outputs.atomic`); on the
        perf-sanity path submit.py first writes the launch script. Returns the paths."""
        files, written = list(self.files), [Path(out.path) for out in self.files]
        with publishing(os.path.normpath(self.request.work_dir)) as publication:
            if (submit := self.submit) is not None and (login := submit.login) is not None:
                script = str(self.job_spec_data["script_path"])
                publication.name = submit.output_log.name
                assert submit.node is not None, "the API attaches the login node"
                inputs = [(out.path, out.text, out.mode) for out in submit.inputs]
                data = run_submit_remote(
                    submit.node,
                    submit.argv,
                    cwd=str(submit.cwd),
                    timeout=submit.timeout,
                    output_log=submit.output_log,
                    inputs=inputs,
                    launch_sh=login.launch_sh,
                )
                publication.stage(script, data, 0o755)
                spec = with_hashes(self.job_spec_data, script, {script: data})
                files[-1] = replace(files[-1], text=job_spec_json(spec))  # job_spec.json
                written[:0] = [Path(script)]
            elif submit is not None:
                for out in submit.inputs:  # read by submit.py
                    publication.name = os.path.basename(out.path)
                    write_atomic(out.path, out.text, out.mode)
                script = str(self.job_spec_data["script_path"])
                tmp = publication.reserve(script)  # where submit.py writes the script
                publication.name = submit.output_log.name
                argv = [tmp if a == script else a for a in submit.argv]
                run_submit(
                    argv, cwd=submit.cwd, timeout=submit.timeout, output_log=submit.output_log
                )
                publication.name = os.path.basename(script)
                with open(tmp, "rb") as file:
                    data = file.read()
                    os.fsync(file.fileno())
                spec = with_hashes(self.job_spec_data, script, {script: data})
                files[-1] = replace(files[-1], text=job_spec_json(spec))  # job_spec.json
                written[:0] = [*(Path(out.path) for out in submit.inputs), Path(script)]
            for out in files:
                publication.stage(out.path, out.text, out.mode)
        return written
