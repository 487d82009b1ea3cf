"""``scriptbuilder``: build a job from a request file or a sweep of requests, or
print the JSON Schemas. The command line is declared with click.

``build --many FILE`` reads JSON lines, one request object per line (blank
lines are skipped; paths are taken as written, so give absolute ones), builds
them in order in this process and prints one JSON result line per request:
``{"line": n, "ok": true, "exit_code": 0, "work_dir": ..., "written": true,
"files": [...], "job_spec": {...}, "warnings": [...]}`` or ``{"line": n, "ok":
false, "exit_code": 2, "error": "<one line>"}``. A refused request writes
nothing; the sweep goes on with the next line. The exit status is 0 when every
request was built, else the largest status a single build of a failed one
would have had (2 refused or a work_dir that cannot be used, 1 another OS error
while writing, such as a full disk).

``build --json REQUEST`` prints the same object (without ``line``; with
``--explain`` also ``trace``) instead of the report, and exits as without
``--json``; a failed build prints its object and still ends with the one-line
error on standard error. Both shapes are the one model
:class:`~scriptbuilder.models.build_result.BuildOutcome`
(``scriptbuilder schema build-result``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from scriptbuilder import __version__
from scriptbuilder.cli.group import Group, os_error_message, write_out
from scriptbuilder.errors import BuildError
from scriptbuilder.inputs.request_file import MAX_REQUEST_BYTES, parse_json, read_request

if TYPE_CHECKING:
    from scriptbuilder.api import BuiltJob
    from scriptbuilder.models.build_result import BuildOutcome
    from scriptbuilder.resolution.context import EnvInfo

PROG = "scriptbuilder"


def _env_info(path: str | None) -> EnvInfo | None:
    if not path:
        return None
    from scriptbuilder.inputs.env_info import FileEnvInfo

    return FileEnvInfo.load(path)


# ----------------------------------------------------------------- results


def _built_result(
    job: BuiltJob, paths: list[Path], *, written: bool, trace: bool, line: int | None = None
) -> BuildOutcome:
    """A built job's result (see the module text)."""
    from scriptbuilder.models.build_result import BuildOutcome, TraceEntry
    from scriptbuilder.resolution.secrets import mask_data

    entries = None
    if trace:
        masked = mask_data([list(entry) for entry in job.trace.choices], job.secrets)
        entries = [TraceEntry(field=f, value=v, rule=r) for f, v, r in masked]
    return BuildOutcome(
        line=line,
        ok=True,
        exit_code=0,
        work_dir=job.request.work_dir,
        written=written,
        files=[str(path) for path in paths],
        job_spec=job.job_spec_data,
        warnings=list(job.warnings),
        trace=entries,
    )


def _failed_result(code: int, message: str, line: int | None = None) -> BuildOutcome:
    from scriptbuilder.models.build_result import BuildOutcome

    return BuildOutcome(line=line, ok=False, exit_code=code, error=message)


def _print_result(result: BuildOutcome) -> None:
    """The result as one line of JSON on standard output, its fields that do not
    apply left out (a null inside a field, as in job_spec.json, stays)."""
    data = {k: v for k, v in result.model_dump(mode="json").items() if v is not None}
    write_out(json.dumps(data) + "\n")


def run_build_json(request: str, *, dry_run: bool, explain: bool, env_info: str | None) -> None:
    """``scriptbuilder build --json``: as :func:`run_build`, but the result is one JSON
    object on standard output; a failure prints its object, then stops as usual."""
    from scriptbuilder.api import build

    try:
        job = build(read_request(request), env_info=_env_info(env_info))
        paths = [Path(out.path) for out in job.files] if dry_run else job.write()
    except BuildError as exc:
        _print_result(_failed_result(exc.exit_code, str(exc)))
        raise
    except OSError as exc:
        _print_result(_failed_result(1, os_error_message(exc)))
        raise
    _print_result(_built_result(job, paths, written=not dry_run, trace=explain))


