"""Drop-in replacement for ``build_slurm_script.py``.

Same subcommands, flags and defaults; the difference is that every value
reaches the script quoted by construction, failing steps still print the
closing line, and ``--bench-cmd`` is split only at a top-level ``&&``.

Kept cheap to start, because it runs once per job (often in a loop): no
pydantic or yaml, and click only when it is needed. The flags are declared
once, in ``COMMANDS``; click builds the command line interface from that
table. A well-formed call (a subcommand, then ``--flag value`` or
``--flag=value`` pairs naming each of its flags at most once, every required
flag present, counts written as plain positive integers) is read straight from
the table, which gives the values click would give. Anything else (help,
``--version``, an unknown or repeated flag, a missing value, shell completion)
goes through click, so usage errors and help read exactly as click writes
them. Output goes through :func:`scriptbuilder.cli.console.echo`, which is
``click.echo`` without the import in the common case.
"""

from __future__ import annotations

import os
import sys

from scriptbuilder import __version__
from scriptbuilder.cli.console import echo, run_click, run_outside_click
from scriptbuilder.errors import BuildError
from scriptbuilder.inputs.image_ref import enroot_form
from scriptbuilder.job.builder import JobBuilder
from scriptbuilder.job.plan import Container, SlurmAllocation, TaskShape
from scriptbuilder.resolution.mpi import step_mpi
from scriptbuilder.scenarios.slurm import LocalSlurm, check_log_name_part

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from datetime import datetime
    from typing import Any

    import click

    from scriptbuilder.workflows.base import Workflow

    Clock = Callable[[], datetime]
    Opts = dict[str, Any]

PROG = "build_slurm_script"
DEFAULT_MODELS_ROOT = "/scratch.trt_llm_data/llm-models/"
#: Set by a shell asking click for completions.
_COMPLETE_VAR = "_BUILD_SLURM_SCRIPT_COMPLETE"


def default_clock() -> datetime:
    """Local time, or ``SOURCE_DATE_EPOCH`` (UTC) when set, for reproducible output."""
    from datetime import datetime, timezone

    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch:
        return datetime.fromtimestamp(int(epoch), tz=timezone.utc)
    return datetime.now()


# ------------------------------------------------------------------ flags


class Flag:
    """One ``--flag VALUE`` option. ``count`` flags take an integer >= 1."""

    __slots__ = ("count", "default", "dest", "help", "name", "required", "show_default")

    def __init__(
        self,
        name: str,
        *,
        required: bool = False,
        default: str | int | None = None,
        count: bool = False,
        show_default: bool = False,
        help: str | None = None,
    ) -> None:
        self.name = name
        self.dest = name[2:].replace("-", "_")
        self.required = required
        self.default = default
        self.count = count
        self.show_default = show_default
        self.help = help


class Subcommand:
    """A subcommand: its flags (common ones first), its handler and its help line."""

    __slots__ = ("by_name", "flags", "handler", "help")

    def __init__(
        self, flags: tuple[Flag, ...], handler: Callable[[Opts, Clock], None], help: str
    ) -> None:
        self.flags = flags
        self.by_name = {flag.name: flag for flag in flags}
        self.handler = handler
        self.help = help


COMMON_FLAGS = (
    Flag("--model-name", required=True, help="Job name prefix."),
    Flag(
        "--log-dir",
        help="Directory of the #SBATCH --output/--error files (required for pytest "
        "and custom; bench/eval default to <project-path>/work_dirs/<model>_<time>).",
    ),
    Flag("--local-log-dir", help="Directory created locally instead of --log-dir (remote runs)."),
    Flag("--partition", required=True),
    Flag("--account", required=True),
    Flag("--time-limit", default="02:00:00", show_default=True),
    Flag("--nodes", count=True, default=1, show_default=True),
    Flag("--ntasks", count=True, default=1, show_default=True),
    Flag(
        "--ntasks-per-node",
        count=True,
        help="Default: ceil(ntasks / nodes), which is 1 for the default single task.",
    ),
    Flag("--gres", default="", help="Empty means no #SBATCH --gres line."),
    Flag("--docker-image", required=True),
    Flag("--container-mounts", required=True),
    Flag("--container-name", help="Default: <model-name>_<subcommand>."),
    Flag("--container-workdir", help="Default: --project-path."),
    Flag("--project-path", required=True),
    Flag(
        "--mpi", default="none", show_default=True, help="srun --mpi plugin; 'none' means no --mpi."
    ),
    Flag("--llm-models-root", default=DEFAULT_MODELS_ROOT, show_default=True),
    Flag("--output", help="Write the script here (mode 0755) instead of stdout."),
)


