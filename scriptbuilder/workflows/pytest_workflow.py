"""Pytest: one step running the test command (always a single node)."""

from __future__ import annotations

import posixpath
from dataclasses import KW_ONLY, dataclass, replace
from pathlib import Path

from scriptbuilder.errors import BuildError
from scriptbuilder.inputs.tests import InspectResult, inspect_tests
from scriptbuilder.resolution import workloads
from scriptbuilder.resolution.context import Context
from scriptbuilder.resolution.mpi import MpiRule
from scriptbuilder.resolution.workloads import Placement
from scriptbuilder.script.plan import Step, TaskShape
from scriptbuilder.script.render import render_inline
from scriptbuilder.script.tree import Command, Export, Run, Statement, Word
from scriptbuilder.workflows.base import Workflow, Workload, user_command_step

#: The pytest plugin a recording step loads (``-p``), shipped into the job's folder
#: (:mod:`scriptbuilder.scenarios.recording` says where and how it is loaded).
PLUGIN_MODULE = "sb_test_records"
PACKAGED_PLUGIN = Path(__file__).resolve().parent.parent / "data" / f"{PLUGIN_MODULE}.py"


def _devices(ctx: Context, found: InspectResult) -> tuple[int, bool, str]:
    req, trace = ctx.request, ctx.trace
    given = req.required_devices if found.unresolved else None  # an explicit count wins
    if found.requirement is not None and (given or 0) <= found.requirement.devices:
        need = found.requirement
        for devices, piece in need.evidence:
            trace.chose(
                "GPU evidence", devices, piece + (" (decides)" if piece == need.source else "")
            )
        devices = trace.chose("required_devices", need.devices, need.source)
        if need.exact:
            trace.chose("exact GPUs", devices, f"the test skips unless it sees exactly {devices}")
        return devices, need.exact, need.source
    rule = "required_devices input" if req.required_devices else "default"
    return trace.chose("required_devices", req.required_devices or 1, rule), False, rule


@dataclass(frozen=True)
class PytestWorkflow(Workflow):
    """``workdir``: where the step runs (``cd`` first) when that is not the
    container's working directory; ``visible_devices``: the ``CUDA_VISIBLE_DEVICES``
    the step exports when the tests need an exact GPU count nobody else enforces;
    ``record_tests``: the step records each test's start and outcome
    (:mod:`scriptbuilder.scenarios.recording`), shipping the plugin that does it."""

    kind = "pytest"
    job_suffix = "auto_test"
    command_fields = ("test_cmd",)
    mpi_rule = MpiRule("never", "pytest: no --mpi (always single-node)")

    test_cmd: str
    _: KW_ONLY
    workdir: str | None = None
    visible_devices: str | None = None
    record_tests: bool = False

    @classmethod
    def resolve(cls, ctx: Context, place: Placement) -> Workload:
        req, trace, mounts = ctx.request, ctx.trace, place.mounts
        test_cmd = workloads.require(req.test_cmd, "test_cmd", "pytest")
        found = inspect_tests(test_cmd, req.repo_root, mounts.project, ctx.read_test_stages)
        for warning in found.warnings:
            trace.warn(warning)
        for missing in found.missing:
            if not req.allow_missing_tests:
                raise BuildError(
                    f"test_cmd: {missing}, so pytest would exit with 'file or directory not found' "
                    "after the queue wait; fix the test id (or pass allow_missing_tests: true)"
                )
            trace.warn(f"{missing} (allow_missing_tests)")
        for line in found.unresolved:
            if req.required_devices is None and not req.allow_missing_tests:
                raise BuildError(
                    f"test_cmd: {line}, so the GPUs it needs are not known; fix the selection, "
                    "or set required_devices to the count it needs (allow_missing_tests: true "
                    "goes on with required_devices or 1)"
                )
            given = "required_devices" if req.required_devices else "allow_missing_tests"
            trace.warn(f"{line}; its GPU count is not known from the source ({given})")
        workdir = None
        if found.workdir is not None:
            workdir = trace.chose(
                "test_workdir", posixpath.join(mounts.project, found.workdir), found.workdir_reason
            )
        devices, exact, source = _devices(ctx, found)
        limit = place.node_gpus
        if limit is not None and devices > limit:
            raise BuildError(
                f"required_devices = {devices} exceeds the {limit} GPUs per node of {place.where}, "
                "and pytest does not support multi-node execution; choose a partition with "
                "more GPUs per node or a test that needs fewer"
            )
        workloads.check_limit(devices, "pytest")
        if req.node_count is not None and req.node_count > 1:
            raise BuildError(
                f"node_count = {req.node_count}, but pytest is always single-node; "
                "pass node_count 1"
            )
        visible = None
        if exact and not place.allocates_gpus:
            visible = trace.chose(
                "visible GPUs",
                ",".join(str(i) for i in range(devices)),
                f"exactly {devices} GPUs, and the scheduler does not hand them out: "
                "the test step sees only these",
            )
        name = workloads.model_name(ctx, None, "")
        trace.chose("nodes/ntasks", "1/1", "pytest: single node, one task")
        shape = workloads.workload_shape(ctx, place, cls.mpi_rule, 1, 1)
        workflow = cls(test_cmd, workdir=workdir, visible_devices=visible, record_tests=True)
        return Workload(workflow, name, devices, 1, shape, exact, source)

    def extra_files(self) -> tuple[tuple[str, str], ...]:
        if not self.record_tests:
            return ()
        return ((f"{PLUGIN_MODULE}.py", PACKAGED_PLUGIN.read_text(encoding="utf-8")),)

    def workload_steps(self, shape: TaskShape) -> tuple[Step, ...]:
        step = user_command_step("run the tests", self.test_cmd, shape)
        step = replace(step, records=self.record_tests)
        before: list[Statement] = []
        if self.visible_devices is not None:
            before.append(Export("CUDA_VISIBLE_DEVICES", Word.of(self.visible_devices)))
        if self.workdir is not None:
            before.append(Run(Command.of("cd", self.workdir)))
        if before:
            shown = f"{render_inline(tuple(before))}; {step.command}"
            step = replace(step, body=(*before, *step.body), command=shown)
        return (step,)
