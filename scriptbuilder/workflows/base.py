"""The abstract workflow: what runs inside the container, step by step."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

from scriptbuilder.inputs.command_check import MAX_ARG_BYTES
from scriptbuilder.resolution.context import Context
from scriptbuilder.resolution.mpi import clears_mpi_env
from scriptbuilder.resolution.workloads import Placement
from scriptbuilder.script.plan import Step, TaskShape, WorkflowPlan
from scriptbuilder.script.render import render_command
from scriptbuilder.script.tree import Command, If, Run, ScriptText, Statement, Var, Word

LLMAPI_LAUNCH = "trtllm-llmapi-launch"

#: The shell variable a step gathers the user's command in; it is unset before
#: the command runs, so the command sees the shell as it would at a prompt.
COMMAND_VAR = "__sb_command"
# ``printf -v`` joins the pieces (the step's arguments, see command_args),
# ``set --`` leaves the command no positional parameters of its own (``$#`` is
# 0), and eval runs the command after the variable holding it is unset.
_RUN_USER_COMMAND: tuple[Statement, ...] = (
    Run(Command.of("printf", "-v", COMMAND_VAR, "%s", Word.of(Var("@")))),
    Run(Command.of("set", "--")),
    Run(Command.of("eval", Word.of(f"unset -v {COMMAND_VAR}; ", Var(COMMAND_VAR)))),
)
_LAUNCH_WORDS = (LLMAPI_LAUNCH, "bash", "-c")
_RUN_UNDER_LAUNCHER: tuple[Statement, ...] = (
    Run(Command.of(*_LAUNCH_WORDS, ScriptText(_RUN_USER_COMMAND), "workload", Var("@"))),
)
INSTALL_BODY: tuple[Statement, ...] = (
    Run(Command.of("set", "-e")),
    Run(Command.of("pip", "install", "-e", ".")),
    Run(Command.of("pip", "install", "-r", "requirements-dev.txt")),
)


def starts_with_launcher(command: str) -> bool:
    first = command.lstrip().split(maxsplit=1)
    return bool(first) and first[0].rsplit("/", 1)[-1] == LLMAPI_LAUNCH


def command_args(command: str) -> tuple[str, ...]:
    """``command`` as step arguments: pieces of at most :data:`MAX_ARG_BYTES`
    bytes each, which the step joins again, so a command longer than one
    argument can carry still reaches the shell whole."""
    if len(command) * 4 <= MAX_ARG_BYTES:  # no UTF-8 character takes more than 4 bytes
        return (command,)
    data = command.encode("utf-8", "surrogatepass")
    pieces = []
    start = 0
    while start < len(data):
        end = min(start + MAX_ARG_BYTES, len(data))
        while end < len(data) and 0x80 <= data[end] < 0xC0:  # not inside a character
            end -= 1
        pieces.append(data[start:end].decode("utf-8", "surrogatepass"))
        start = end
    return tuple(pieces)


def user_command_step(
    label: str, command: str, shape: TaskShape, *, launcher: bool = False
) -> Step:
    """A step running ``command`` as a shell command line, exactly as the user wrote
    it (passed as the step's arguments, see :func:`command_args`; it runs with no
    positional parameters); with ``launcher``, under ``trtllm-llmapi-launch`` when
    the step has several tasks and the command does not start with it already."""
    wrap = launcher and shape.ntasks > 1 and not starts_with_launcher(command)
    shown = render_command(Command.of(*_LAUNCH_WORDS, command, "workload")) if wrap else command
    return Step(
        label=label,
        body=_RUN_UNDER_LAUNCHER if wrap else _RUN_USER_COMMAND,
        shape=shape,
        args=command_args(command),
        clear_mpi_env=clears_mpi_env(shape),
        command=shown,
    )


@dataclass(frozen=True)
class Workload:
    """A resolved workflow and the size of its job."""

    workflow: Workflow
    model_name: str
    required_devices: int
    node_count: int
    shape: TaskShape
    #: The tests run only with exactly ``required_devices`` GPUs visible.
    exact_devices: bool = False
    #: Where ``required_devices`` came from (pytest: the deciding evidence).
    devices_source: str | None = None


class Workflow(ABC):
    """A kind of workload. Subclasses resolve it from a request (:meth:`resolve`)
    and say what to install and which steps to run.

    ``kind`` is the ``workflow_type`` written to ``job_spec.json``;
    ``job_suffix`` names the job (``<model>_<suffix>``) and the script.
    """

    kind: ClassVar[str]
    job_suffix: ClassVar[str]
    script_suffix: ClassVar[str] = ".slurm"
    success_patterns: ClassVar[tuple[str, ...]] = ("passed",)
    failure_patterns: ClassVar[tuple[str, ...]] = ("FAILED", "ERROR")

    @classmethod
    @abstractmethod
    def resolve(cls, ctx: Context, place: Placement) -> Workload:
        """The workflow of ``ctx.request`` and its job size (procedure Step 3)."""

    def extra_files(self) -> tuple[tuple[str, str], ...]:
        """Files the job needs in work_dir besides the script: (name, text)."""
        return ()

    def job_name(self, model_name: str) -> str:
        return f"{model_name}_{self.job_suffix}"

    def script_name(self, model_name: str) -> str:
        return f"{model_name}_{self.job_suffix}{self.script_suffix}"

    def install_body(self) -> tuple[Statement, ...]:
        """Installs the project in the container before the workload runs."""
        return INSTALL_BODY

    def install_step(self, shape: TaskShape) -> Step:
        """One install task on every node, in the same named container."""
        per_node = TaskShape(nodes=shape.nodes, ntasks=shape.nodes, ntasks_per_node=1)
        return Step(label="install the project", body=self.install_body(), shape=per_node)

    def env(self) -> tuple[tuple[str, str], ...]:
        """Variables exported in the batch script before the steps."""
        return ()

    @abstractmethod
    def workload_steps(self, shape: TaskShape) -> tuple[Step, ...]:
        """The steps after the install step."""

    def plan(self, shape: TaskShape, *, install: bool = True) -> WorkflowPlan:
        """The exports and the steps; the install step first unless ``install`` is False
        (the image already holds the project)."""
        install_steps = (self.install_step(shape),) if install else ()
        return WorkflowPlan(env=self.env(), steps=(*install_steps, *self.workload_steps(shape)))


def optional_requirements(path: str) -> If:
    """``pip install -r <path>`` when the file exists."""
    return If(Command.of("[", "-f", path, "]"), (Run(Command.of("pip", "install", "-r", path)),))
