"""A request's :class:`~scriptbuilder.outputs.built_job.BuiltJob` on its route: the
script (composed by :class:`~scriptbuilder.job.builder.JobBuilder`) or the submit.py
run, ``job_spec.json`` (procedure Step 5) and the report (Step 6)."""

from __future__ import annotations

import posixpath
from typing import Any

from scriptbuilder.inputs.earlier_job_spec import JOB_SPEC
from scriptbuilder.inputs.image_ref import docker_form
from scriptbuilder.job.builder import JobBuilder
from scriptbuilder.job.route import Route, ScriptRoute, SubmitRoute
from scriptbuilder.outputs.built_job import BuiltJob, OutputFile, SubmitRun
from scriptbuilder.outputs.job_spec import job_spec_for, job_spec_json, with_hashes
from scriptbuilder.resolution.context import Context
from scriptbuilder.resolution.secrets import mask, mask_data, request_secrets
from scriptbuilder.scenarios.base import GENERATOR, Scenario, ScriptJob
from scriptbuilder.scenarios.slurm import check_counts_fit, slurm_params
from scriptbuilder.script.render import render
from scriptbuilder.workflows.perf_sanity import LAUNCH_LOG_PATTERN, SUBMIT_TIMEOUT


def assemble(ctx: Context, route: Route) -> BuiltJob:
    """The job of ``ctx.request`` on its ``route``."""
    match route:
        case ScriptRoute():
            return _script_job(ctx, route)
        case SubmitRoute():
            return _submit_job(ctx, route)


def _job_spec(
    ctx: Context,
    scenario: Scenario,
    image: str,
    *,
    kind: str,
    patterns: tuple[tuple[str, ...], tuple[str, ...]],
    model_name: str,
    devices: int,
    nodes: int,
    devices_source: str | None = None,
    **fields: Any,
) -> Any:
    """The job spec of a job of workflow ``kind`` (its success and failure
    ``patterns``) running ``devices`` GPUs on ``nodes`` nodes."""
    shared = dict(
        generator=GENERATOR,
        container_image=docker_form(image),
        workflow_type=kind,
        model_name=model_name,
        docker_image=image,
        required_devices=devices,
        required_devices_source=devices_source,
        node_count=nodes,
        success_patterns=list(patterns[0]),
        failure_patterns=list(patterns[1]),
    )
    return job_spec_for(ctx, scenario, **{**shared, **fields})


def _install(ctx: Context) -> bool:
    if ctx.request.skip_install:
        ctx.trace.chose("install step", "left out", "skip_install: true")
        return False
    ctx.trace.chose("install step", "pip install -e . first", "default (skip_install not true)")
    return True


def _built(
    ctx: Context,
    spec: dict[str, Any],
    script_path: str,
    text: str,
    files: tuple[OutputFile, ...],
    submit: SubmitRun | None = None,
) -> BuiltJob:
    """job_spec.json comes last; a script carrying a secret value is its owner's only."""
    secrets = request_secrets(ctx.request)
    if text:
        mode = 0o700 if mask(text, secrets) != text else 0o755
        files = (OutputFile(script_path, text, mode), *files)
    spec = with_hashes(mask_data(spec, secrets), script_path, {f.path: f.text for f in files})
    spec_path = posixpath.join(ctx.request.work_dir, JOB_SPEC)
    spec_text = job_spec_json(spec)
    trace = ctx.trace.record()
    report = [f"Generated: {spec_path}", f"Script: {script_path}"]
    report += [f"Workflow: {spec['workflow_type']}", f"Model: {spec['model_name']}"]
    report += [f"Docker image: {spec['docker_image']}"]
    report += [f"Devices: {spec['required_devices']} GPUs across {spec['node_count']} nodes"]
    report += [f"Warning: {w}" for w in spec["warnings"]]
    warnings = tuple(mask(w, secrets) for w in trace.warnings) if secrets else trace.warnings
    return BuiltJob(
        request=ctx.request,
        job_spec_data=spec,
        job_spec_json=spec_text,
        script_name=posixpath.basename(script_path),
        script_text=text,
        report="\n".join(report) + "\n",
        warnings=warnings,
        trace=trace,
        files=(*files, OutputFile(spec_path, spec_text, 0o644)),
        submit=submit,
        secrets=secrets,
    )


def _script_job(ctx: Context, route: ScriptRoute) -> BuiltJob:
    """The script the scenario lays the workload's steps into."""
    scenario, place, workload = route.scenario, route.place, route.workload
    workflow = workload.workflow
    setup = scenario.setup(ctx, place, workload)
    tree = JobBuilder(scenario, workflow, workload.shape, setup, _install(ctx)).build()
    job = ScriptJob(place, workload, setup, tree)
    extra = tuple(
        OutputFile(posixpath.join(ctx.request.work_dir, name), content, 0o755)
        for name, content in workflow.extra_files()
    )
    spec = _job_spec(
        ctx,
        scenario,
        place.image,
        job_name=setup.job_name,
        kind=workflow.kind,
        patterns=(workflow.success_patterns, workflow.failure_patterns),
        model_name=workload.model_name,
        devices=workload.required_devices,
        nodes=workload.node_count,
        devices_source=workload.devices_source,
        extra_files=[f.path for f in extra],
        test_records=scenario.test_records(setup) if workflow.record_tests else None,
        **scenario.spec_fields(ctx, job),
    )
    return _built(ctx, spec, scenario.script_path(ctx, setup), render(tree), extra)


def _submit_job(ctx: Context, route: SubmitRoute) -> BuiltJob:
    req, job, image, target = ctx.request, route.job, route.place.image, route.target
    shape = job.shape
    if req.skip_install:
        ctx.trace.warn(
            "skip_install: true is not honoured on the perf-sanity path: submit.py has no "
            "option to leave out its install step, so its launch script still installs"
        )
    check_counts_fit(ctx, target, job.node_count, job.required_devices)
    gpn = shape.ntasks_per_node
    spec = _job_spec(
        ctx,
        route.scenario,
        image,
        job_name=job.name,
        kind=job.workflow_type,
        patterns=(job.launch_success, job.failure_patterns),
        model_name=job.model_name,
        devices=job.required_devices,
        nodes=job.node_count,
        script_path=str(job.launch_sh),
        script_name=job.launch_sh.name,
        log_file_pattern=LAUNCH_LOG_PATTERN,
        extra_files=[],
        slurm_params=slurm_params(target, shape, gpn, f"gpu:{gpn}" if target.gpu_gres else None),
    )
    inputs = tuple(OutputFile(path, text, 0o644) for path, text in job.inputs)
    run = SubmitRun(job.argv, job.cwd, job.output_log, SUBMIT_TIMEOUT, inputs, job.login)
    return _built(ctx, spec, str(job.launch_sh), "", (), run)
