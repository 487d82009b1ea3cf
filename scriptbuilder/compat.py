"""Drop-in replacement for ``build_slurm_script.py``.

Same subcommands, flags and defaults; the difference is that every value
reaches the script quoted by construction, failing steps still print the
closing line, and ``--bench-cmd`` is split only at a top-level ``&&``.

Kept cheap to start: click and the script tree only, no pydantic or yaml.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any, NoReturn

import click

from scriptbuilder import __version__
from scriptbuilder.errors import BuildError
from scriptbuilder.job import Container, SlurmAllocation, TaskShape
from scriptbuilder.job_builder import JobBuilder
from scriptbuilder.output import write_script
from scriptbuilder.scenarios.slurm import LocalSlurm, check_log_name_part
from scriptbuilder.workflows.base import Workflow

PROG = "build_slurm_script"
DEFAULT_MODELS_ROOT = "/scratch.trt_llm_data/llm-models/"
_PMIX = re.compile(r"pmix(_v\d+)?\Z")

Clock = Callable[[], datetime]


def default_clock() -> datetime:
    """Local time, or ``SOURCE_DATE_EPOCH`` (UTC) when set, for reproducible output."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch:
        return datetime.fromtimestamp(int(epoch), tz=timezone.utc)
    return datetime.now()


def pmix_plugin(mpi: str | None) -> str:
    """The ``--mpi`` value when it names a pmix plugin, else bare ``pmix``."""
    return mpi if mpi and _PMIX.match(mpi) else "pmix"


def _one_line(flag: str, value: str | None) -> None:
    if value is not None and ("\n" in value or "\r" in value):
        raise BuildError(f"{flag} must be a single line; remove the newline")


def _common_options(func: Callable[..., Any]) -> Callable[..., Any]:
    opts = [
        click.option("--model-name", required=True, help="Job name prefix."),
        click.option(
            "--log-dir",
            default=None,
            help="Directory of the #SBATCH --output/--error files (required for pytest "
            "and custom; bench/eval default to <project-path>/work_dirs/<model>_<time>).",
        ),
        click.option(
            "--local-log-dir",
            default=None,
            help="Directory created locally instead of --log-dir (remote runs).",
        ),
        click.option("--partition", required=True),
        click.option("--account", required=True),
        click.option("--time-limit", default="02:00:00", show_default=True),
        click.option("--nodes", type=click.IntRange(min=1), default=1, show_default=True),
        click.option("--ntasks", type=click.IntRange(min=1), default=1, show_default=True),
        click.option(
            "--ntasks-per-node",
            type=click.IntRange(min=1),
            default=None,
            help="Default: ceil(ntasks / nodes), which is 1 for the default single task.",
        ),
        click.option("--gres", default="", help="Empty means no #SBATCH --gres line."),
        click.option("--docker-image", required=True),
        click.option("--container-mounts", required=True),
        click.option("--container-name", default=None, help="Default: <model-name>_<subcommand>."),
        click.option("--container-workdir", default=None, help="Default: --project-path."),
        click.option("--project-path", required=True),
        click.option(
            "--mpi",
            default="none",
            show_default=True,
            help="srun --mpi plugin; 'none' means no --mpi.",
        ),
        click.option("--llm-models-root", default=DEFAULT_MODELS_ROOT, show_default=True),
        click.option(
            "--output",
            default=None,
            help="Write the script here (mode 0755) instead of stdout.",
        ),
    ]
    for opt in reversed(opts):
        func = opt(func)
    return func


