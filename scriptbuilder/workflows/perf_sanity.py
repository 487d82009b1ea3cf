"""Perf-sanity / benchmark (procedure Category 4): the launch script comes from submit.py.

This is not a workflow of steps: the builder never writes this job's batch
script itself (:class:`scriptbuilder.resolution.perf.SubmitPlan` says what runs).
It checks the inputs (:func:`preflight`), builds the argument list of the
checkout's ``jenkins/scripts/perf/local/submit.py`` (:func:`submit_argv`) and
runs it (:func:`run_submit`); submit.py derives nodes, tasks and GPUs from the
config YAML's ``hardware`` section and writes ``slurm_launch.sh`` plus
``test_list.txt``. The topology computed here (:func:`perf_topology`) only
feeds the report.
"""

from __future__ import annotations

import math
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from scriptbuilder.errors import BuildError
from scriptbuilder.inputs.perf_config import (
    PerfConfig,
    PerfConfigError,
    PerfTestId,
    Topology,
    load_perf_config,
    parse_perf_test_id,
)
from scriptbuilder.outputs.atomic import write_atomic

#: Where submit.py lives in a TensorRT-LLM checkout.
SUBMIT_PY_RELPATH = "jenkins/scripts/perf/local/submit.py"
#: The launch script name (procedure: ``--launch-sh <work_dir>/slurm_launch.sh``).
LAUNCH_SCRIPT_NAME = "slurm_launch.sh"
#: The ``#SBATCH --output`` submit.py writes: ``<work-dir>/slurm-%j.out``.
LAUNCH_LOG_PATTERN = "slurm-%j.out"
#: The full stdout/stderr of the submit.py run, kept in the local work dir.
SUBMIT_LOG_NAME = "submit_py.log"
BENCHMARK_MODES = ("e2e", "gen_only", "ctx_only")
DEFAULT_TIME_LIMIT = "02:00:00"

PerfJobKind = Literal["perf", "benchmark"]

__all__ = [
    "BENCHMARK_MODES",
    "LAUNCH_LOG_PATTERN",
    "LAUNCH_SCRIPT_NAME",
    "SUBMIT_LOG_NAME",
    "SUBMIT_PY_RELPATH",
    "PerfJobKind",
    "PerfPreflight",
    "SubmitRequest",
    "perf_job_kind",
    "perf_job_name",
    "perf_topology",
    "preflight",
    "run_submit",
    "submit_argv",
    "submit_py_path",
]


# --------------------------------------------------------------------------
# The job's name
# --------------------------------------------------------------------------


def perf_job_kind(test_list: str | None) -> PerfJobKind:
    """``perf`` for a perf-sanity test id (``--test-list``), ``benchmark`` for a config file."""
    return "perf" if test_list else "benchmark"


def perf_job_name(model_name: str, kind: PerfJobKind) -> str:
    """``<model>_perf`` (test-list runs) or ``<model>_benchmark`` (config-file runs)."""
    if kind not in ("perf", "benchmark"):
        raise BuildError(f"perf job kind {kind!r} is unknown; use 'perf' or 'benchmark'")
    return f"{model_name}_{kind}"


# --------------------------------------------------------------------------
# submit.py's argument list
# --------------------------------------------------------------------------


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
            if req.benchmark_mode not in BENCHMARK_MODES:
                raise BuildError(
                    f"benchmark_mode {req.benchmark_mode!r} is unknown;"
                    f" use one of {', '.join(BENCHMARK_MODES)}"
                )
            argv += _flag("--benchmark-mode", req.benchmark_mode)
    else:
        raise BuildError(
            "perf-sanity needs a perf-sanity test id (test_cmd) or a config YAML"
            " (perf_config_yaml); pass one of them"
        )
    required = (
        ("--partition", req.partition),
        ("--account", req.account),
        ("--job-name", req.job_name),
        ("--image", req.image),
    )
    for name, value in required:
        if not value:
            raise BuildError(f"submit.py needs {name}; it is empty in the request")
    for name, value in required:
        argv += _flag(name, value)
    argv += _flag("--mounts", req.mounts)
    argv += _flag("--work-dir", req.work_dir)
    argv += _flag("--llm-src", req.llm_src)
    argv += _flag("--llm-models-root", req.llm_models_root)
    argv += _flag("--launch-sh", str(req.launch_sh))
    argv += _flag("--time", req.time)
    if req.mpi_type:
        argv += _flag("--mpi-type", req.mpi_type)
    return argv


# --------------------------------------------------------------------------
# Checks before running it
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class PerfPreflight:
    """What :func:`preflight` found: the config, what it runs and its size (for the report)."""

    config_path: Path
    config: PerfConfig
    server_name: str | None
    benchmark_mode: str | None
    topology: Topology
    test_id: PerfTestId | None = None


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
            if benchmark_mode and benchmark_mode not in BENCHMARK_MODES:
                raise BuildError(
                    f"benchmark_mode {benchmark_mode!r} is unknown;"
                    f" use one of {', '.join(BENCHMARK_MODES)}"
                )
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
    topology = perf_topology(config, server_name=server, benchmark_mode=mode)
    return PerfPreflight(path, config, server, mode, topology, test_id)


