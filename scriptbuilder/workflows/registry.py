"""The workflows a request's ``workflow_type`` names, one registry. A new workflow is
its module and one entry here (and its value in the request model's ``WorkflowType``);
its rules are members of its class (:class:`~scriptbuilder.workflows.base.Workflow`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scriptbuilder.workflows.base import Workflow
from scriptbuilder.workflows.bench import BenchWorkflow
from scriptbuilder.workflows.custom import CustomWorkflow
from scriptbuilder.workflows.eval import EvalWorkflow
from scriptbuilder.workflows.pytest_workflow import PytestWorkflow

if TYPE_CHECKING:
    from scriptbuilder.models.request import BuildRequest

#: The workflows run as a script of steps, by ``kind`` (the perf-sanity path, the
#: checkout's submit.py, is :mod:`scriptbuilder.workflows.perf_sanity`).
WORKFLOWS: dict[str, type[Workflow]] = {
    w.kind: w for w in (PytestWorkflow, EvalWorkflow, BenchWorkflow, CustomWorkflow)
}


def check_commands(req: BuildRequest) -> None:
    """The checks of the workflow ``req`` names (its commands, read by ``bash -n``)."""
    if (workflow := WORKFLOWS.get(req.workflow_type)) is not None:
        workflow.check_request(req)
