"""Perf-sanity / benchmark (procedure Category 4): the checkout's submit.py writes
the launch script.

This workflow has no steps of its own: resolution checks everything submit.py
would trip on (:func:`preflight`) and builds its argument list
(:func:`submit_argv`); :meth:`scriptbuilder.outputs.built_job.BuiltJob.write`
runs it (:mod:`scriptbuilder.outputs.submit`). submit.py derives nodes, tasks and
GPUs from the config YAML's ``hardware`` section and writes ``slurm_launch.sh``
plus ``test_list.txt``; :func:`topology` works out the same numbers for the
report and job_spec.json.

What submit.py derives from a config:

* aggregated (``server_configs[]``): a server needs ``tp * pp * cp`` GPUs
  (``tensor_parallel_size``, ``pipeline_parallel_size``, ``context_parallel_size``;
  each 1 when unset) on ``ceil(gpus / hardware.gpus_per_node)`` nodes;
* disaggregated: ``num_ctx_servers * ctx + num_gen_servers * gen`` GPUs on
  ``num_ctx_servers * ceil(ctx / gpn) + num_gen_servers * ceil(gen / gpn)`` nodes
  (server counts default to 1); ``ctx_only`` runs one ctx server, and
  ``gen_only`` with ``benchmark.mode`` containing ``gen_only_no_context`` the gen
  servers only.
"""

from __future__ import annotations

import math
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from scriptbuilder.errors import BuildError
from scriptbuilder.inputs.perf_config import (
    PerfConfig,
    PerfConfigError,
    PerfTestId,
    derive_accuracy_config,
    load_perf_config,
    parse_perf_test_id,
)
from scriptbuilder.inputs.shellwords import ShellSyntaxError, tokenize
from scriptbuilder.inputs.tests import is_perf_sanity, parse_test_ids
from scriptbuilder.resolution.context import Context
from scriptbuilder.resolution.slurm_params import DEFAULT_TIME_LIMIT
from scriptbuilder.resolution.workloads import Placement
from scriptbuilder.script.plan import Step, TaskShape
from scriptbuilder.workflows.base import Workflow, Workload

#: Where submit.py lives in a TensorRT-LLM checkout.
SUBMIT_PY_RELPATH = "jenkins/scripts/perf/local/submit.py"
#: The launch script name (procedure: ``--launch-sh <work_dir>/slurm_launch.sh``).
LAUNCH_SCRIPT_NAME = "slurm_launch.sh"
#: The ``#SBATCH --output`` submit.py writes: ``<work-dir>/slurm-%j.out``.
LAUNCH_LOG_PATTERN = "slurm-%j.out"
#: The full stdout/stderr of the submit.py run, kept in the local work dir.
SUBMIT_LOG_NAME = "submit_py.log"
#: How long submit.py may run before the build gives up on it.
SUBMIT_TIMEOUT = 300.0
#: The last lines of jenkins/scripts/perf/{aggregated,disaggregated}/slurm_launch_draft.sh
#: (the body submit.py appends to the launch script) when every step succeeded.
AGGR_SUCCESS = "Aggregated test completed successfully"
DISAGG_SUCCESS = "Disagg server and benchmark completed successfully"


@dataclass(frozen=True, kw_only=True)
class SubmitRequest:
    """The resolved inputs of one submit.py run.

    ``work_dir`` and ``llm_src`` are cluster paths for remote runs (the remote
    work dir and repo); ``launch_sh`` is always a local path.
    """

    submit_py: Path
    test_list: str | None
    config_file: str | None
    test_name: str | None
    benchmark_mode: str | None
    partition: str
    account: str
    job_name: str
    image: str
    mounts: str
    work_dir: str
    llm_src: str
    llm_models_root: str
    launch_sh: Path
    time: str = DEFAULT_TIME_LIMIT
    mpi_type: str | None = None


def _flag(name: str, value: str) -> list[str]:
    # A value starting with "-" would be read by argparse as an option.
    return [f"{name}={value}"] if value.startswith("-") else [name, value]