def _emit(subcommand: str, workflow: Workflow, opts: dict[str, Any], shape: TaskShape) -> None:
    """Resolve the shared flags, build the tree, render it and write it out."""
    model = opts["model_name"]
    for flag in ("model_name", "partition", "account", "time_limit", "gres", "log_dir"):
        _one_line("--" + flag.replace("_", "-"), opts.get(flag))
    check_log_name_part("--model-name", model)
    check_log_name_part("--log-dir", opts["log_dir"])
    allocation = SlurmAllocation(
        job_name=workflow.job_name(model),
        partition=opts["partition"],
        account=opts["account"],
        time_limit=opts["time_limit"],
        nodes=opts["nodes"],
        ntasks=opts["ntasks"],
        ntasks_per_node=opts["ntasks_per_node"],
        gres=opts["gres"] or None,
        log_dir=opts["log_dir"],
    )
    container = Container(
        image=opts["docker_image"],
        name=opts["container_name"] or f"{model}_{subcommand}",
        mounts=opts["container_mounts"],
        workdir=opts["container_workdir"] or opts["project_path"],
    )
    scenario = LocalSlurm(
        allocation,
        container,
        exports=(("LLM_MODELS_ROOT", opts["llm_models_root"]),),
        header=(f"Generated by scriptbuilder {__version__} ({PROG} {subcommand}).",),
    )
    text = JobBuilder(scenario, workflow, shape).render()
    local_dir = opts["local_log_dir"] or opts["log_dir"]
    os.makedirs(local_dir, exist_ok=True)
    if opts["output"]:
        write_script(opts["output"], text)
        click.echo(f"Wrote {opts['output']}", err=True)
    else:
        click.echo(text, nl=False)


def _require_log_dir(opts: dict[str, Any], subcommand: str) -> None:
    if not opts["log_dir"]:
        raise BuildError(f"--log-dir is required for {subcommand}; pass --log-dir <directory>")


def _default_log_dir(opts: dict[str, Any]) -> None:
    if not opts["log_dir"]:
        clock: Clock = click.get_current_context().obj or default_clock
        stamp = clock().strftime("%Y%m%d_%H%M%S")
        project = opts["project_path"].rstrip("/")
        opts["log_dir"] = f"{project}/work_dirs/{opts['model_name']}_{stamp}"


def _explicit_mpi(opts: dict[str, Any]) -> str | None:
    return None if opts["mpi"] == "none" else opts["mpi"]


