"""Perf-sanity / benchmark (procedure Category 4): resolution checks what the checkout's submit.py
would trip on and builds its argv; ``BuiltJob.write`` runs it, and it writes the launch script."""

from __future__ import annotations

import math
import os
import posixpath
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, ClassVar, NamedTuple, TypeVar

from scriptbuilder.errors import BuildError
from scriptbuilder.inputs.perf_config import (
    AGGREGATED_CONFIG_DIR,
    DISAGGREGATED_CONFIG_DIR,
    PerfConfig,
    PerfConfigError,
    derive_accuracy_config,
    load_perf_config,
    parse_perf_test_id,
)
from scriptbuilder.inputs.shellwords import ShellSyntaxError, tokenize
from scriptbuilder.inputs.tests import is_perf_sanity, parse_test_ids
from scriptbuilder.resolution.context import Context
from scriptbuilder.resolution.slurm_params import DEFAULT_TIME_LIMIT
from scriptbuilder.resolution.workloads import Placement
from scriptbuilder.script.plan import TaskShape

SUBMIT_PY_RELPATH = "jenkins/scripts/perf/local/submit.py"
LAUNCH_SCRIPT_NAME = "slurm_launch.sh"
#: The ``#SBATCH --output`` submit.py writes.
LAUNCH_LOG_PATTERN = "slurm-%j.out"
#: The full output of the submit.py run, kept in the local work dir.
SUBMIT_LOG_NAME = "submit_py.log"
SUBMIT_TIMEOUT = 300.0
#: The interpreter of a submit.py run on the login node (the procedure's ``python3``).
REMOTE_PYTHON = "python3"
#: The last lines of jenkins/scripts/perf/{aggregated,disaggregated}/slurm_launch_draft.sh
#: when every step succeeded.
AGGR_SUCCESS = "Aggregated test completed successfully"
DISAGG_SUCCESS = "Disagg server and benchmark completed successfully"
_T = TypeVar("_T")
#: Left out when a test id is given (submit.py reads them from the id).
_CONFIG_FIELDS = ("config_file", "test_name", "benchmark_mode")
_OPTIONAL_FIELDS = ("test_list", *_CONFIG_FIELDS, "mpi_type")


@dataclass(frozen=True, kw_only=True)
class SubmitRequest:
    """One submit.py run, its flags in the procedure's order; ``work_dir`` and
    ``llm_src`` are cluster paths for remote runs, ``launch_sh`` is always local."""

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


def submit_argv(req: SubmitRequest, python: str = sys.executable) -> list[str]:
    """The argv of the submit.py run: the fields in order (never a shell string)."""
    argv, skipped = [python, str(req.submit_py)], _CONFIG_FIELDS if req.test_list else ()
    for field in fields(req)[1:]:
        value = getattr(req, field.name)
        if field.name in skipped or (not value and field.name in _OPTIONAL_FIELDS):
            continue
        name, value = "--" + field.name.replace("_", "-"), str(value)
        # A value starting with "-" would be read by argparse as an option.
        argv += [f"{name}={value}"] if value.startswith("-") else [name, value]
    return argv


class Topology(NamedTuple):
    devices: int
    nodes: int


@dataclass(frozen=True)
class PerfPreflight:
    """What :func:`preflight` found: the config, what it runs and its size."""

    config: PerfConfig
    server_name: str | None
    benchmark_mode: str | None
    topology: Topology


def submit_py_path(repo_root: str | os.PathLike[str]) -> Path:
    return Path(repo_root) / SUBMIT_PY_RELPATH


@dataclass(frozen=True)
class SubmitLogin:
    """The login node a remote submit.py run happens on (the scenario's), and the
    launch script it writes there (the job's, in remote_work_dir)."""

    host: str
    user: str | None
    launch_sh: str = ""

    def describe(self) -> str:
        return f"ssh {self.user}@{self.host}" if self.user else f"ssh {self.host}"