def submit_argv(req: SubmitRequest, python: str = sys.executable) -> list[str]:
    """The argv of the submit.py run, in the procedure's order (never a shell string)."""
    argv = [python, str(req.submit_py)]
    if req.test_list:
        argv += _flag("--test-list", req.test_list)
    elif req.config_file:
        argv += _flag("--config-file", req.config_file)
        if req.test_name:
            argv += _flag("--test-name", req.test_name)
        if req.benchmark_mode:
            argv += _flag("--benchmark-mode", req.benchmark_mode)
    else:
        raise BuildError(
            "perf-sanity needs a perf-sanity test id (test_cmd) or a config YAML"
            " (perf_config_yaml); pass one of them"
        )
    argv += _flag("--partition", req.partition)
    argv += _flag("--account", req.account)
    argv += _flag("--job-name", req.job_name)
    argv += _flag("--image", req.image)
    argv += _flag("--mounts", req.mounts)
    argv += _flag("--work-dir", req.work_dir)
    argv += _flag("--llm-src", req.llm_src)
    argv += _flag("--llm-models-root", req.llm_models_root)
    argv += _flag("--launch-sh", str(req.launch_sh))
    argv += _flag("--time", req.time)
    if req.mpi_type:
        argv += _flag("--mpi-type", req.mpi_type)
    return argv


@dataclass(frozen=True)
class PerfPreflight:
    """What :func:`preflight` found: the config, what it runs and its size (for the report)."""

    config: PerfConfig
    server_name: str | None
    benchmark_mode: str | None
    topology: Topology


def submit_py_path(repo_root: str | os.PathLike[str]) -> Path:
    """``<repo_root>/jenkins/scripts/perf/local/submit.py``."""
    return Path(repo_root) / SUBMIT_PY_RELPATH


def _repo_of(submit_py: Path) -> Path:
    parts = Path(SUBMIT_PY_RELPATH).parts
    return submit_py.parents[len(parts) - 1] if len(submit_py.parts) > len(parts) else Path(".")


def _load(path: Path, field: str) -> PerfConfig:
    try:
        return load_perf_config(path)
    except PerfConfigError as exc:
        raise BuildError(f"{field}: {exc}") from None


def _servers(config: PerfConfig) -> str:
    return ", ".join(config.server_names) or "none"