def _shape(opts: dict[str, Any], mpi: str | None) -> TaskShape:
    """The job's task layout; fills in ``--ntasks-per-node`` when not given."""
    nodes, ntasks = opts["nodes"], opts["ntasks"]
    if opts["ntasks_per_node"] is None:
        opts["ntasks_per_node"] = -(-ntasks // nodes)
    elif ntasks > nodes * opts["ntasks_per_node"]:
        raise BuildError(
            f"--ntasks {ntasks} does not fit --nodes {nodes} x --ntasks-per-node "
            f"{opts['ntasks_per_node']}; raise --ntasks-per-node to {-(-ntasks // nodes)} "
            "or leave it out"
        )
    return TaskShape(nodes, ntasks, opts["ntasks_per_node"], mpi)


@click.group(
    name=PROG,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, prog_name=PROG)
def cli() -> None:
    """Generate a Slurm batch script for a TensorRT-LLM test job."""


@cli.command("pytest")
@_common_options
@click.option("--test-cmd", required=True, help="The pytest command line, run as written.")
def pytest_subcommand(test_cmd: str, **opts: Any) -> None:
    """A pytest run (single node)."""
    from scriptbuilder.workflows.pytest_workflow import PytestWorkflow

    _require_log_dir(opts, "pytest")
    _emit("pytest", PytestWorkflow(test_cmd), opts, _shape(opts, _explicit_mpi(opts)))


@cli.command("custom")
@_common_options
@click.option("--custom-cmd", required=True, help="The command line, run once per task.")
@click.option(
    "--run-script",
    default=None,
    help="Run script executed in the step (default: the one shipped with scriptbuilder, "
    "inlined in the batch script).",
)
@click.option("--custom-env", default="", help="Shell assignments applied before the command.")
@click.option("--custom-workdir", default=None, help="Default: the container workdir.")
def custom_subcommand(
    custom_cmd: str,
    run_script: str | None,
    custom_env: str,
    custom_workdir: str | None,
    **opts: Any,
) -> None:
    """A custom command."""
    from scriptbuilder.workflows.custom import CustomWorkflow

    _require_log_dir(opts, "custom")
    workdir = opts["container_workdir"] or opts["project_path"]
    workflow = CustomWorkflow(
        custom_cmd,
        custom_env=custom_env,
        custom_workdir=custom_workdir or workdir,
        project_path=opts["project_path"],
        run_script=run_script,
    )
    _emit("custom", workflow, opts, _shape(opts, _explicit_mpi(opts)))


@cli.command("bench")
@_common_options
@click.option(
    "--bench-cmd",
    required=True,
    help="trtllm-bench command; a top-level '&&' separates the prepare-dataset step.",
)
def bench_subcommand(bench_cmd: str, **opts: Any) -> None:
    """A trtllm-bench run (prepare-dataset step, then the benchmark)."""
    from scriptbuilder.shellwords import ShellSyntaxError, split_top_level
    from scriptbuilder.workflows.bench import BenchWorkflow

    try:
        parts = split_top_level(bench_cmd, "&&")
    except ShellSyntaxError as exc:
        raise BuildError(f"--bench-cmd: {exc}") from None
    if "" in parts and len(parts) > 1:
        raise BuildError(
            "--bench-cmd has nothing on one side of its top-level '&&'; "
            "pass '<prepare-dataset command> && <benchmark command>'"
        )
    if len(parts) > 2:
        raise BuildError(
            f"--bench-cmd has {len(parts) - 1} top-level '&&'; at most one is allowed "
            "(<prepare-dataset command> && <benchmark command>)"
        )
    prep, run = (parts[0], parts[1]) if len(parts) == 2 else ("", parts[0])
    _default_log_dir(opts)
    mpi = pmix_plugin(_explicit_mpi(opts)) if opts["ntasks"] > 1 else None
    _emit("bench", BenchWorkflow(prep, run), opts, _shape(opts, mpi))


@cli.command("eval")
@_common_options
@click.option("--eval-cmd", required=True, help="trtllm-eval command line, run as written.")
def eval_subcommand(eval_cmd: str, **opts: Any) -> None:
    """A trtllm-eval run (single node)."""
    from scriptbuilder.workflows.eval import EvalWorkflow

    if opts["nodes"] > 1:
        raise BuildError(
            f"eval is single-node only (--nodes {opts['nodes']}); use --nodes 1, or the "
            "perf-sanity path for multi-node accuracy runs"
        )
    _default_log_dir(opts)
    mpi = pmix_plugin(_explicit_mpi(opts)) if opts["ntasks"] > 1 else None
    _emit("eval", EvalWorkflow(eval_cmd), opts, _shape(opts, mpi))


def _fail(message: str, code: int = 2) -> NoReturn:
    click.echo(f"{PROG}: error: {message}", err=True)
    sys.exit(code)


def main(argv: Sequence[str] | None = None, *, clock: Clock | None = None) -> None:
    """Console entry point. ``clock`` replaces the wall clock (tests)."""
    try:
        rc = cli.main(
            args=list(argv) if argv is not None else None,
            obj=clock,
            prog_name=PROG,
            standalone_mode=False,
        )
        if isinstance(rc, int) and rc:
            sys.exit(rc)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        _fail("aborted", 1)
    except click.UsageError as exc:
        hint = f" (see '{PROG} {exc.ctx.info_name} --help')" if exc.ctx and exc.ctx.parent else ""
        _fail(exc.format_message().replace("\n", " ") + hint)
    except click.ClickException as exc:
        _fail(exc.format_message().replace("\n", " "))
    except BuildError as exc:
        _fail(str(exc))
    except OSError as exc:
        _fail(f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), 1)


if __name__ == "__main__":
    main()