# --------------------------------------------------------------------------
# Devices and nodes for the report
# --------------------------------------------------------------------------


def _size(section: Any) -> int:
    if not isinstance(section, dict):
        return 1
    size = 1
    for key in ("tensor_parallel_size", "pipeline_parallel_size", "context_parallel_size"):
        value = section.get(key, 1)
        size *= value if isinstance(value, int) and not isinstance(value, bool) else 1
    return size


def perf_topology(
    config: PerfConfig, *, server_name: str | None = None, benchmark_mode: str | None = None
) -> Topology:
    """GPUs and nodes submit.py will ask for, for the report (submit.py stays the truth).

    Aggregated: ``tp*pp*cp`` of the server; disaggregated ``e2e``/``gen_only``:
    ctx plus gen servers (:meth:`PerfConfig.topology`); ``ctx_only`` runs one
    ctx server; ``gen_only`` with ``benchmark.mode`` containing
    ``gen_only_no_context`` runs the gen servers only.
    """
    gpn = config.gpus_per_node
    raw = config.raw
    workers = raw.get("worker_config") or {}
    hardware = raw.get("hardware") or {}
    if config.disaggregated and benchmark_mode == "ctx_only":
        devices = _size(workers.get("ctx"))
        nodes = math.ceil(devices / gpn)
        detail = f"ctx_only: one ctx server = {devices} GPUs, {gpn} GPUs/node -> {nodes} node(s)"
        return Topology(devices, nodes, detail)
    bench_mode = str((raw.get("benchmark") or {}).get("mode", ""))
    if (
        config.disaggregated
        and benchmark_mode == "gen_only"
        and "gen_only_no_context" in bench_mode
    ):
        count = hardware.get("num_gen_servers", 1)
        count = count if isinstance(count, int) and not isinstance(count, bool) else 1
        per = _size(workers.get("gen"))
        nodes = count * math.ceil(per / gpn)
        detail = (
            f"gen_only_no_context: {count} gen x {per} GPUs, {gpn} GPUs/node -> {nodes} node(s)"
        )
        return Topology(count * per, nodes, detail)
    try:
        return config.topology(None if config.disaggregated else server_name)
    except PerfConfigError as exc:
        raise BuildError(f"perf_config_yaml: {exc}") from None


# --------------------------------------------------------------------------
# Running it
# --------------------------------------------------------------------------


def _text(data: str | bytes | None) -> str:
    if data is None:
        return ""
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else data


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _log_text(argv: Sequence[str], cwd: Path, stdout: str, stderr: str, status: str) -> str:
    return (
        f"$ cd {shlex.quote(str(cwd))} && {shlex.join(argv)}\n"
        f"--- stdout ---\n{stdout}"
        f"{'' if not stdout or stdout.endswith(chr(10)) else chr(10)}"
        f"--- stderr ---\n{stderr}"
        f"{'' if not stderr or stderr.endswith(chr(10)) else chr(10)}"
        f"--- {status} ---\n"
    )


def _keep_log(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text)


def run_submit(
    argv: Sequence[str],
    *,
    cwd: str | os.PathLike[str],
    timeout: float,
    output_log: Path,
    env: Mapping[str, str] | None = None,
) -> str:
    """Run submit.py (no shell) and return its stdout.

    Its full stdout and stderr are written to ``output_log`` whatever happens.
    A timeout or a non-zero exit is a :class:`BuildError` naming the last error
    line and the log. The process runs in its own session, so on timeout the
    whole group it started is killed.
    """
    argv = [str(a) for a in argv]
    work = Path(cwd)
    output_log = Path(output_log)
    try:
        proc = subprocess.Popen(
            argv,
            cwd=work,
            env=dict(env) if env is not None else None,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="replace",
            start_new_session=True,
        )
    except OSError as exc:
        _keep_log(output_log, _log_text(argv, work, "", f"{exc}\n", "could not start"))
        raise BuildError(
            f"cannot run submit.py ({argv[0]}: {exc.strerror or exc}); check the Python"
            f" interpreter and {argv[1] if len(argv) > 1 else 'submit.py'}"
        ) from None
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        _kill_group(proc)
        try:
            stdout, stderr = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = _text(exc.stdout), _text(exc.stderr)
        status = f"killed after {timeout:g} s"
        _keep_log(output_log, _log_text(argv, work, stdout or "", stderr or "", status))
        raise BuildError(
            f"submit.py did not finish within {timeout:g} s and was killed;"
            f" full output in {output_log}"
        ) from None
    stdout, stderr = stdout or "", stderr or ""
    _keep_log(output_log, _log_text(argv, work, stdout, stderr, f"exit code {proc.returncode}"))
    if proc.returncode != 0:
        line = _last_line(stderr) or _last_line(stdout) or "no error output"
        raise BuildError(
            f"submit.py failed (exit {proc.returncode}): {line}; full output in {output_log}"
        )
    return stdout
