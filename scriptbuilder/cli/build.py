"""``scriptbuilder``: build a job from a request file or a sweep of requests (``--many``,
one JSON result line per request), or print the JSON Schemas. A result line and the
object of ``build --json`` are both :class:`~scriptbuilder.models.build_result.BuildResult`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import click
from pydantic import BaseModel

from scriptbuilder.api import (
    BuiltCampaign,
    BuiltJob,
    build,
    build_campaign,
    load_request,
    sweep_readers,
)
from scriptbuilder.campaign.build import CAMPAIGN_JSON
from scriptbuilder.cli.group import Group, fail, os_error_message, write_out
from scriptbuilder.cli.lifecycle import register, ssh_options
from scriptbuilder.errors import BuildError
from scriptbuilder.inputs.env_info import FileEnvInfo
from scriptbuilder.inputs.request_file import decoded, parse_json, read_request
from scriptbuilder.models.build_result import BuildResult, TraceEntry
from scriptbuilder.models.campaign import CampaignFile
from scriptbuilder.models.job_spec import JobSpec
from scriptbuilder.models.request import BuildRequest
from scriptbuilder.models.slurm_env import SlurmEnv
from scriptbuilder.resolution.secrets import mask_data
from scriptbuilder.version import __version__

PROG = "scriptbuilder"
#: ``scriptbuilder schema NAME`` -> the model.
SCHEMAS: dict[str, type[BaseModel]] = {
    "request": BuildRequest, "slurm-env": SlurmEnv,
    "job-spec": JobSpec, "build-result": BuildResult, "campaign": CampaignFile,
}  # fmt: skip


def _env_info(path: str | None) -> FileEnvInfo | None:
    return FileEnvInfo.load(path) if path else None


def _build_any(source: str, info: FileEnvInfo | None, **ssh: Any) -> BuiltJob | BuiltCampaign:
    """The job of the request file ``source``, or its campaign (test_list, test_db);
    ``ssh``: how a remote perf-sanity build reaches the login node."""
    req = load_request(read_request(source))
    if req.is_campaign:
        return build_campaign(req, env_info=info)
    return build(req, env_info=info, **ssh)


def _campaign_outcome(built: BuiltCampaign, dry_run: bool) -> BuildResult:
    files = [Path(out.path) for job in built.jobs for out in job.files] + [Path(built.path)]
    return BuildResult(
        ok=True,
        exit_code=0,
        work_dir=built.request.work_dir,
        written=not dry_run,
        files=[str(path) for path in (files if dry_run else built.write())],
        campaign=built.campaign.model_dump(mode="json"),
        warnings=built.campaign.warnings,
    )


def _job_outcome(job: BuiltJob, dry_run: bool, trace: bool) -> BuildResult:
    paths = [Path(out.path) for out in job.files] if dry_run else job.write()
    entries = None
    if trace:
        masked = mask_data([list(entry) for entry in job.trace.choices], job.secrets)
        entries = [TraceEntry(field=f, value=v, rule=r) for f, v, r in masked]
    return BuildResult(
        ok=True,
        exit_code=0,
        work_dir=job.request.work_dir,
        written=not dry_run,
        files=[str(path) for path in paths],
        job_spec=job.job_spec_data,
        warnings=list(job.warnings),
        trace=entries,
    )


def _outcome(
    make: Callable[[], BuiltJob | BuiltCampaign],
    *,
    dry_run: bool,
    trace: bool = False,
    line: int | None = None,
) -> BuildResult:
    """Build the job (or campaign) ``make`` returns and, unless ``dry_run``, write it;
    print the result (or why it failed, with the exit status a single build would end
    with) as one line of JSON and return it."""
    try:
        built = make()
        if isinstance(built, BuiltCampaign):
            result = _campaign_outcome(built, dry_run)
        else:
            result = _job_outcome(built, dry_run, trace)
    except BuildError as exc:
        result = BuildResult(ok=False, exit_code=exc.exit_code, error=str(exc))
    except OSError as exc:
        result = BuildResult(ok=False, exit_code=1, error=os_error_message(exc))
    result = result.model_copy(update={"line": line})
    # Top-level fields that do not apply are left out; a null inside one (job_spec.json) stays.
    data = {k: v for k, v in result.model_dump(mode="json").items() if v is not None}
    write_out(json.dumps(data) + "\n")
    return result


def run_campaign(
    req: BuildRequest, *, dry_run: bool, explain: bool, info: FileEnvInfo | None
) -> None:
    """``scriptbuilder build`` of a test_list or test_db request: plan and build every
    job, then print the plan (``dry_run``, with campaign.json) or write the campaign."""
    built = build_campaign(req, env_info=info)
    out: list[str] = []
    if explain:
        out.append("Plan (value <- rule):\n")
        out += [f"  {line}\n" for line in built.explanation]
        out.append("\n")
    plan = [f"{line}\n" for line in built.plan_lines]
    if dry_run:
        out += [*plan, f"# --- {CAMPAIGN_JSON} (not written)\n", built.campaign_json]
        write_out("".join(out))
        return
    if out:
        write_out("".join(out))
    built.write()
    write_out("".join(plan))


def run_build(
    request: str, *, dry_run: bool, explain: bool, env_info: str | None, **ssh: Any
) -> None:
    """``scriptbuilder build``: resolve, then print (``dry_run``) or write the job."""
    info = _env_info(env_info)
    req = load_request(read_request(request))
    if req.is_campaign:
        run_campaign(req, dry_run=dry_run, explain=explain, info=info)
        return
    job = build(req, env_info=info, **ssh)
    out: list[str] = []
    if explain:
        out.append("Resolved values (value <- rule):\n")
        out += [f"  {line}\n" for line in job.explanation]
        out.append("\n")
    if dry_run:
        if job.submit is not None:
            out.append(f"# --- {job.script_name} would be written by: {job.submit.display()}\n")
        else:
            out += [f"# --- {job.script_name} (not written)\n", job.shown_script]
        out += ["# --- job_spec.json (not written)\n", job.job_spec_json]
        write_out("".join(out))
        return
    if out:
        write_out("".join(out))
    job.write()
    write_out(job.report)


def _sweep_lines(source: str) -> Iterator[tuple[int, bytes]]:
    try:
        stream = sys.stdin.buffer if source == "-" else open(source, "rb")  # noqa: SIM115
    except OSError as exc:
        raise BuildError(f"--many {source}: {exc.strerror}; pass a readable file") from None
    with stream:
        for number, line in enumerate(stream, 1):
            if line.strip():
                yield number, line


def _sweep_job(line: bytes, info: FileEnvInfo | None, readers: dict[str, Any]) -> BuiltJob:
    """The job of one line of a sweep; BuildError when the line holds no request."""
    try:
        data = parse_json(decoded(line, "line"), "line")
    except json.JSONDecodeError as exc:
        raise BuildError(
            f"line is not JSON ({exc.msg} at column {exc.colno}); write one JSON object per line"
        ) from None
    if not isinstance(data, dict):
        raise BuildError("line is not a JSON object; write one object of field names to values")
    return build(data, env_info=info, **readers)


@click.group(
    cls=Group,
    name=PROG,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, prog_name=PROG)
def cli() -> None:
    """Turn a TensorRT-LLM test request into a Slurm script (or docker command) and
    job_spec.json."""


@cli.command("build")
@click.argument("request", metavar="REQUEST", required=False)
@click.option(
    "--many",
    metavar="FILE",
    help="Build every request of FILE (JSON lines, one request object per line; '-' for "
    "stdin) and print one JSON result line per request.",
)
@click.option("--dry-run", is_flag=True, help="Write nothing; print the script and job spec.")
@click.option("--explain", is_flag=True, help="Print every resolved value and its rule.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the result as one JSON object (scriptbuilder schema build-result) instead "
    "of the report; --many always prints JSON lines.",
)
@click.option(
    "--env-info",
    metavar="FILE",
    default=None,
    help="JSON internal-env-info source: arch, partitions.<name>.arch, default_models_repo_host.",
)
@ssh_options
def build_command(
    request: str | None,
    many: str | None,
    dry_run: bool,
    explain: bool,
    as_json: bool,
    env_info: str | None,
    ssh_options: tuple[str, ...],
    control_path: str | None,
) -> int:
    """Resolve REQUEST (JSON or YAML; '-' for stdin) and write the script and
    job_spec.json into its work_dir. A remote_slurm perf-sanity build runs submit.py
    on the login node over ssh (--ssh-option, --control-path)."""
    ssh: dict[str, Any] = {"ssh_options": ssh_options, "control_path": control_path}
    if many is None:
        if request is None:
            raise click.UsageError("Missing argument 'REQUEST' (or pass --many FILE).")
        if not as_json:
            run_build(request, dry_run=dry_run, explain=explain, env_info=env_info, **ssh)
            return 0
        # The result as one JSON object; a failure then ends as without --json.
        result = _outcome(
            lambda: _build_any(request, _env_info(env_info), **ssh),
            dry_run=dry_run,
            trace=explain,
        )
        if result.error is not None:
            fail(PROG, result.error, result.exit_code)
        return 0
    if request is not None:
        raise click.UsageError("Pass either REQUEST or --many FILE, not both.")
    if explain:
        raise click.UsageError("--explain works on one REQUEST; it cannot be used with --many.")
    # One JSON result line per request, in order; a refused request writes nothing. The exit
    # status is the largest a single build of a failed request would have had.
    job = partial(_sweep_job, info=_env_info(env_info), readers={**sweep_readers(), **ssh})
    lines = _sweep_lines(many)
    results = (_outcome(partial(job, b), dry_run=dry_run, line=n) for n, b in lines)
    return max((result.exit_code for result in results), default=0)


register(cli)  # submit, status, watch, cancel, release, results: the job's life


@cli.command("schema")
@click.argument("which", type=click.Choice(list(SCHEMAS)))
def schema_command(which: str) -> None:
    """Print the JSON Schema of a request, slurm_env.json, job_spec.json or a build
    result (build --json, a --many line)."""
    write_out(json.dumps(SCHEMAS[which].model_json_schema(), indent=2, ensure_ascii=False) + "\n")


def main(argv: Sequence[str] | None = None) -> None:
    """Console entry point."""
    cli.main(list(argv) if argv is not None else sys.argv[1:], PROG)


if __name__ == "__main__":
    main()