def preflight(
    submit_py: Path,
    *,
    test_list: str | None = None,
    config_file: str | os.PathLike[str] | None = None,
    test_name: str | None = None,
    benchmark_mode: str | None = None,
    repo_root: str | os.PathLike[str] | None = None,
) -> PerfPreflight:
    """Check what submit.py would trip on, as one-line :class:`BuildError` messages.

    ``repo_root`` is the local checkout whose ``tests/scripts/perf-sanity/``
    holds the config of a ``test_list`` id (default: the checkout submit.py
    sits in). ``test_list`` wins over ``config_file`` as in submit.py.
    """
    submit_py = Path(submit_py)
    root = Path(repo_root) if repo_root is not None else _repo_of(submit_py)
    if not submit_py.is_file():
        raise BuildError(
            f"{submit_py} not found: the checkout at {_repo_of(submit_py)} lacks"
            f" {SUBMIT_PY_RELPATH}; point repo_root at a TensorRT-LLM checkout that has it"
        )
    test_id: PerfTestId | None = None
    if test_list:
        dirs = [root / "tests/scripts/perf-sanity/aggregated"]
        dirs.append(root / "tests/scripts/perf-sanity/disaggregated")
        test_id = parse_perf_test_id(test_list, dirs)
        if test_id is None:
            raise BuildError(
                f"test_cmd: {test_list!r} is not a perf-sanity test id; expected"
                " perf/test_perf_sanity.py::test_e2e[aggr-<config>-<server>],"
                " [aggr-ctx_only-<config>] or [disagg-e2e|gen_only-<config>]"
            )
        path = root / test_id.config_file
        if not path.is_file():
            raise BuildError(
                f"test_cmd: test {test_id.label} needs {path}, which does not exist;"
                " check the test id or repo_root"
            )
        config = _load(path, "test_cmd")
        server, mode = test_id.server_name, test_id.mode
        if test_id.kind == "disagg" and mode is None:
            raise BuildError(
                f"test_cmd: test {test_id.label} has no benchmark mode; submit.py needs"
                " disagg-e2e-<config> or disagg-gen_only-<config>"
            )
        if test_id.kind == "aggr" and mode is None and "-" in test_id.config_stem:
            raise BuildError(
                f"test_cmd: config name {test_id.config_stem!r} contains '-', which submit.py"
                " cannot split out of an aggr test id; pass perf_config_yaml and"
                " perf_test_name instead"
            )
        if not config.disaggregated and mode != "ctx_only":
            if server is None:
                raise BuildError(
                    f"test_cmd: test {test_id.label} names no server of {path.name}"
                    f" (servers: {_servers(config)}); append -<server> to the test id"
                )
            if server not in config.server_names:
                raise BuildError(
                    f"test_cmd: server {server!r} of test {test_id.label} is not in"
                    f" {path.name} (servers: {_servers(config)}); use one of them"
                )
    elif config_file:
        path = Path(config_file)
        if not path.is_file():
            raise BuildError(
                f"perf_config_yaml: {path} does not exist; pass an existing config YAML"
            )
        config = _load(path, "perf_config_yaml")
        mode = None
        server = None
        if config.disaggregated:
            mode = benchmark_mode or "e2e"
        elif not test_name:
            raise BuildError(
                f"perf_test_name is required for the aggregated config {path.name}"
                f" (servers: {_servers(config)}); set it to one of them"
            )
        elif test_name not in config.server_names:
            raise BuildError(
                f"perf_test_name {test_name!r} is not a server in {path.name}"
                f" (servers: {_servers(config)}); use one of them"
            )
        else:
            server = test_name
    else:
        raise BuildError(
            "perf-sanity needs a perf-sanity test id (test_cmd) or a config YAML"
            " (perf_config_yaml); pass one of them"
        )
    return PerfPreflight(config, server, mode, topology(config, server, mode))


class Topology(NamedTuple):
    devices: int
    nodes: int


def _count(section: dict[str, Any], key: str, where: str, path: Path) -> int:
    value = section.get(key)
    if value is None:
        return 1
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BuildError(
            f"perf_config_yaml: {path}: {where}.{key} must be a non-negative integer, got "
            f"{value!r}; fix the config YAML"
        )
    return value


def _size(section: dict[str, Any], where: str, path: Path) -> int:
    """GPUs of one server: ``tp * pp * cp``."""
    size = 1
    for key in ("tensor_parallel_size", "pipeline_parallel_size", "context_parallel_size"):
        size *= _count(section, key, where, path)
    return size


def _mapping(value: Any, what: str, path: Path) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BuildError(f"perf_config_yaml: {path}: {what}; fix the config YAML")
    return value


