"""Extending the builder: a workflow added through the public registry alone builds
a script under every scenario (README, "Extending")."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from scriptbuilder.api import build, load_request
from scriptbuilder.errors import BuildError
from scriptbuilder.resolution import workloads
from scriptbuilder.resolution.context import Context
from scriptbuilder.resolution.mpi import MpiRule
from scriptbuilder.resolution.workloads import Placement
from scriptbuilder.scenarios.registry import SCENARIOS
from scriptbuilder.script.plan import Step, TaskShape
from scriptbuilder.workflows.base import Workflow, Workload, user_command_step
from scriptbuilder.workflows.registry import WORKFLOWS
from tests.build_env import FIXED_CLOCK, BuildEnv


@dataclass(frozen=True)
class ToyWorkflow(Workflow):
    """Says hello with the request's custom_cmd, on one GPU."""

    kind = "toy"
    job_suffix = "toy"
    command_fields = ("custom_cmd",)
    mpi_rule = MpiRule("never", "toy: no --mpi")
    success_patterns = ("hello",)

    greeting: str

    @classmethod
    def resolve(cls, ctx: Context, place: Placement) -> Workload:
        greeting = workloads.require(ctx.request.custom_cmd, "custom_cmd", cls.kind)
        shape = workloads.workload_shape(ctx, place, cls.mpi_rule, 1, 1)
        return Workload(cls(greeting), workloads.model_name(ctx, None, ""), 1, 1, shape)

    def workload_steps(self, shape: TaskShape) -> tuple[Step, ...]:
        return (user_command_step("say hello", self.greeting, shape),)


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_a_toy_workflow_builds_from_the_registry_alone(
    build_env: BuildEnv, monkeypatch: pytest.MonkeyPatch, scenario: str
) -> None:
    monkeypatch.setitem(WORKFLOWS, ToyWorkflow.kind, ToyWorkflow)
    fields = {"execution_scenario": scenario, "custom_cmd": "echo hello", "model_name": "m"}
    # The request model lists the workflow types a request may name: a real workflow
    # adds its own there; the toy takes a checked request's place.
    req = load_request(build_env.request("custom", **fields))
    req = req.model_copy(update={"workflow_type": ToyWorkflow.kind})
    environ = {"HOME": build_env.home}
    job = build(req, environ=environ, machine=lambda: "x86_64", clock=lambda: FIXED_CLOCK)
    assert "==> say hello: echo hello" in job.script_text
    assert job.script_name in {"m_toy.slurm", "docker_cmd.sh"}
    assert job.job_spec_data["workflow_type"] == "toy"
    assert job.job_spec_data["success_patterns"] == ["hello"]


def test_a_toy_command_is_read_by_bash(
    build_env: BuildEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its command field is checked before anything is resolved, as every workflow's."""
    monkeypatch.setitem(WORKFLOWS, ToyWorkflow.kind, ToyWorkflow)
    req = load_request(build_env.request("custom", custom_cmd="echo 'hello", model_name="m"))
    with pytest.raises(BuildError, match=r"custom_cmd .* is not a command bash can run"):
        build(req.model_copy(update={"workflow_type": ToyWorkflow.kind}))
