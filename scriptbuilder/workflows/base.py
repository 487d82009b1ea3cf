"""The abstract workflow: what runs inside the container, step by step."""

from __future__ import annotations

from abc import ABC, abstractmethod

from scriptbuilder.job.plan import Step, TaskShape, WorkflowPlan
from scriptbuilder.script.tree import Command, If, Run, Statement, Var

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import ClassVar

LLMAPI_LAUNCH = "trtllm-llmapi-launch"

# Step bodies are immutable trees built once: every job shares them, so each is
# rendered once per process (see scriptbuilder.script.render).
_RUN_USER_COMMAND: tuple[Statement, ...] = (Run(Command.of("eval", Var("1"))),)
_RUN_UNDER_LAUNCHER: tuple[Statement, ...] = (
    Run(Command.of(LLMAPI_LAUNCH, "bash", "-c", Var("1"), "workload")),
)
INSTALL_BODY: tuple[Statement, ...] = (
    Run(Command.of("set", "-e")),
    Run(Command.of("pip", "install", "-e", ".")),
    Run(Command.of("pip", "install", "-r", "requirements-dev.txt")),
)


def run_user_command() -> tuple[Statement, ...]:
    """Run ``$1`` as a shell command line, exactly as the user wrote it."""
    return _RUN_USER_COMMAND


def run_user_command_under_launcher() -> tuple[Statement, ...]:
    """Run ``$1`` as a shell command line under ``trtllm-llmapi-launch``."""
    return _RUN_UNDER_LAUNCHER


def starts_with_launcher(command: str) -> bool:
    first = command.lstrip().split(maxsplit=1)
    return bool(first) and first[0].rsplit("/", 1)[-1] == LLMAPI_LAUNCH


class Workflow(ABC):
    """A kind of workload. Subclasses say what to install and which steps to run.

    ``kind`` is the ``workflow_type`` written to ``job_spec.json``;
    ``job_suffix`` names the job (``<model>_<suffix>``) and the script.
    """

    kind: ClassVar[str]
    job_suffix: ClassVar[str]
    script_suffix: ClassVar[str] = ".slurm"
    success_patterns: ClassVar[tuple[str, ...]] = ("passed",)
    failure_patterns: ClassVar[tuple[str, ...]] = ("FAILED", "Error", "AssertionError")

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

    def plan(self, shape: TaskShape) -> WorkflowPlan:
        return WorkflowPlan(
            env=self.env(), steps=(self.install_step(shape), *self.workload_steps(shape))
        )


def single_node_without_mpi(shape: TaskShape) -> bool:
    return shape.nodes == 1 and shape.mpi is None


def optional_requirements(path: str) -> If:
    """``pip install -r <path>`` when the file exists."""
    return If(Command.of("[", "-f", path, "]"), (Run(Command.of("pip", "install", "-r", path)),))
