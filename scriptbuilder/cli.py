"""``scriptbuilder``: build a job from a request file, or print the JSON Schemas."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import click

from scriptbuilder import __version__
from scriptbuilder.errors import BuildError

PROG = "scriptbuilder"
#: Local paths that a request file may give relative to its own folder.
LOCAL_PATH_FIELDS = (
    "work_dir",
    "repo_root",
    "skill_dir",
    "slurm_env_file",
    "custom_script",
    "perf_config_yaml",
)


def read_request(source: str) -> dict[str, Any]:
    """A request from a JSON or YAML file, or ``-`` for standard input."""
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except OSError as exc:
        raise BuildError(f"request file {source}: {exc.strerror}; pass a readable file") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = _read_yaml(source, text)
    if not isinstance(data, dict):
        raise BuildError(f"request file {source} must hold a mapping of field names to values")
    if source != "-":
        base = Path(source).resolve().parent
        for name in LOCAL_PATH_FIELDS:
            value = data.get(name)
            if isinstance(value, str) and value and not value.startswith(("/", "~")):
                data[name] = os.path.normpath(base / value)
    return data


def _read_yaml(source: str, text: str) -> Any:
    import yaml

    try:
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise BuildError(
            f"request file {source} is neither JSON nor YAML{where}; fix its syntax"
        ) from None


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name=PROG)
def cli() -> None:
    """Turn a TensorRT-LLM test request into a Slurm script (or docker command) and
    job_spec.json."""


@cli.command("build")
@click.argument("request", metavar="REQUEST")
@click.option("--dry-run", is_flag=True, help="Write nothing; print the script and job spec.")
@click.option("--explain", is_flag=True, help="Print every resolved value and its rule.")
@click.option(
    "--env-info",
    metavar="FILE",
    default=None,
    help="JSON internal-env-info source: arch, partitions.<name>.arch, default_models_repo_host.",
)
def build_command(request: str, dry_run: bool, explain: bool, env_info: str | None) -> None:
    """Resolve REQUEST (JSON or YAML; '-' for stdin) and write the script and
    job_spec.json into its work_dir."""
    from scriptbuilder.api import build

    info = None
    if env_info:
        from scriptbuilder.env_info import FileEnvInfo

        info = FileEnvInfo.load(env_info)
    job = build(read_request(request), env_info=info)
    if explain:
        click.echo("Resolved values (value <- rule):")
        for line in job.explanation:
            click.echo("  " + line)
        click.echo()
    if dry_run:
        if job.submit is not None:
            click.echo(f"# --- {job.script_name} would be written by: {job.submit.display()}")
        else:
            click.echo(f"# --- {job.script_name} (not written)")
            click.echo(job.script_text, nl=False)
        click.echo("# --- job_spec.json (not written)")
        click.echo(job.job_spec_json, nl=False)
        return
    job.write()
    click.echo(job.report, nl=False)


@cli.command("schema")
@click.argument("which", type=click.Choice(["request", "slurm-env", "job-spec"]))
def schema_command(which: str) -> None:
    """Print the JSON Schema of a request, slurm_env.json or job_spec.json."""
    from scriptbuilder.schemas import schema_text

    click.echo(schema_text(which), nl=False)


def _fail(message: str, code: int = 2) -> NoReturn:
    click.echo(f"{PROG}: error: {message}", err=True)
    sys.exit(code)


def main(argv: Sequence[str] | None = None) -> None:
    try:
        rc = cli.main(
            args=list(argv) if argv is not None else None, prog_name=PROG, standalone_mode=False
        )
        if isinstance(rc, int) and rc:
            sys.exit(rc)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        _fail(exc.format_message().replace("\n", " "))
    except BuildError as exc:
        _fail(str(exc), exc.exit_code)
    except OSError as exc:
        _fail(f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), 1)


if __name__ == "__main__":
    main()