def topology(config: PerfConfig, server_name: str | None, benchmark_mode: str | None) -> Topology:
    """GPUs and nodes submit.py will ask for (submit.py stays the truth).

    Aggregated: the named server; with no name, the only server or, when there
    are several, the largest. Disaggregated: see the module's description.
    """
    gpn, raw, path = config.gpus_per_node, config.raw, config.path
    if not config.disaggregated:
        servers = raw.get("server_configs")
        if not isinstance(servers, list) or not servers:
            raise BuildError(
                f"perf_config_yaml: {path}: no server_configs list (aggregated) and no "
                "worker_config.ctx/gen (disaggregated); fix the config YAML"
            )
        sizes = {}
        for i, server in enumerate(servers):
            server = _mapping(server, f"server_configs[{i}] is not a mapping", path)
            name = str(server.get("name", ""))
            sizes[name] = _size(server, f"server_configs[{name}]", path)
        # preflight made sure a named server is in the config
        devices = sizes[server_name] if server_name is not None else max(sizes.values())
        return Topology(devices, math.ceil(devices / gpn))
    hardware = raw.get("hardware") or {}
    workers = _mapping(
        raw.get("worker_config"),
        "disaggregated config without a worker_config mapping; add worker_config.ctx and "
        "worker_config.gen",
        path,
    )
    bench_mode = str((raw.get("benchmark") or {}).get("mode", ""))
    roles = {"ctx": "num_ctx_servers", "gen": "num_gen_servers"}
    if benchmark_mode == "ctx_only":
        counts = {"ctx": 1}
    else:
        counts = {role: _count(hardware, key, "hardware", path) for role, key in roles.items()}
        if benchmark_mode == "gen_only" and "gen_only_no_context" in bench_mode:
            del counts["ctx"]
    devices = nodes = 0
    for role, count in counts.items():
        if count == 0:
            continue
        worker = _mapping(
            workers.get(role),
            f"worker_config.{role} is missing or not a mapping (hardware.{roles[role]} = "
            f"{count}); add it or set {roles[role]}: 0",
            path,
        )
        per = _size(worker, f"worker_config.{role}", path)
        devices += count * per
        nodes += count * math.ceil(per / gpn)
    return Topology(devices, nodes)


# The orchestrator's form: ``pytest .../test_perf_sanity.py -v "test_e2e[aggr-...]"``.
_BARE_CASE = re.compile(r"test_\w+\[[^\[\]]+\]")


def _bare_case(test_cmd: str) -> str | None:
    """A ``test_e2e[...]`` word standing on its own (the test named apart from its file)."""
    try:
        tokens = tokenize(test_cmd)
    except ShellSyntaxError:
        return None
    return next((t.value for t in tokens if _BARE_CASE.fullmatch(t.value)), None)


def _perf_test_id(ctx: Context, test_cmd: str) -> str | None:
    """The perf-sanity test id: ``file.py::test_e2e[...]``, or the file and a separate
    ``test_e2e[...]`` word joined into that form."""
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
            f"{checked.config.path.name} is aggregated; drop perf_benchmark_mode"
        )
    return ctx.trace.chose("benchmark mode", mode, "perf_benchmark_mode input")


def _model_name(ctx: Context, checked: PerfPreflight) -> str:
    if ctx.request.model_name:
        return ctx.trace.chose("model_name", ctx.request.model_name, "model_name input")
    metadata = checked.config.raw.get("metadata")
    name = metadata.get("model_name") if isinstance(metadata, dict) else None
    if isinstance(name, str) and name:
        return ctx.trace.chose("model_name", name, "metadata.model_name of the config YAML")
    return ctx.trace.chose("model_name", checked.config.path.stem, "config YAML file name")