#: A scenario's login node for submit.py (None: it runs on this machine).
LoginRule = Callable[[Context], "SubmitLogin | None"]


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PerfConfigError(f"cannot read {path}: {exc}") from None


def _config(field: str, read: Callable[[Path], _T], path: Path) -> _T:
    try:
        return read(path)
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
    """Check what submit.py would trip on; ``repo_root`` (default: submit.py's checkout)
    holds a test id's config, and ``test_list`` wins over ``config_file`` as in submit.py."""
    submit_py, depth = Path(submit_py), len(Path(SUBMIT_PY_RELPATH).parts)
    checkout = submit_py.parents[depth - 1] if len(submit_py.parts) > depth else Path(".")
    root = Path(repo_root) if repo_root is not None else checkout
    if not submit_py.is_file():
        raise BuildError(
            f"{submit_py} not found: the checkout at {checkout} lacks"
            f" {SUBMIT_PY_RELPATH}; point repo_root at a TensorRT-LLM checkout that has it"
        )
    server = mode = None
    if test_list:
        dirs = [root / AGGREGATED_CONFIG_DIR, root / DISAGGREGATED_CONFIG_DIR]
        test_id = parse_perf_test_id(test_list, dirs)
        if test_id is None:
            raise BuildError(
                f"test_cmd: {test_list!r} is not a perf-sanity test id; expected"
                " perf/test_perf_sanity.py::test_e2e[aggr-<config>-<server>],"
                " [aggr-ctx_only-<config>] or [disagg-e2e|gen_only-<config>]"
            )
        label, path = test_id.label, root / test_id.config_file
        if not path.is_file():
            raise BuildError(
                f"test_cmd: test {label} needs {path}, which does not exist;"
                " check the test id or repo_root"
            )
        config = _config("test_cmd", load_perf_config, path)
        server, mode = test_id.server_name, test_id.mode
        if test_id.kind == "disagg" and mode is None:
            raise BuildError(
                f"test_cmd: test {label} has no benchmark mode; submit.py needs"
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
                    f"test_cmd: test {label} names no server of {path.name}"
                    f" (servers: {_servers(config)}); append -<server> to the test id"
                )
            if server not in config.server_names:
                raise BuildError(
                    f"test_cmd: server {server!r} of test {label} is not in"
                    f" {path.name} (servers: {_servers(config)}); use one of them"
                )
    else:
        assert config_file is not None, "the route passes a test id or a config"
        path = Path(config_file)
        if not path.is_file():
            raise BuildError(
                f"perf_config_yaml: {path} does not exist; pass an existing config YAML"
            )
        config = _config("perf_config_yaml", load_perf_config, path)
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
    return PerfPreflight(config, server, mode, topology(config, server, mode))


def _mapping(value: Any, what: str, path: Path) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BuildError(f"perf_config_yaml: {path}: {what}; fix the config YAML")
    return value


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
    keys = ("tensor_parallel_size", "pipeline_parallel_size", "context_parallel_size")
    return math.prod(_count(section, key, where, path) for key in keys)


def topology(config: PerfConfig, server_name: str | None, benchmark_mode: str | None) -> Topology:
    """GPUs and nodes submit.py will ask for: aggregated, ``tp * pp * cp`` of the server (without a
    name, the largest) on ``ceil(gpus / gpus_per_node)`` nodes; disaggregated, the sum over the ctx
    and gen servers (``ctx_only``: one ctx server; ``gen_only`` with ``benchmark.mode`` containing
    ``gen_only_no_context``: the gen servers only)."""
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
        devices = sizes[server_name] if server_name is not None else max(sizes.values())
        return Topology(devices, math.ceil(devices / gpn))
    hardware = raw.get("hardware") or {}
    workers = _mapping(
        raw.get("worker_config"),
        "disaggregated config without a worker_config mapping; add worker_config.ctx and "
        "worker_config.gen",
        path,
    )
    roles = {"ctx": "num_ctx_servers", "gen": "num_gen_servers"}
    if benchmark_mode == "ctx_only":
        counts = {"ctx": 1}
    else:
        counts = {role: _count(hardware, key, "hardware", path) for role, key in roles.items()}
        bench_mode = str((raw.get("benchmark") or {}).get("mode", ""))
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


