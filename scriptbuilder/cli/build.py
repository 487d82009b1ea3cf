"""``scriptbuilder``: build a job from a request file, or print the JSON Schemas.

The interface is declared with click (:func:`click_group`). A well-formed
``build`` call (``build`` with ``--dry-run``, ``--explain`` and
``--env-info FILE`` each at most once, then one request path) is read
directly, as :mod:`scriptbuilder.cli.dropin` does for the drop-in, so a build does
not pay for importing click; help, ``--version``, ``schema``, shell completion
and every malformed call go through click.
"""

from __future__ import annotations

import os
import sys

from scriptbuilder import __version__
from scriptbuilder.cli.console import echo, run_click, run_outside_click
from scriptbuilder.inputs.request_file import read_request

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    import click

PROG = "scriptbuilder"
#: Set by a shell asking click for completions.
_COMPLETE_VAR = "_SCRIPTBUILDER_COMPLETE"


def run_build(request: str, *, dry_run: bool, explain: bool, env_info: str | None) -> None:
    """``scriptbuilder build``: resolve, then print (``dry_run``) or write the job."""
    from scriptbuilder.api import build

    info = None
    if env_info:
        from scriptbuilder.inputs.env_info import FileEnvInfo

        info = FileEnvInfo.load(env_info)
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
            out += [f"# --- {job.script_name} (not written)\n", job.script_text]
        out += ["# --- job_spec.json (not written)\n", job.job_spec_json]
        echo("".join(out))
        return
    if out:
        echo("".join(out))
    job.write()
    echo(job.report)


#: ``build`` switches read without click: option -> keyword of :func:`run_build`.
_SWITCHES = {"--dry-run": "dry_run", "--explain": "explain"}


def parse_build(args: Sequence[str]) -> dict[str, Any] | None:
    """The keyword arguments of :func:`run_build` for a well-formed ``build`` call,
    the values click would pass; None for anything click must handle."""
    if len(args) < 2 or args[0] != "build" or _COMPLETE_VAR in os.environ:
        return None
    opts: dict[str, Any] = {"request": None, "dry_run": False, "explain": False, "env_info": None}
    seen: set[str] = set()
    i = 1
    while i < len(args):
        token = args[i]
        name, eq, value = token.partition("=")
        if token == "-" or not token.startswith("-"):
            if opts["request"] is not None:
                return None
            opts["request"] = token
        elif name in seen:
            return None
        elif token in _SWITCHES:
            opts[_SWITCHES[token]] = True
        elif name != "--env-info":
            return None
        elif eq:
            opts["env_info"] = value
        elif i + 1 < len(args) and not args[i + 1].startswith("-"):
            i += 1
            opts["env_info"] = args[i]
        else:
            return None
        seen.add(name)
        i += 1
    return None if opts["request"] is None else opts


# ------------------------------------------------------------------ click

_CLI: list[click.Group] = []


def click_group() -> click.Group:
    """The click interface (made on first use)."""
    if _CLI:
        return _CLI[0]
    import click

    @click.group(
        name=PROG,
        context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    )
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
        help="JSON internal-env-info source: arch, partitions.<name>.arch, "
        "default_models_repo_host.",
    )
    def build_command(request: str, dry_run: bool, explain: bool, env_info: str | None) -> None:
        """Resolve REQUEST (JSON or YAML; '-' for stdin) and write the script and
        job_spec.json into its work_dir."""
        run_build(request, dry_run=dry_run, explain=explain, env_info=env_info)

    @cli.command("schema")
    @click.argument("which", type=click.Choice(["request", "slurm-env", "job-spec"]))
    def schema_command(which: str) -> None:
        """Print the JSON Schema of a request, slurm_env.json or job_spec.json."""
        from scriptbuilder.models import json_schema

        echo(json_schema(which))

    _CLI.append(cli)
    return cli


def __getattr__(name: str) -> Any:
    if name == "cli":
        return click_group()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: Sequence[str] | None = None) -> None:
    """Console entry point."""
    args = list(argv) if argv is not None else sys.argv[1:]
    opts = parse_build(args)
    if opts is None:
        run_click(PROG, click_group(), args)
    else:
        run_outside_click(PROG, lambda: run_build(**opts))


if __name__ == "__main__":
    main()
