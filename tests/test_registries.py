"""The registries of workflows and scenarios: what a request may name, and the
rules a workflow states as members of its class."""

from __future__ import annotations

from dataclasses import dataclass
from typing import get_args

import pytest

from scriptbuilder.errors import BuildError
from scriptbuilder.models.request import BuildRequest, ExecutionScenario, WorkflowType
from scriptbuilder.scenarios.registry import SCENARIOS
from scriptbuilder.script.plan import Step, TaskShape
from scriptbuilder.workflows.base import Workflow
from scriptbuilder.workflows.registry import WORKFLOWS


def test_a_request_names_registered_scenarios_and_workflows() -> None:
    assert set(SCENARIOS) == set(get_args(ExecutionScenario))
    assert set(WORKFLOWS) <= set(get_args(WorkflowType))
    assert all(w.kind == kind for kind, w in WORKFLOWS.items())


def test_a_workflow_without_its_rules_fails_when_defined() -> None:
    with pytest.raises(TypeError, match="does not state command_fields, mpi_rule"):

        @dataclass(frozen=True)
        class Forgetful(Workflow):
            kind = "forgetful"
            job_suffix = "forgetful"

            def workload_steps(self, shape: TaskShape) -> tuple[Step, ...]:
                return ()


@pytest.mark.parametrize("kind", list(WORKFLOWS))
def test_every_command_field_is_read_by_bash(kind: str) -> None:
    """Each command field a workflow names is a request field, and a command bash
    cannot read is refused before anything is resolved."""
    workflow = WORKFLOWS[kind]
    assert workflow.command_fields
    for field in workflow.command_fields:
        req = BuildRequest.model_validate(
            {"workflow_type": kind, "work_dir": "/w", field: "echo 'unclosed"}
        )
        with pytest.raises(BuildError, match=field):
            workflow.check_request(req)
