"""Drop-in replacement for ``build_slurm_script.py``: the same subcommands, flags and
defaults, but every value reaches the script quoted by construction, failing steps
still print the closing line, and ``--bench-cmd`` is split only at a top-level ``&&``.

Values that would only fail after the queue wait are refused while the command line
is read (exit 2, one line), each rule a click callback on the flags it applies to.
The log folder is made before the script is written (``--output`` may lie in it).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import re
import sys
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any

import click

from scriptbuilder.cli.group import Group, write_out
from scriptbuilder.errors import BuildError
from scriptbuilder.inputs.command_args import CommandArgError, split_prepare
from scriptbuilder.inputs.command_check import (
    MAX_NODES,
    MAX_TASKS_PER_NODE,
    check_command,
    check_counts,
    check_custom_command,
    check_custom_env,
    short,
)
from scriptbuilder.inputs.image_ref import enroot_form, enroot_problem, parse_image
from scriptbuilder.inputs.slurm_time import check_time_limit
from scriptbuilder.job.builder import JobBuilder
from scriptbuilder.models.defaults import DEFAULT_SECRET_PATTERNS
from scriptbuilder.outputs.atomic import write_atomic, write_error
from scriptbuilder.resolution.secrets import secret_assignments
from scriptbuilder.scenarios.registry import SCENARIOS
from scriptbuilder.scenarios.slurm import LocalSlurm, check_log_name_part
from scriptbuilder.script.plan import Container, JobSetup, SlurmAllocation, TaskShape
from scriptbuilder.version import __version__
from scriptbuilder.workflows.base import Workflow
from scriptbuilder.workflows.bench import BenchWorkflow
from scriptbuilder.workflows.custom import CustomWorkflow
from scriptbuilder.workflows.eval import EvalWorkflow
from scriptbuilder.workflows.pytest_workflow import PytestWorkflow

Clock = Callable[[], datetime]
Opts = dict[str, Any]
Decorator = Callable[[Callable[..., None]], Callable[..., None]]

PROG = "build_slurm_script"
DEFAULT_MODELS_ROOT = "/scratch.trt_llm_data/llm-models/"
#: Slurm's MPI plugin names (``srun --mpi=list``).
MPI_PLUGIN = r"none|pmi2|pmix(?:_v[0-9]+)?|cray_shasta"
#: ``gpu:N`` or ``gpu:TYPE:N``, optionally ``gres/`` first (a TYPE is not all digits,
#: or ``gpu:4:2`` would read as a type ``4``).
GRES = r"(?:gres/)?gpu(?::(?![0-9]+:)[A-Za-z0-9_.-]+)?:[1-9][0-9]*"
#: The flags whose values are shell command lines (or assignments), which may span lines.
_MULTI_LINE = frozenset({"test_cmd", "custom_cmd", "custom_env", "bench_cmd", "eval_cmd"})
#: What to pass instead of an empty value, per flag.
_NEEDED = {
    "--model-name": "the model's name (for example Llama-3.1-8B)",
    "--partition": "the Slurm partition",
    "--account": "the Slurm account",
    "--docker-image": "the container image",
    "--container-mounts": "the mounts as SRC:DST[,SRC:DST...]",
}


def default_clock() -> datetime:
    """Local time, or ``SOURCE_DATE_EPOCH`` (UTC) when set, for reproducible output."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    return datetime.fromtimestamp(int(epoch), tz=timezone.utc) if epoch else datetime.now()


def _non_empty(ctx: click.Context, param: click.Parameter, value: str) -> str:
    if not value.strip():
        flag = param.opts[0]
        raise BuildError(f"{flag} is empty; pass {_NEEDED[flag]}")
    return value


def _image(ctx: click.Context, param: click.Parameter, value: str) -> str:
    if problem := enroot_problem(parse_image(_non_empty(ctx, param, value))):
        raise BuildError(f"--docker-image {short(value)} cannot be pulled by pyxis: {problem}")
    return value


