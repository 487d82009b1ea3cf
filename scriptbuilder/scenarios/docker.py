"""Local Docker: one ``docker run`` that installs the project and runs the steps
(no ``-t``: the executor pipes its output to a log, where docker refuses a TTY)."""

from __future__ import annotations

from dataclasses import dataclass

from scriptbuilder.inputs.command_check import MAX_ARG_BYTES
from scriptbuilder.scenarios.base import PRINT_LINE, Scenario, step_banner
from scriptbuilder.script import tree
from scriptbuilder.script.plan import TaskShape, WorkflowPlan

CAPABILITIES = ("SYS_PTRACE", "SYS_ADMIN", "DAC_READ_SEARCH")
_ERREXIT_ON, _ERREXIT_OFF = (tree.Run(tree.Command.of("set", flag)) for flag in ("-e", "+e"))


@dataclass(frozen=True)
class DockerContainer:
    image: str
    name: str
    volumes: tuple[str, ...]
    workdir: str
    models_root: str


def _option(name: str, value: str | None = None) -> tree.SrunOption:
    return tree.SrunOption(name, None if value is None else tree.Word.of(value))


def _payload(plan: WorkflowPlan, secrets: tuple[str, ...]) -> tree.Command:
    """``bash -c`` running each step in a subshell of its own, in turn, with the
    step's arguments as its positional parameters, after printing its banner;
    the first failure ends the run (``set -e`` is off inside a step, as at a prompt)."""
    body: list[tree.Statement] = [_ERREXIT_ON]
    args: list[str] = []

    def ref(value: str) -> tree.Word:
        args.append(value)
        return tree.Word.of(tree.Var(str(len(args))))

    for step in plan.steps:  # a banner is one argument: cut to what one can hold
        banner = step_banner(step, secrets).encode()[:MAX_ARG_BYTES].decode(errors="ignore")
        body.append(tree.Run(tree.Command.of("printf", PRINT_LINE, ref(banner))))
        refs = tuple(ref(value) for value in step.args)
        own = step.body[:1] == (_ERREXIT_ON,)  # a step that sets -e itself (the install)
        body.append(tree.Subshell(step.body if own else (_ERREXIT_OFF, *step.body), refs or None))
    return tree.Command.of("bash", "-c", tree.ScriptText(tuple(body)), "job", *args)


@dataclass(frozen=True)
class Docker(Scenario):
    container: DockerContainer
    header: tuple[str, ...] = ()
    #: Values shown as ``***`` in the step banners.
    secrets: tuple[str, ...] = ()
    #: Variables passed from the host's environment (``--env NAME``).
    passthrough_env: tuple[str, ...] = ()
    name: str = "local_docker"

    def step_shape(self, shape: TaskShape) -> TaskShape:
        return TaskShape()  # one process in the container: no MPI, no per-task steps

    def assemble(self, plan: WorkflowPlan) -> tree.ShellScript:
        c = self.container
        options = [
            _option("--rm"),
            _option("--network", "host"),
            _option("--ipc", "host"),
            _option("--runtime", "nvidia"),
            _option("--gpus", "all"),
            *(_option("--cap-add", cap) for cap in CAPABILITIES),
            _option("--security-opt", "seccomp=unconfined"),
            _option("--env", f"LLM_MODELS_ROOT={c.models_root}"),
            *(_option("--env", f"{name}={value}") for name, value in plan.env),
            *(_option("--env", name) for name in self.passthrough_env),
            *(_option("--volume", volume) for volume in c.volumes),
            _option("--name", c.name),
            _option("--workdir", c.workdir),
        ]
        run = tree.DockerRun(tuple(options), tree.Word.of(c.image), _payload(plan, self.secrets))
        return tree.ShellScript(body=(*(tree.Comment(line) for line in self.header), run))
