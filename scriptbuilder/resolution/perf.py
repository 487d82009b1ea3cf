"""Category 4: perf-sanity and benchmark configs through the repository's submit.py.

Resolution checks everything submit.py would trip on and builds its argument
list; running it is left to :meth:`scriptbuilder.api.BuiltJob.write`, since
submit.py writes the launch script itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from scriptbuilder.errors import BuildError
from scriptbuilder.resolution.context import Context
from scriptbuilder.resolution.mounts import Mounts
from scriptbuilder.resolution.slurm_params import SlurmTarget

if TYPE_CHECKING:
    from scriptbuilder.workflows.perf_sanity import PerfPreflight

#: How long submit.py may run before the build gives up on it.
SUBMIT_TIMEOUT = 300.0
#: The last lines of jenkins/scripts/perf/{aggregated,disaggregated}/slurm_launch_draft.sh
#: (the body submit.py appends to the launch script) when every step succeeded.
AGGR_SUCCESS = "Aggregated test completed successfully"
DISAGG_SUCCESS = "Disagg server and benchmark completed successfully"


@dataclass(frozen=True)
class SubmitPlan:
    """A perf-sanity or benchmark run: the checkout's submit.py, run with ``argv``,
    writes the launch script ``launch_sh`` (the builder makes no script tree).

    ``workflow_type`` is what the caller asked for (``perf_sanity``, ``benchmark``,
    or ``pytest`` for a perf-sanity test command) and goes to ``job_spec.json``.
    """

    workflow_type: str
    model_name: str
    job_name: str
    image: str
    argv: tuple[str, ...]
    checked: PerfPreflight
    #: A derived config to write before submit.py runs (eval fallback): path and text.
    derived_config: tuple[Path, str] | None
    launch_sh: Path
    #: The launch script's ``#SBATCH --output`` (``<work-dir>/slurm-%j.out``).
    log_file_pattern: str
    output_log: Path
    #: What the launch script's log says when it fails (its own lines start ``Error: ``).
    failure_patterns: ClassVar[tuple[str, ...]] = ("FAILED", "Error", "AssertionError")

    @property
    def success_patterns(self) -> tuple[str, ...]:
        """The line TensorRT-LLM's launch script prints last on success: the
        disaggregated one for disaggregated runs, else the aggregated one
        (``ctx_only`` runs a disaggregated config on the aggregated path)."""
        checked = self.checked
        if checked.config.disaggregated and checked.benchmark_mode != "ctx_only":
            return (DISAGG_SUCCESS,)
        return (AGGR_SUCCESS,)


def wants_perf_path(ctx: Context) -> bool:
    """perf_sanity/benchmark, or a pytest request that is a perf-sanity run."""
    req = ctx.request
    if req.workflow_type in ("perf_sanity", "benchmark"):
        return True
    if req.workflow_type != "pytest":
        return False
    from scriptbuilder.inputs.tests import is_perf_sanity  # test inspection: pytest only

    return bool(req.perf_config_yaml) or is_perf_sanity(req.test_cmd or "")


# The orchestrator's form: ``pytest .../test_perf_sanity.py -v "test_e2e[aggr-...]"``.
_BARE_CASE = re.compile(r"test_\w+\[[^\[\]]+\]")


def _bare_case(test_cmd: str) -> str | None:
    """A ``test_e2e[...]`` word standing on its own (the test named apart from its file)."""
    from scriptbuilder.inputs.shellwords import ShellSyntaxError, tokenize

    try:
        tokens = tokenize(test_cmd)
    except ShellSyntaxError:
        return None
    return next((t.value for t in tokens if _BARE_CASE.fullmatch(t.value)), None)


def _perf_test_id(ctx: Context, test_cmd: str) -> str | None:
    """The perf-sanity test id: ``file.py::test_e2e[...]``, or the file and a separate
    ``test_e2e[...]`` word joined into that form."""
    from scriptbuilder.inputs.tests import parse_test_ids

    for test_id in parse_test_ids(test_cmd):
        if "test_perf_sanity" not in test_id.path:
            continue
        bare = None
        if test_id.cls is None and test_id.func is None and test_id.case is None:
            bare = _bare_case(test_cmd)
        if bare is None:
            return str(test_id)
        return ctx.trace.chose(
            "perf test id", f"{test_id.path}::{bare}", f"{bare} given after the file in test_cmd"
        )
    return None


def _benchmark_mode(ctx: Context, checked: PerfPreflight, test_list: str | None) -> str | None:
    """``perf_benchmark_mode`` for submit.py's ``--benchmark-mode`` (config files only:
    a test id carries its own mode)."""
    mode = ctx.request.perf_benchmark_mode
    if mode is None:
        return None
    if test_list is not None:
        if mode != (checked.benchmark_mode or "e2e"):
            raise BuildError(
                f"perf_benchmark_mode {mode!r} disagrees with test id {test_list!r}, which "
                "names its own mode; drop perf_benchmark_mode or change the test id"
            )
        return None
    if not checked.config.disaggregated:
        raise BuildError(
            f"perf_benchmark_mode {mode!r} applies to disaggregated configs, and "
            f"{checked.config_path.name} is aggregated; drop perf_benchmark_mode"
        )
    return ctx.trace.chose("benchmark mode", mode, "perf_benchmark_mode input")


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
    test_list = None if eval_fallback else _perf_test_id(ctx, req.test_cmd or "")
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
        benchmark_mode=req.perf_benchmark_mode,
        repo_root=req.repo_root,
    )
    benchmark_mode = _benchmark_mode(ctx, checked, test_list)
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
        benchmark_mode=benchmark_mode,
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
        # Only the procedure's flags: submit.py picks --mpi itself per step (pmix for
        # multi-GPU aggregated runs and disaggregated workers, none for one GPU);
        # --mpi-type would force one plugin onto every step, install included.
        mpi_type=None,
    )
    argv = submit_argv(request)
    trace.chose("submit.py", " ".join(argv[1:2]), "repo_root/jenkins/scripts/perf/local")
    return SubmitPlan(
        workflow_type=req.workflow_type,
        model_name=model,
        job_name=request.job_name,
        image=image,
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