def _model_name(ctx: click.Context, param: click.Parameter, value: str) -> str:
    _non_empty(ctx, param, value)
    if "/" in value:
        raise BuildError(
            f"--model-name {value!r} contains a '/', but it names the job and its log "
            "files; pass the last part only (for example Llama-3.1-8B)"
        )
    if any(char.isspace() for char in value):
        raise BuildError(
            f"--model-name {short(value)} contains whitespace, but it names the job and its log "
            "files; use '_' or '-' instead (for example Llama-3.1-8B)"
        )
    return value


def _form(pattern: str, refusal: str) -> Callable[[click.Context, click.Parameter, Any], Any]:
    """A click callback refusing a value that is not ``pattern`` in full."""

    def callback(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
        if value is not None and re.fullmatch(pattern, value) is None:
            raise BuildError(f"{param.opts[0]} {short(value)} {refusal}")
        return value

    return callback


#: Paths the script holds: sbatch and pyxis would read a relative one from elsewhere.
_ABSOLUTE = _form("/(?s:.*)", "is not an absolute path; pass the full path (starting with /)")


def _checked(
    check: Callable[[str, str], object],
) -> Callable[[click.Context, click.Parameter, str], str]:
    def callback(ctx: click.Context, param: click.Parameter, value: str) -> str:
        check(param.opts[0], value)
        return value

    return callback


def command_option(flag: str, check: Callable[[str, str], None], help: str) -> Decorator:
    """The required flag holding a subcommand's command line, checked by ``check``."""
    return click.option(flag, required=True, callback=_checked(check), help=help)


COMMON_OPTIONS = (
    click.option("--model-name", required=True, callback=_model_name, help="Job name prefix."),
    click.option(
        "--log-dir",
        callback=_ABSOLUTE,
        help="Directory of the #SBATCH --output/--error files (required for pytest "
        "and custom; bench/eval default to <project-path>/work_dirs/<model>_<time>).",
    ),
    click.option(
        "--local-log-dir", help="Directory created locally instead of --log-dir (remote runs)."
    ),
    click.option("--partition", required=True, callback=_non_empty),
    click.option("--account", required=True, callback=_non_empty),
    click.option(
        "--time-limit", default="02:00:00", show_default=True, callback=_checked(check_time_limit)
    ),
    click.option("--nodes", type=click.IntRange(1, MAX_NODES), default=1, show_default=True),
    click.option("--ntasks", type=click.IntRange(min=1), default=1, show_default=True),
    click.option(
        "--ntasks-per-node",
        type=click.IntRange(1, MAX_TASKS_PER_NODE),
        help="Default: ceil(ntasks / nodes), which is 1 for the default single task.",
    ),
    click.option(
        "--gres",
        default="",
        # Written without its gres/ prefix: sbatch 22.05 refuses --gres=gres/gpu:N.
        callback=_form(
            f"(?:{GRES})?",
            "is not in Slurm's GRES form; pass gpu:N or gpu:TYPE:N (for example gpu:4 or "
            "gpu:h100:4, optionally with gres/ first), or leave it out",
        ),
        help="gpu:N or gpu:TYPE:N (a gres/ prefix is accepted and left out); empty means no "
        "#SBATCH --gres line.",
    ),
    click.option("--docker-image", required=True, callback=_image),
    click.option("--container-mounts", required=True, callback=_non_empty),
    click.option(
        "--container-name",
        callback=_form(
            "[^/]*",
            "contains a '/', which pyxis cannot name a container with; use '_' or '-' instead",
        ),
        help="Default: <model-name>_<subcommand>.",
    ),
    click.option("--container-workdir", callback=_ABSOLUTE, help="Default: --project-path."),
    click.option("--project-path", required=True, callback=_ABSOLUTE),
    click.option(
        "--mpi",
        default="none",
        show_default=True,
        callback=_form(
            MPI_PLUGIN,
            "is not a Slurm MPI plugin; pass none, pmi2, pmix, pmix_v<N> (for example pmix_v4) "
            "or cray_shasta",
        ),
        help="srun --mpi plugin; 'none' means no --mpi.",
    ),
    click.option("--llm-models-root", default=DEFAULT_MODELS_ROOT, show_default=True),
    click.option("--output", help="Write the script here (mode 0755) instead of stdout."),
)


def common_options(command: Callable[..., None]) -> Callable[..., None]:
    """The flags every subcommand takes, in the order ``--help`` lists them."""
    return functools.reduce(lambda cmd, option: option(cmd), reversed(COMMON_OPTIONS), command)


def _emit(subcommand: str, workflow: Workflow, opts: Opts, *, private: bool = False) -> None:
    """Resolve the shared flags, build the tree, render it and write it out."""
    check_counts(opts["nodes"], opts["ntasks"], nodes_field="--nodes", ntasks_field="--ntasks")
    if not opts["log_dir"]:
        if subcommand not in ("bench", "eval"):
            raise BuildError(f"--log-dir is required for {subcommand}; pass --log-dir <directory>")
        clock: Clock = click.get_current_context().obj or default_clock
        stamp = clock().strftime("%Y%m%d_%H%M%S")
        opts["log_dir"] = (
            f"{opts['project_path'].rstrip('/')}/work_dirs/{opts['model_name']}_{stamp}"
        )
    nodes, ntasks, per_node = opts["nodes"], opts["ntasks"], opts["ntasks_per_node"]
    requested = None if opts["mpi"] == "none" else opts["mpi"]
    mpi = workflow.mpi_rule.plugin(ntasks=ntasks, requested=requested)
    if per_node is None:
        per_node = -(-ntasks // nodes)
    elif ntasks > nodes * per_node:
        raise BuildError(
            f"--ntasks {ntasks} does not fit --nodes {nodes} x --ntasks-per-node {per_node}; "
            f"raise --ntasks-per-node to {-(-ntasks // nodes)} or leave it out"
        )
    shape = TaskShape(nodes, ntasks, per_node, mpi)
    for name, value in opts.items():
        # Every value but a command ends up on a #SBATCH line, in an srun option or a path.
        if name not in _MULTI_LINE and isinstance(value, str) and ("\n" in value or "\r" in value):
            raise BuildError(
                f"--{name.replace('_', '-')} must be a single line; remove the newline"
            )
    model = opts["model_name"]
    check_log_name_part("--model-name", model)
    check_log_name_part("--log-dir", opts["log_dir"])
    allocation = SlurmAllocation(
        job_name=workflow.job_name(model),
        partition=opts["partition"],
        account=opts["account"],
        time_limit=opts["time_limit"],
        tasks=shape,
        gres=opts["gres"].removeprefix("gres/") or None,
        log_dir=opts["log_dir"],
    )
    container = Container(
        image=enroot_form(opts["docker_image"]),
        name=opts["container_name"] or f"{model}_{subcommand}",
        mounts=tuple(opts["container_mounts"].split(",")),
        workdir=opts["container_workdir"] or opts["project_path"],
        project=opts["project_path"],
    )
    setup = JobSetup(
        allocation.job_name,
        container,
        models_root=opts["llm_models_root"],
        allocation=allocation,
        header=(f"Generated by scriptbuilder {__version__} ({PROG} {subcommand}).",),
    )
    builder = JobBuilder(SCENARIOS[LocalSlurm.name], workflow, shape, setup)
    _write(opts, builder.render(), private=private, files=workflow.extra_files())


def _write(
    opts: Opts, text: str, *, private: bool, files: tuple[tuple[str, str], ...] = ()
) -> None:
    """The log folder (``--output`` may lie in it) with the job's ``files`` (name, text),
    then the script to ``--output`` (0700 when it carries a secret) or standard output;
    a failure leaves the earlier file, and no folder this run made."""
    output = opts["output"]
    if output and os.path.isdir(output):
        exc = OSError(errno.EISDIR, os.strerror(errno.EISDIR))
        raise write_error(exc, "write the script to", "--output", output, "name a file")
    local_dir = opts["local_log_dir"] or opts["log_dir"]
    ancestor = os.path.abspath(local_dir)
    while not os.path.lexists(ancestor):
        ancestor = os.path.dirname(ancestor)
    try:
        os.makedirs(local_dir, exist_ok=True)
    except OSError as exc:
        label = "--local-log-dir" if opts["local_log_dir"] else "--log-dir"
        fix = "" if exc.errno == errno.ENOSPC else f"make {ancestor} a writable folder"
        raise write_error(exc, "create", label, local_dir, fix) from None
    try:
        for name, content in files:
            try:
                write_atomic(os.path.join(local_dir, name), content, 0o644)
            except OSError as exc:
                raise write_error(exc, f"write {name} into", "--log-dir", local_dir) from None
        if not output:
            write_out(text)
            return
        try:
            write_atomic(output, text, 0o700 if private else 0o755)
        except OSError as exc:
            folder = os.path.dirname(os.path.abspath(output))
            what = f"write {os.path.basename(output)} into"
            raise write_error(exc, what, "--output folder", folder) from None
    except OSError:
        if ancestor != os.path.abspath(local_dir):  # a folder made here: leave nothing in it
            for name, _ in files:
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(local_dir, name))
        _remove_made(os.path.abspath(local_dir), ancestor)
        raise
    write_out(f"Wrote {output}\n", err=True)


def _remove_made(folder: str, existing: str) -> None:
    """Remove ``folder`` and its parents up to ``existing`` (which was there before),
    each only when empty."""
    while folder != existing and folder.startswith(existing):
        try:
            os.rmdir(folder)
        except OSError:
            return
        folder = os.path.dirname(folder)


@click.group(
    cls=Group,
    name=PROG,
    usage_hint=True,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, prog_name=PROG)
def cli() -> None:
    """Generate a Slurm batch script for a TensorRT-LLM test job."""


@cli.command("pytest")
@common_options
@command_option("--test-cmd", check_command, "The pytest command line, run as written.")
@click.option(
    "--record-tests",
    is_flag=True,
    help="Record each test's start and outcome in <log-dir>/<job>_<jobid>.tests.jsonl "
    "(a pytest plugin written into the log folder; scriptbuilder results reads them).",
)
def pytest_command(record_tests: bool, **opts: Any) -> None:
    """A pytest run (single node)."""
    _emit("pytest", PytestWorkflow(opts["test_cmd"], record_tests=record_tests), opts)


@cli.command("custom")
@common_options
@command_option("--custom-cmd", check_custom_command, "The command line, run once per task.")
@click.option(
    "--run-script",
    help="Run script executed in the step (default: the one shipped with "
    "scriptbuilder, inlined in the batch script).",
)
@click.option(
    "--custom-env",
    default="",
    callback=_checked(check_custom_env),
    help="Shell assignments applied before the command.",
)
@click.option("--custom-workdir", help="Default: the container workdir.")
def custom_command(**opts: Any) -> None:
    """A custom command."""
    workflow = CustomWorkflow(
        opts["custom_cmd"],
        custom_env=opts["custom_env"],
        custom_workdir=opts["custom_workdir"] or opts["container_workdir"] or opts["project_path"],
        project_path=opts["project_path"],
        run_script=opts["run_script"],
    )
    secret = secret_assignments(opts["custom_env"], DEFAULT_SECRET_PATTERNS)
    _emit("custom", workflow, opts, private=bool(secret))


@cli.command("bench")
@common_options
@command_option(
    "--bench-cmd",
    check_command,
    "trtllm-bench command; a top-level '&&' separates the prepare-dataset step.",
)
def bench_command(**opts: Any) -> None:
    """A trtllm-bench run (prepare-dataset step, then the benchmark)."""
    try:
        prepare, run = split_prepare(opts["bench_cmd"], "--bench-cmd")
    except CommandArgError as exc:
        raise BuildError(str(exc)) from None
    _emit("bench", BenchWorkflow(prepare, run), opts)


@cli.command("eval")
@common_options
@command_option("--eval-cmd", check_command, "trtllm-eval command line, run as written.")
def eval_command(**opts: Any) -> None:
    """A trtllm-eval run (single node)."""
    if opts["nodes"] > 1:
        raise BuildError(
            f"eval is single-node only (--nodes {opts['nodes']}); use --nodes 1, or the "
            "perf-sanity path for multi-node accuracy runs"
        )
    _emit("eval", EvalWorkflow(opts["eval_cmd"]), opts)


def main(argv: Sequence[str] | None = None, *, clock: Clock | None = None) -> None:
    """Console entry point. ``clock`` replaces the wall clock (tests)."""
    cli.main(list(argv) if argv is not None else sys.argv[1:], PROG, obj=clock)


if __name__ == "__main__":
    main()
