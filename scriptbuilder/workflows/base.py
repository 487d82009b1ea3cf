"""The abstract workflow: what runs inside the container, step by step."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from scriptbuilder.inputs.command_check import MAX_ARG_BYTES, check_command
from scriptbuilder.resolution.context import Context
from scriptbuilder.resolution.mpi import MpiRule, clears_mpi_env
from scriptbuilder.resolution.workloads import Placement
from scriptbuilder.script.plan import Step, TaskShape, WorkflowPlan
from scriptbuilder.script.render import render_command
from scriptbuilder.script.tree import Command, Run, ScriptText, Statement, Var, Word

if TYPE_CHECKING:
    from scriptbuilder.models.request import BuildRequest

LLMAPI_LAUNCH = "trtllm-llmapi-launch"
COMMAND_VAR = "__sb_command"
_LAUNCH_WORDS = (LLMAPI_LAUNCH, "bash", "-c")


def _run_user_command() -> tuple[Statement, ...]:
    """``printf -v`` joins the pieces (see :func:`command_args`), ``set --`` leaves the
    command no positional parameters of its own, and eval runs the command after the
    variable holding it is unset, so it sees the shell as it would at a prompt."""
    return (
        Run(Command.of("printf", "-v", COMMAND_VAR, "%s", Word.of(Var("@")))),
        Run(Command.of("set", "--")),
        Run(Command.of("eval", Word.of(f"unset -v {COMMAND_VAR}; ", Var(COMMAND_VAR)))),
    )


def _install_project() -> tuple[Statement, ...]:
    """The project installed in the checkout (``set -e``: the first failure stops it)."""
    return (
        Run(Command.of("set", "-e")),
        Run(Command.of("pip", "install", "-e", ".")),
        Run(Command.of("pip", "install", "-r", "requirements-dev.txt")),
    )


def command_args(command: str) -> tuple[str, ...]:
    """``command`` in pieces of at most :data:`MAX_ARG_BYTES` bytes, which the step
    joins again, so a command longer than one argument can carry reaches the shell."""
    data = command.encode("utf-8", "surrogatepass")
    pieces = []
    start = 0
    while start < len(data):
        end = min(start + MAX_ARG_BYTES, len(data))
        while end < len(data) and 0x80 <= data[end] < 0xC0:  # not inside a character
            end -= 1
        pieces.append(data[start:end].decode("utf-8", "surrogatepass"))
        start = end
    return tuple(pieces) or (command,)


def user_command_step(
    label: str, command: str, shape: TaskShape, *, launcher: bool = False
) -> Step:
    """A step running ``command`` exactly as the user wrote it; with ``launcher``,
    under ``trtllm-llmapi-launch`` when the step has several tasks and the command
    does not start with it already."""
    first = command.lstrip().split(maxsplit=1)
    launched = bool(first) and first[0].rsplit("/", 1)[-1] == LLMAPI_LAUNCH
    wrap = launcher and shape.ntasks > 1 and not launched
    shown = render_command(Command.of(*_LAUNCH_WORDS, command, "workload")) if wrap else command
    body = _run_user_command()
    if wrap:
        body = (Run(Command.of(*_LAUNCH_WORDS, ScriptText(body), "workload", Var("@"))),)
    return Step(label, body, shape, command_args(command), clears_mpi_env(shape), shown)


@dataclass(frozen=True)
class Workload:
    workflow: Workflow
    model_name: str
    required_devices: int
    node_count: int
    shape: TaskShape
    exact_devices: bool = False  # the tests run only with exactly these GPUs visible
    devices_source: str | None = None  # pytest: the deciding evidence


@dataclass(frozen=True)
class Overflow:
    """A workload one node cannot hold, run as a benchmark through submit.py instead:
    the message where submit.py cannot run, the warning where it does, and the
    model (asked only then)."""

    refusal: str
    warning: str
    model_name: Callable[[], str]


#: The rules every workflow class states (a class lacking one fails when it is defined).
RULES = ("kind", "job_suffix", "command_fields", "mpi_rule")


class Workflow(ABC):
    """A kind of workload, resolved from a request (:meth:`resolve`), and its rules.
    ``kind`` is the ``workflow_type`` of the request and of ``job_spec.json``;
    ``job_suffix`` names the job (``<model>_<suffix>``) and the script;
    ``command_fields`` are the request fields holding the command lines it runs,
    which :meth:`check_request` reads with ``bash -n`` before anything is resolved;
    ``mpi_rule`` gives its workload step's ``srun --mpi``."""

    kind: ClassVar[str]
    job_suffix: ClassVar[str]
    command_fields: ClassVar[tuple[str, ...]]
    mpi_rule: ClassVar[MpiRule]
    success_patterns: ClassVar[tuple[str, ...]] = ("passed",)
    failure_patterns: ClassVar[tuple[str, ...]] = ("FAILED", "ERROR")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if missing := [name for name in RULES if not hasattr(cls, name)]:
            raise TypeError(
                f"workflow {cls.__name__} does not state {', '.join(missing)}: every workflow "
                f"names its {', '.join(RULES)} (see scriptbuilder.workflows.base.Workflow)"
            )

    @classmethod
    def check_request(cls, req: BuildRequest) -> None:
        """Refuse a command bash could not run (a missing one is :meth:`resolve`'s to report)."""
        for field in cls.command_fields:
            if value := getattr(req, field):
                check_command(field, value)

    @classmethod
    @abstractmethod
    def resolve(cls, ctx: Context, place: Placement) -> Workload:
        """The workflow of ``ctx.request`` and its job size (procedure Step 3)."""

    @classmethod
    def overflow(cls, ctx: Context, place: Placement) -> Overflow | None:
        """Whether the request's workload runs through submit.py instead of a script
        (None: it runs as a script, or :meth:`resolve` refuses it)."""
        return None

    def install_body(self) -> tuple[Statement, ...]:
        """What the install step runs in the checkout."""
        return _install_project()

    #: A step of the workload records each test it runs (job_spec.json's ``test_records``
    #: says where; :mod:`scriptbuilder.scenarios.recording`).
    record_tests: bool = False

    def extra_files(self) -> tuple[tuple[str, str], ...]:
        """(name, text) of the files the job needs in work_dir besides the script."""
        return ()

    def job_name(self, model_name: str) -> str:
        return f"{model_name}_{self.job_suffix}"

    def env(self) -> tuple[tuple[str, str], ...]:
        return ()

    @abstractmethod
    def workload_steps(self, shape: TaskShape) -> tuple[Step, ...]: ...

    def plan(self, shape: TaskShape, *, install: bool = True) -> WorkflowPlan:
        """The exports and the steps; first one install task on every node unless
        ``install`` is False (the image already holds the project)."""
        per_node = TaskShape(nodes=shape.nodes, ntasks=shape.nodes, ntasks_per_node=1)
        install_step = Step("install the project", self.install_body(), per_node, in_project=True)
        steps = (install_step,) if install else ()
        return WorkflowPlan(env=self.env(), steps=(*steps, *self.workload_steps(shape)))