def _perf_test_id(ctx: Context, test_cmd: str) -> str | None:
    """The perf-sanity test id: ``file.py::test_e2e[...]``, or the file and a separate
    ``test_e2e[...]`` word joined into that form."""
    for test_id in parse_test_ids(test_cmd):
        if "test_perf_sanity" not in test_id.path:
            continue
        if test_id.cls is not None or test_id.func is not None or test_id.case is not None:
            return str(test_id)
        try:
            words = [t.value for t in tokenize(test_cmd)]
        except ShellSyntaxError:
            words = []
        bare = next((w for w in words if _BARE_CASE.fullmatch(w)), None)
        if bare is None:
            return str(test_id)
        return ctx.trace.chose(
            "perf test id", f"{test_id.path}::{bare}", f"{bare} given after the file in test_cmd"
        )
    return None


def _benchmark_mode(ctx: Context, checked: PerfPreflight, test_list: str | None) -> str | None:
    """``perf_benchmark_mode`` for ``--benchmark-mode`` (a test id carries its own)."""
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


def _model_name(ctx: Context, config: PerfConfig) -> str:
    if ctx.request.model_name:
        return ctx.trace.chose("model_name", ctx.request.model_name, "model_name input")
    metadata = config.raw.get("metadata")
    name = metadata.get("model_name") if isinstance(metadata, dict) else None
    if isinstance(name, str) and name:
        return ctx.trace.chose("model_name", name, "metadata.model_name of the config YAML")
    return ctx.trace.chose("model_name", config.path.stem, "config YAML file name")