# ------------------------------------------------------------- subcommands


def _one_line(flag: str, value: str | None) -> None:
    if value is not None and ("\n" in value or "\r" in value):
        raise BuildError(f"{flag} must be a single line; remove the newline")


def _emit(subcommand: str, workflow: Workflow, opts: Opts) -> None:
    """Resolve the shared flags, build the tree, render it and write it out."""
    requested = None if opts["mpi"] == "none" else opts["mpi"]
    mpi = step_mpi(subcommand, ntasks=opts["ntasks"], nodes=opts["nodes"], requested=requested)
    shape = _shape(opts, mpi)
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
        tasks=shape,
        gres=opts["gres"] or None,
        log_dir=opts["log_dir"],
    )
    container = Container(
        image=enroot_form(opts["docker_image"]),
        name=opts["container_name"] or f"{model}_{subcommand}",
        mounts=opts["container_mounts"],
        workdir=opts["container_workdir"] or opts["project_path"],
    )
    scenario = LocalSlurm(
        allocation,
        container,
        models_root=opts["llm_models_root"],
        header=(f"Generated by scriptbuilder {__version__} ({PROG} {subcommand}).",),
    )
    text = JobBuilder(scenario, workflow, shape).render()
    local_dir = opts["local_log_dir"] or opts["log_dir"]
    os.makedirs(local_dir, exist_ok=True)
    if opts["output"]:
        from scriptbuilder.outputs.atomic import write_script

        write_script(opts["output"], text)
        echo(f"Wrote {opts['output']}\n", err=True)
    else:
        echo(text)


def _require_log_dir(opts: Opts, subcommand: str) -> None:
    if not opts["log_dir"]:
        raise BuildError(f"--log-dir is required for {subcommand}; pass --log-dir <directory>")


def _default_log_dir(opts: Opts, clock: Clock) -> None:
    if not opts["log_dir"]:
        stamp = clock().strftime("%Y%m%d_%H%M%S")
        project = opts["project_path"].rstrip("/")
        opts["log_dir"] = f"{project}/work_dirs/{opts['model_name']}_{stamp}"


def _shape(opts: Opts, mpi: str | None) -> TaskShape:
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


def _pytest(opts: Opts, clock: Clock) -> None:
    from scriptbuilder.workflows.pytest_workflow import PytestWorkflow

    _require_log_dir(opts, "pytest")
    workflow = PytestWorkflow(opts["test_cmd"])
    _emit("pytest", workflow, opts)


def _custom(opts: Opts, clock: Clock) -> None:
    from scriptbuilder.workflows.custom import CustomWorkflow

    _require_log_dir(opts, "custom")
    workdir = opts["container_workdir"] or opts["project_path"]
    workflow = CustomWorkflow(
        opts["custom_cmd"],
        custom_env=opts["custom_env"],
        custom_workdir=opts["custom_workdir"] or workdir,
        project_path=opts["project_path"],
        run_script=opts["run_script"],
    )
    _emit("custom", workflow, opts)


def _bench(opts: Opts, clock: Clock) -> None:
    from scriptbuilder.inputs.shellwords import ShellSyntaxError, split_top_level
    from scriptbuilder.workflows.bench import BenchWorkflow

    try:
        parts = split_top_level(opts["bench_cmd"], "&&")
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
    _default_log_dir(opts, clock)
    _emit("bench", BenchWorkflow(prep, run), opts)


def _eval(opts: Opts, clock: Clock) -> None:
    from scriptbuilder.workflows.eval import EvalWorkflow

    if opts["nodes"] > 1:
        raise BuildError(
            f"eval is single-node only (--nodes {opts['nodes']}); use --nodes 1, or the "
            "perf-sanity path for multi-node accuracy runs"
        )
    _default_log_dir(opts, clock)
    _emit("eval", EvalWorkflow(opts["eval_cmd"]), opts)


