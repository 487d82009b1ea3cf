"""Category 4: perf-sanity and benchmark configs through the repository's submit.py.

Resolution checks everything submit.py would trip on and builds its argument
list; running it is left to :meth:`scriptbuilder.api.BuiltJob.write`, since
submit.py writes the launch script itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from scriptbuilder.errors import BuildError
from scriptbuilder.resolution.context import Context
from scriptbuilder.resolution.mounts import Mounts
from scriptbuilder.resolution.slurm_params import SlurmTarget

if TYPE_CHECKING:
    from scriptbuilder.workflows.perf_sanity import PerfJobKind, PerfPreflight

#: How long submit.py may run before the build gives up on it.
SUBMIT_TIMEOUT = 300.0


@dataclass(frozen=True)
class SubmitPlan:
    """A perf-sanity or benchmark run: the checkout's submit.py, run with ``argv``,
    writes the launch script ``launch_sh`` (the builder makes no script tree).

    ``workflow_type`` is what the caller asked for (``perf_sanity``, ``benchmark``,
    or ``pytest`` for a perf-sanity test command) and goes to ``job_spec.json``.
    """

    workflow_type: str
    #: ``perf`` for a perf-sanity test id, ``benchmark`` for a config file.
    job_kind: PerfJobKind
    model_name: str
    job_name: str
    image: str
    mpi_type: str | None
    argv: tuple[str, ...]
    checked: PerfPreflight
    #: A derived config to write before submit.py runs (eval fallback): path and text.
    derived_config: tuple[Path, str] | None
    launch_sh: Path
    #: The launch script's ``#SBATCH --output`` (``<work-dir>/slurm-%j.out``).
    log_file_pattern: str
    output_log: Path
    #: What the launch script's log says.
    success_patterns: ClassVar[tuple[str, ...]] = ("8_done_",)
    failure_patterns: ClassVar[tuple[str, ...]] = ("FAILED", "Error", "AssertionError")


def wants_perf_path(ctx: Context) -> bool:
    """perf_sanity/benchmark, or a pytest request that is a perf-sanity run."""
    from scriptbuilder.inputs.tests import is_perf_sanity

    req = ctx.request
    if req.workflow_type in ("perf_sanity", "benchmark"):
        return True
    if req.workflow_type != "pytest":
        return False
    return bool(req.perf_config_yaml) or is_perf_sanity(req.test_cmd or "")


def _perf_test_id(test_cmd: str) -> str | None:
    from scriptbuilder.inputs.tests import parse_test_ids

    for test_id in parse_test_ids(test_cmd):
        if "test_perf_sanity" in test_id.path:
            return str(test_id)
    return None


def _model_name(ctx: Context, checked: PerfPreflight) -> str:
    if ctx.request.model_name:
        return ctx.trace.chose("model_name", ctx.request.model_name, "model_name input")
    metadata = checked.config.raw.get("metadata")
    name = metadata.get("model_name") if isinstance(metadata, dict) else None
    if isinstance(name, str) and name:
        return ctx.trace.chose("model_name", name, "metadata.model_name of the config YAML")
    return ctx.trace.chose("model_name", checked.config_path.stem, "config YAML file name")


def resolve_perf(
    ctx: Context,
    image: str,
    mounts: Mounts,
    target: SlurmTarget,
    *,
    eval_fallback: bool = False,
    model_name: str | None = None,
) -> SubmitPlan:
    from scriptbuilder.workflows.perf_sanity import (
        LAUNCH_LOG_PATTERN,
        LAUNCH_SCRIPT_NAME,
        SUBMIT_LOG_NAME,
        SubmitRequest,
        perf_job_kind,
        perf_job_name,
        preflight,
        submit_argv,
        submit_py_path,
    )

    req, trace = ctx.request, ctx.trace
    if not req.repo_root:
        raise BuildError(
            "repo_root is required for the perf-sanity path (it holds "
            "jenkins/scripts/perf/local/submit.py); pass repo_root"
        )
    submit_py = submit_py_path(req.repo_root)
    test_list = None if eval_fallback else _perf_test_id(req.test_cmd or "")
    config = req.perf_config_yaml
    if test_list is None and not config:
        why = (
            "eval world size exceeds one node, so the eval runs as an accuracy benchmark "
            "and needs a base config"
            if eval_fallback
            else "perf-sanity needs a config"
        )
        raise BuildError(f"perf_config_yaml is required: {why}; pass perf_config_yaml")
    checked = preflight(
        submit_py,
        test_list=test_list,
        config_file=None if test_list else config,
        test_name=req.perf_test_name,
        repo_root=req.repo_root,
    )
    kind = perf_job_kind(test_list)
    model = model_name or _model_name(ctx, checked)
    work_dir = Path(req.work_dir)
    derived: tuple[Path, str] | None = None
    config_arg = None if test_list else str(checked.config_path)
    if eval_fallback:
        from scriptbuilder.inputs.perf_config import derive_accuracy_config

        derived_path = work_dir / f"{model}_accuracy.yaml"
        derived = (derived_path, derive_accuracy_config(checked.config_path))
        config_arg = str(derived_path)
        trace.chose(
            "perf config",
            str(derived_path),
            "perf_config_yaml with accuracy.enable_accuracy_test: true (eval fallback)",
        )
    launch_sh = work_dir / LAUNCH_SCRIPT_NAME
    remote = ctx.is_remote
    request = SubmitRequest(
        submit_py=submit_py,
        test_list=test_list,
        config_file=config_arg,
        test_name=None if test_list else req.perf_test_name,
        benchmark_mode=None,
        partition=target.partition,
        account=target.account,
        job_name=perf_job_name(model, kind),
        image=image,
        mounts=mounts.joined,
        work_dir=(req.remote_work_dir or "") if remote else req.work_dir,
        llm_src=mounts.project,
        llm_models_root=mounts.models_root,
        launch_sh=launch_sh,
        time=target.time_limit,
        mpi_type=target.pmix_preferred,
    )
    argv = submit_argv(request)
    trace.chose("submit.py", " ".join(argv[1:2]), "repo_root/jenkins/scripts/perf/local")
    return SubmitPlan(
        workflow_type=req.workflow_type,
        job_kind=kind,
        model_name=model,
        job_name=request.job_name,
        image=image,
        mpi_type=request.mpi_type,
        argv=tuple(argv),
        checked=checked,
        derived_config=derived,
        launch_sh=launch_sh,
        log_file_pattern=LAUNCH_LOG_PATTERN,
        output_log=work_dir / SUBMIT_LOG_NAME,
    )


def topology_of(plan: SubmitPlan) -> tuple[int, int, int]:
    """Devices, nodes and GPUs per node, from the config YAML (submit.py's source)."""
    checked = plan.checked
    from scriptbuilder.workflows.perf_sanity import perf_topology

    topo = perf_topology(
        checked.config, server_name=checked.server_name, benchmark_mode=checked.benchmark_mode
    )
    return topo.devices, topo.nodes, checked.config.gpus_per_node