@dataclass(frozen=True)
class PerfSanityJob:
    """A submit.py job, not a :class:`~scriptbuilder.workflows.base.Workflow`: submit.py,
    run with ``argv``, writes the launch script ``launch_sh`` (no script tree);
    ``workflow_type`` is what the request asked for (``eval`` for the fallback)."""

    #: The launch script's own failure lines start ``Error: ``.
    failure_patterns: ClassVar[tuple[str, ...]] = ("FAILED", "Error", "AssertionError")

    workflow_type: str
    name: str
    argv: tuple[str, ...]
    #: The line the launch script prints last on success.
    launch_success: tuple[str, ...]
    #: Files to write before submit.py runs, where it runs: path and text (the eval
    #: fallback's derived config; a remote run's config file).
    inputs: tuple[tuple[str, str], ...]
    #: The launch script in the local work_dir (job_spec.json's script_path).
    launch_sh: Path
    output_log: Path
    #: Where submit.py runs: work_dir, or remote_work_dir on the login node.
    cwd: Path
    login: SubmitLogin | None
    model_name: str
    required_devices: int
    node_count: int
    #: The job's tasks, with the cluster's plugin for the executors.
    shape: TaskShape

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
    def resolve(
        cls, ctx: Context, place: Placement, login: LoginRule, eval_model: str | None = None
    ) -> PerfSanityJob:
        """``login``: the scenario's login node submit.py runs on (None: this machine);
        ``eval_model``: the model of an eval wider than one node, run as an accuracy
        benchmark of the request's config."""
        req, trace, target = ctx.request, ctx.trace, place.target
        assert target is not None  # the route sends only Slurm requests here
        if not req.repo_root:
            raise BuildError(
                "repo_root is required for the perf-sanity path (it holds "
                f"{SUBMIT_PY_RELPATH}); pass repo_root"
            )
        submit_py = submit_py_path(req.repo_root)
        test_list = None if eval_model else _perf_test_id(ctx, req.test_cmd or "")
        if test_list is None and not req.perf_config_yaml:
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
            config_file=None if test_list else req.perf_config_yaml,
            test_name=req.perf_test_name,
            benchmark_mode=req.perf_benchmark_mode,
            repo_root=req.repo_root,
        )
        benchmark_mode = _benchmark_mode(ctx, checked, test_list)
        model = eval_model or _model_name(ctx, checked.config)
        # Where submit.py runs: this machine, or (remote) the login node, in remote_work_dir
        # with the cluster's checkout, the files it reads sent there first.
        node = login(ctx)
        work_dir = posixpath.normpath(place.job_dir) if node else str(Path(req.work_dir))
        inputs: list[tuple[str, str]] = []
        config_arg = str(checked.config.path)  # submit_argv leaves it out for a test id
        if eval_model:
            text = _config("perf_config_yaml", derive_accuracy_config, checked.config.path)
            inputs.append((posixpath.join(work_dir, f"{model}_accuracy.yaml"), text))
            rule = "perf_config_yaml with accuracy.enable_accuracy_test: true (eval fallback)"
            config_arg = trace.chose("perf config", inputs[-1][0], rule)
        elif node and test_list is None:
            text = _config("perf_config_yaml", _read_text, checked.config.path)
            inputs.append((posixpath.join(work_dir, checked.config.path.name), text))
            rule = "perf_config_yaml, sent to remote_work_dir (submit.py runs on the cluster)"
            config_arg = trace.chose("perf config", inputs[-1][0], rule)
        launch_sh = posixpath.join(work_dir, LAUNCH_SCRIPT_NAME)
        job_name = f"{model}_{'perf' if test_list else 'benchmark'}"
        if node:
            node = replace(node, launch_sh=launch_sh)
            submit_py = Path(submit_py_path(place.mounts.project))
            where = f"{node.describe()}, in remote_work_dir {work_dir}"
            trace.chose("submit.py runs", where, "remote_slurm: it reads the cluster's checkout")
            travel = ", ".join(path for path, _ in inputs) or "nothing (the cluster's config)"
            trace.chose("sent before submit.py", travel, "files submit.py reads on the cluster")
            back = f"{launch_sh} -> {posixpath.join(req.work_dir, LAUNCH_SCRIPT_NAME)}"
            trace.chose("launch script brought back", back, "job_spec.json names the local copy")
        request = SubmitRequest(
            submit_py=submit_py,
            test_list=test_list,
            config_file=config_arg,
            test_name=req.perf_test_name,
            benchmark_mode=benchmark_mode,
            partition=target.partition,
            account=target.account,
            job_name=job_name,
            image=place.image,
            mounts=place.mounts.joined,
            work_dir=work_dir,
            llm_src=place.mounts.project,
            llm_models_root=place.mounts.models_root,
            launch_sh=Path(launch_sh),
            time=target.time_limit,
            # No --mpi-type: submit.py picks --mpi per step itself, and the flag would
            # force one plugin onto every step, install included.
        )
        argv = tuple(submit_argv(request, REMOTE_PYTHON if node else sys.executable))
        where = "remote_repo_path" if node else "repo_root"
        trace.chose("submit.py", str(submit_py), f"{where}/jenkins/scripts/perf/local")
        devices, nodes = checked.topology
        gpn = checked.config.gpus_per_node
        trace.chose("devices/nodes", f"{devices}/{nodes}", "config YAML hardware and parallelism")
        # the cluster's resolved plugin, for the executors (submit.py picks its own)
        shape = TaskShape(nodes, nodes * gpn, gpn, target.mpi_plugin)
        # ctx_only runs a disaggregated config on the aggregated path
        disagg = checked.config.disaggregated and checked.benchmark_mode != "ctx_only"
        success = (DISAGG_SUCCESS if disagg else AGGR_SUCCESS,)
        log = Path(req.work_dir) / SUBMIT_LOG_NAME
        local_launch = Path(req.work_dir) / LAUNCH_SCRIPT_NAME
        files = (tuple(inputs), local_launch, log, Path(work_dir), node)
        return cls(req.workflow_type, job_name, argv, success, *files, model, devices, nodes, shape)