COMMANDS: dict[str, Subcommand] = {
    "pytest": Subcommand(
        (
            *COMMON_FLAGS,
            Flag("--test-cmd", required=True, help="The pytest command line, run as written."),
        ),
        _pytest,
        "A pytest run (single node).",
    ),
    "custom": Subcommand(
        (
            *COMMON_FLAGS,
            Flag("--custom-cmd", required=True, help="The command line, run once per task."),
            Flag(
                "--run-script",
                help="Run script executed in the step (default: the one shipped with "
                "scriptbuilder, inlined in the batch script).",
            ),
            Flag("--custom-env", default="", help="Shell assignments applied before the command."),
            Flag("--custom-workdir", help="Default: the container workdir."),
        ),
        _custom,
        "A custom command.",
    ),
    "bench": Subcommand(
        (
            *COMMON_FLAGS,
            Flag(
                "--bench-cmd",
                required=True,
                help="trtllm-bench command; a top-level '&&' separates the prepare-dataset step.",
            ),
        ),
        _bench,
        "A trtllm-bench run (prepare-dataset step, then the benchmark).",
    ),
    "eval": Subcommand(
        (
            *COMMON_FLAGS,
            Flag("--eval-cmd", required=True, help="trtllm-eval command line, run as written."),
        ),
        _eval,
        "A trtllm-eval run (single node).",
    ),
}


# ---------------------------------------------------------------- parsing


def parse_simple(args: Sequence[str]) -> tuple[str, Opts] | None:
    """``(subcommand, values)`` for a well-formed call, the values click would pass;
    None for anything click must handle (help, errors, repeated flags...)."""
    if not args or _COMPLETE_VAR in os.environ:
        return None
    command = COMMANDS.get(args[0])
    if command is None:
        return None
    given: dict[str, str] = {}
    i, n = 1, len(args)
    while i < n:
        token = args[i]
        if token[:2] != "--" or token == "--":
            return None
        if "=" in token:
            name, value = token.split("=", 1)
            i += 1
        elif i + 1 < n:
            name, value = token, args[i + 1]
            i += 2
        else:
            return None
        flag = command.by_name.get(name)
        if flag is None or flag.dest in given:
            return None
        given[flag.dest] = value
    opts: Opts = {}
    for flag in command.flags:
        if flag.dest not in given:
            if flag.required:
                return None
            opts[flag.dest] = flag.default
            continue
        value = given[flag.dest]
        if flag.count:
            if not (value.isascii() and value.isdigit()) or int(value) < 1:
                return None
            opts[flag.dest] = int(value)
        else:
            opts[flag.dest] = value
    return args[0], opts


# ----------------------------------------------------------------- output


def _run_simple(subcommand: str, opts: Opts, clock: Clock) -> None:
    """Run a call read by :func:`parse_simple`, with the outcomes click gives."""
    run_outside_click(PROG, lambda: COMMANDS[subcommand].handler(opts, clock))


# ------------------------------------------------------------------ click


def _click_option(flag: Flag) -> click.Option:
    import click

    extra: dict[str, Any] = {}
    if not flag.required:
        extra["default"] = flag.default
    if flag.count:
        extra["type"] = click.IntRange(min=1)
    if flag.show_default:
        extra["show_default"] = True
    if flag.help is not None:
        extra["help"] = flag.help
    return click.Option([flag.name], required=flag.required, **extra)


def _click_callback(name: str) -> Callable[..., None]:
    def callback(**opts: Any) -> None:
        import click

        clock: Clock = click.get_current_context().obj or default_clock
        COMMANDS[name].handler(opts, clock)

    return callback


_CLI: list[click.Group] = []


def click_group() -> click.Group:
    """The click interface built from ``COMMANDS`` (made on first use)."""
    if _CLI:
        return _CLI[0]
    import click

    @click.group(
        name=PROG,
        context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    )
    @click.version_option(__version__, prog_name=PROG)
    def cli() -> None:
        """Generate a Slurm batch script for a TensorRT-LLM test job."""

    for name, command in COMMANDS.items():
        params: list[click.Parameter] = [_click_option(flag) for flag in command.flags]
        cli.add_command(
            click.Command(name, params=params, callback=_click_callback(name), help=command.help)
        )
    _CLI.append(cli)
    return cli


def __getattr__(name: str) -> Any:
    if name == "cli":
        return click_group()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: Sequence[str] | None = None, *, clock: Clock | None = None) -> None:
    """Console entry point. ``clock`` replaces the wall clock (tests)."""
    args = list(argv) if argv is not None else sys.argv[1:]
    simple = parse_simple(args)
    if simple is None:
        run_click(PROG, click_group(), args, clock, usage_hint=True)
    else:
        _run_simple(*simple, clock or default_clock)


if __name__ == "__main__":
    main()