@dataclass(frozen=True)
class PerfSanityWorkflow(Workflow):
    """A perf-sanity test id or a config YAML: the checkout's submit.py, run with
    ``argv``, writes the launch script ``launch_sh`` (the builder makes no script
    tree). ``workflow_type`` is what the request asked for (``perf_sanity``,
    ``benchmark``, ``pytest`` for a perf-sanity test command, or ``eval`` for an
    eval wider than one node)."""

    kind = "perf_sanity"
    job_suffix = "perf"
    #: What the launch script's log says when it fails (its own lines start ``Error: ``).
    failure_patterns = ("FAILED", "Error", "AssertionError")

    workflow_type: str
    name: str
    argv: tuple[str, ...]
    checked: PerfPreflight
    #: A derived config to write before submit.py runs (eval fallback): path and text.
    derived_config: tuple[Path, str] | None
    launch_sh: Path
    output_log: Path

    @property
    def launch_success(self) -> tuple[str, ...]:
        """The line TensorRT-LLM's launch script prints last on success: the
        disaggregated one for disaggregated runs, else the aggregated one
        (``ctx_only`` runs a disaggregated config on the aggregated path)."""
        checked = self.checked
        if checked.config.disaggregated and checked.benchmark_mode != "ctx_only":
            return (DISAGG_SUCCESS,)
        return (AGGR_SUCCESS,)

    @staticmethod
    def wanted(ctx: Context) -> bool:
        """perf_sanity/benchmark, or a pytest request that is a perf-sanity run."""
        req = ctx.request
        if req.workflow_type in ("perf_sanity", "benchmark"):
            return True
        return req.workflow_type == "pytest" and (
            bool(req.perf_config_yaml) or is_perf_sanity(req.test_cmd or "")
        )

    @classmethod
    def resolve(cls, ctx: Context, place: Placement) -> Workload:
        return cls.resolve_run(ctx, place, None)

    @classmethod
    def resolve_run(cls, ctx: Context, place: Placement, eval_model: str | None) -> Workload:
        """``eval_model``: the model of an eval wider than one node, run as an
        accuracy benchmark of the request's config."""
        req, trace, target = ctx.request, ctx.trace, place.target
        assert target is not None  # the route sends only Slurm requests here
        if not req.repo_root:
            raise BuildError(
                "repo_root is required for the perf-sanity path (it holds "
                f"{SUBMIT_PY_RELPATH}); pass repo_root"
            )
        submit_py = submit_py_path(req.repo_root)
        test_list = None if eval_model else _perf_test_id(ctx, req.test_cmd or "")
        config = req.perf_config_yaml
        if test_list is None and not config:
            why = (
                "eval world size exceeds one node, so the eval runs as an accuracy benchmark "
                "and needs a base config"
                if eval_model
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
        model = eval_model or _model_name(ctx, checked)
        work_dir = Path(req.work_dir)
        derived: tuple[Path, str] | None = None
        config_arg = None if test_list else str(checked.config.path)
        if eval_model:
            derived_path = work_dir / f"{model}_accuracy.yaml"
            derived = (derived_path, _accuracy_config(checked.config.path))
            config_arg = str(derived_path)
            trace.chose(
                "perf config",
                str(derived_path),
                "perf_config_yaml with accuracy.enable_accuracy_test: true (eval fallback)",
            )
        launch_sh = work_dir / LAUNCH_SCRIPT_NAME
        request = SubmitRequest(
            submit_py=submit_py,
            test_list=test_list,
            config_file=config_arg,
            test_name=None if test_list else req.perf_test_name,
            benchmark_mode=benchmark_mode,
            partition=target.partition,
            account=target.account,
            job_name=f"{model}_{'perf' if test_list else 'benchmark'}",
            image=place.image,
            mounts=place.mounts.joined,
            work_dir=(req.remote_work_dir or "") if ctx.is_remote else req.work_dir,
            llm_src=place.mounts.project,
            llm_models_root=place.mounts.models_root,
            launch_sh=launch_sh,
            time=target.time_limit,
            # Only the procedure's flags: submit.py picks --mpi itself per step (pmix for
            # multi-GPU aggregated runs and disaggregated workers, none for one GPU);
            # --mpi-type would force one plugin onto every step, install included.
            mpi_type=None,
        )
        argv = submit_argv(request)
        trace.chose("submit.py", " ".join(argv[1:2]), "repo_root/jenkins/scripts/perf/local")
        devices, nodes = checked.topology
        gpn = checked.config.gpus_per_node
        trace.chose("devices/nodes", f"{devices}/{nodes}", "config YAML hardware and parallelism")
        # the cluster's resolved plugin, for the executors (submit.py picks its own)
        shape = TaskShape(nodes, nodes * gpn, gpn, target.mpi_plugin)
        workflow = cls(
            req.workflow_type,
            request.job_name,
            tuple(argv),
            checked,
            derived,
            launch_sh,
            work_dir / SUBMIT_LOG_NAME,
        )
        return Workload(workflow, model, devices, nodes, shape)

    def job_name(self, model_name: str) -> str:
        return self.name

    def workload_steps(self, shape: TaskShape) -> tuple[Step, ...]:
        """None: submit.py writes the launch script and its steps."""
        return ()


def _accuracy_config(base: Path) -> str:
    try:
        return derive_accuracy_config(base)
    except PerfConfigError as exc:
        raise BuildError(f"perf_config_yaml: {exc}") from None