def run_build(request: str, *, dry_run: bool, explain: bool, env_info: str | None) -> None:
    """``scriptbuilder build``: resolve, then print (``dry_run``) or write the job."""
    from scriptbuilder.api import build

    info = _env_info(env_info)
    job = build(read_request(request), env_info=info)
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


# ------------------------------------------------------------------ sweep


def _sweep_lines(source: str) -> Iterator[tuple[int, bytes]]:
    """``(line number, bytes)`` of every non-blank line of a JSON-lines file."""
    try:
        stream = sys.stdin.buffer if source == "-" else open(source, "rb")  # noqa: SIM115
    except OSError as exc:
        raise BuildError(f"--many {source}: {exc.strerror}; pass a readable file") from None
    with stream:
        for number, line in enumerate(stream, 1):
            if line.strip():
                yield number, line


def _sweep_request(line: bytes) -> dict[str, Any]:
    """One line of a sweep as a request mapping; BuildError when it is none."""
    if len(line) > MAX_REQUEST_BYTES:
        raise BuildError(
            f"line is larger than {MAX_REQUEST_BYTES // 1024} KiB; a request holds field "
            "values only"
        )
    try:
        data = parse_json(line.decode("utf-8"), "line")
    except UnicodeDecodeError as exc:
        raise BuildError(
            f"line is not UTF-8 text (byte {line[exc.start]:#04x} at offset {exc.start}); "
            "write the request as UTF-8"
        ) from None
    except json.JSONDecodeError as exc:
        raise BuildError(
            f"line is not JSON ({exc.msg} at column {exc.colno}); write one JSON object per line"
        ) from None
    if not isinstance(data, dict):
        raise BuildError("line is not a JSON object; write one object of field names to values")
    return data


def run_many(source: str, *, dry_run: bool, env_info: str | None) -> int:
    """``scriptbuilder build --many``: build (and unless ``dry_run`` write) every
    request of a JSON-lines file, one JSON result line each on stdout, in order.

    A refused request writes nothing and the sweep goes on with the next line.
    Returns the exit status: 0 when every request was built, else the largest
    exit status a single build of a failed request would have had (see the
    module text)."""
    from scriptbuilder.api import build

    info = _env_info(env_info)
    status = 0
    for number, line in _sweep_lines(source):
        try:
            job = build(_sweep_request(line), env_info=info)
            paths = [Path(out.path) for out in job.files] if dry_run else job.write()
        except BuildError as exc:
            code, message = exc.exit_code, str(exc)
        except OSError as exc:
            code, message = 1, os_error_message(exc)
        else:
            _print_result(_built_result(job, paths, written=not dry_run, trace=False, line=number))
            continue
        status = max(status, code)
        _print_result(_failed_result(code, message, number))
    return status


# ------------------------------------------------------------------ click


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
def build_command(
    request: str | None,
    many: str | None,
    dry_run: bool,
    explain: bool,
    as_json: bool,
    env_info: str | None,
) -> int:
    """Resolve REQUEST (JSON or YAML; '-' for stdin) and write the script and
    job_spec.json into its work_dir."""
    if many is None:
        if request is None:
            raise click.UsageError("Missing argument 'REQUEST' (or pass --many FILE).")
        run = run_build_json if as_json else run_build
        run(request, dry_run=dry_run, explain=explain, env_info=env_info)
        return 0
    if request is not None:
        raise click.UsageError("Pass either REQUEST or --many FILE, not both.")
    if explain:
        raise click.UsageError("--explain works on one REQUEST; it cannot be used with --many.")
    return run_many(many, dry_run=dry_run, env_info=env_info)


@cli.command("schema")
@click.argument("which", type=click.Choice(["request", "slurm-env", "job-spec", "build-result"]))
def schema_command(which: str) -> None:
    """Print the JSON Schema of a request, slurm_env.json, job_spec.json or a build
    result (build --json, a --many line)."""
    from scriptbuilder.models import json_schema

    write_out(json_schema(which))


def main(argv: Sequence[str] | None = None) -> None:
    """Console entry point."""
    cli.main(list(argv) if argv is not None else sys.argv[1:], PROG)


if __name__ == "__main__":
    main()
