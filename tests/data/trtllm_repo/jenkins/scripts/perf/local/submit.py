#!/usr/bin/env python3
"""Test stand-in for TensorRT-LLM's ``jenkins/scripts/perf/local/submit.py``.

Written from scratch for the scriptbuilder tests. It accepts exactly the flag set
of the real script and behaves like it where the script builder can tell:

- bad or missing flags: argparse's usage error, exit 2;
- anything else that goes wrong (missing YAML, no ``hardware.gpus_per_node``,
  unknown ``--test-name`` in an aggregated config, bad test-id prefix): an
  uncaught exception, so a Python traceback on stderr and exit 1;
- ``--test-list`` wins over ``--config-file``; with a test list the config is
  looked up under ``<llm-src>/tests/scripts/perf-sanity/{aggregated,disaggregated}``
  (``AGG_CONFIG_FOLDER`` / ``DISAGG_CONFIG_FOLDER`` override the folders);
- writes the launch script to ``--launch-sh`` (default ``<work-dir>/slurm_launch.sh``,
  mode 0755) and ``test_list.txt`` into ``--work-dir`` (created), prints how to
  submit it and never calls ``sbatch``.

Stand-in hooks (not in the real script):

- ``SUBMIT_STANDIN_RECORD=<file>``: writes ``{"argv": [...], "cwd": "..."}`` there
  (argv including ``argv[0]``), before the flags are parsed;
- ``SUBMIT_STANDIN_FAIL=1``: after the flags are parsed, raises
  ``RuntimeError: submit.py stand-in: failure requested by SUBMIT_STANDIN_FAIL=1``.

The launch script differs from the real one in its body (the real one appends
``slurm_launch_draft.sh``); it keeps the real ``#SBATCH`` lines except
``--segment`` and the sinfo-dependent ``--gres`` line.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import sys
from datetime import datetime
from typing import Any

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
AGG_FOLDER = os.environ.get("AGG_CONFIG_FOLDER", "tests/scripts/perf-sanity/aggregated")
DISAGG_FOLDER = os.environ.get("DISAGG_CONFIG_FOLDER", "tests/scripts/perf-sanity/disaggregated")
FAIL_MESSAGE = "submit.py stand-in: failure requested by SUBMIT_STANDIN_FAIL=1"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description="Stand-in: generate a Slurm launch script for a perf-sanity run"
    )
    p.add_argument("--test-list", default="", help="perf-sanity test id (wins over --config-file)")
    p.add_argument("--config-file", default="", help="config YAML")
    p.add_argument("--test-name", default="", help="server name (aggregated config file)")
    p.add_argument("--benchmark-mode", default="", choices=["", "e2e", "gen_only", "ctx_only"])
    p.add_argument("--partition", required=True, help="'unspecified' omits the line")
    p.add_argument("--time", default="02:00:00")
    p.add_argument("--account", required=True)
    p.add_argument("--job-name", required=True)
    p.add_argument("--image", required=True)
    p.add_argument("--mounts", default="")
    p.add_argument("--work-dir", default="")
    p.add_argument("--draft-launch-sh", default="")
    p.add_argument("--launch-sh", default="")
    p.add_argument("--run-sh", default="")
    p.add_argument("--install-sh", default="")
    p.add_argument("--llm-src", default="")
    p.add_argument("--llm-models-root", required=True)
    p.add_argument("--build-wheel", action="store_true")
    p.add_argument("--install-mode", default="source", choices=["source", "wheel"])
    p.add_argument("--wheel-path", default="")
    p.add_argument("--capture-nsys", action="store_true")
    p.add_argument("--nsys-start-stop", default="1-100")
    p.add_argument("--ctx-nsys-start-stop", default="1-100")
    p.add_argument("--gen-nsys-start-stop", default="1-100")
    p.add_argument("--test-prefix", default="")
    p.add_argument("--waives-file", default="")
    p.add_argument("--mpi-type", default="")
    p.add_argument("--disagg-server-port", type=int, default=8000)
    p.add_argument("--cluster-name", default="")
    return p


def record_argv() -> None:
    path = os.environ.get("SUBMIT_STANDIN_RECORD", "")
    if path:
        with open(path, "w", encoding="utf-8") as handle:
            json.dump({"argv": sys.argv, "cwd": os.getcwd()}, handle, indent=2)


def case_from_test_list(test_list: str) -> str:
    """``...::test_e2e[aggr-x-y] TIMEOUT (90)`` -> ``aggr-x-y``."""
    text = re.sub(r"\s+TIMEOUT\s*\(\d+\)\s*$", "", test_list.strip())
    if "[" not in text or "]" not in text:
        raise ValueError(f"Invalid test string format. Expected test name with brackets: {text}")
    return text.rsplit("[", 1)[1].split("]", 1)[0]


def split_case(case: str) -> tuple[str, str | None, str, str | None]:
    """Returns (config stem, server name, runtime mode, benchmark mode)."""
    parts = case.split("-")
    if len(parts) < 2:
        raise ValueError(f"perf-sanity test id needs a config name: {case}")
    prefix = parts[0]
    if "disagg" in prefix:
        if len(parts) < 3 or parts[1] not in ("e2e", "gen_only"):
            raise ValueError(f"disaggregated test id needs e2e or gen_only then a config: {case}")
        return "-".join(parts[2:]), None, "disaggregated", parts[1]
    if "aggr" in prefix:
        if len(parts) > 2 and parts[1] == "ctx_only":
            return "-".join(parts[2:]), None, "aggregated", "ctx_only"
        server = "-".join(parts[2:]) or None
        return parts[1], server, "aggregated", None
    raise ValueError(f"Invalid test name prefix: {prefix}")


def config_path(llm_src: str, stem: str, benchmark_mode: str | None) -> str:
    folder = DISAGG_FOLDER if benchmark_mode else AGG_FOLDER
    if not os.path.isabs(folder):
        folder = os.path.join(llm_src, folder)
    path = os.path.join(folder, f"{stem}.yaml")
    if not os.path.exists(path):
        raise FileNotFoundError(f"Config file not found: {path}")
    return path


def gpus_of(section: dict[str, Any]) -> int:
    tp = int(section.get("tensor_parallel_size", 1))
    pp = int(section.get("pipeline_parallel_size", 1))
    cp = int(section.get("context_parallel_size", 1))
    return tp * pp * cp


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def hardware(
    config: dict[str, Any], runtime: str, mode: str | None, server: str | None
) -> dict[str, int]:
    hw = config.get("hardware") or {}
    gpn = hw.get("gpus_per_node")
    if gpn is None:
        raise ValueError("Missing gpus_per_node in hardware configuration")
    gpn = int(gpn)
    workers = config.get("worker_config") or {}
    if mode == "ctx_only":
        per_server = gpus_of(workers.get("ctx") or {})
        nodes = ceil_div(per_server, gpn)
        return {"gpus_per_node": gpn, "nodes": nodes, "per_node": min(per_server, gpn)}
    if runtime == "aggregated":
        match = [s for s in config.get("server_configs") or [] if s.get("name") == server]
        if not match:
            raise ValueError(f"Server config not found for test_name: {server}")
        per_server = gpus_of(match[0])
        nodes = ceil_div(per_server, gpn)
        return {"gpus_per_node": gpn, "nodes": nodes, "per_node": min(per_server, gpn)}
    no_ctx = mode == "gen_only" and "gen_only_no_context" in str(
        (config.get("benchmark") or {}).get("mode", "")
    )
    n_ctx = 0 if no_ctx else hw.get("num_ctx_servers")
    n_gen = hw.get("num_gen_servers")
    if n_ctx is None or n_gen is None:
        raise ValueError("Missing required hardware configuration")
    ctx_nodes = ceil_div(gpus_of(workers.get("ctx") or {}), gpn)
    gen_nodes = ceil_div(gpus_of(workers.get("gen") or {}), gpn)
    nodes = int(n_ctx) * ctx_nodes + int(n_gen) * gen_nodes
    return {"gpus_per_node": gpn, "nodes": nodes, "per_node": gpn}


def test_id(runtime: str, mode: str | None, stem: str, server: str | None) -> str:
    if runtime == "disaggregated":
        case = f"disagg-{mode}-{stem}"
    elif mode == "ctx_only":
        case = f"aggr-ctx_only-{stem}"
    else:
        case = f"aggr-{stem}-{server}"
    return f"perf/test_perf_sanity.py::test_e2e[{case}]"


def launch_script(
    args: argparse.Namespace,
    hw: dict[str, int],
    runtime: str,
    *,
    work_dir: str,
    llm_src: str,
    config_yaml: str,
    test_list_path: str,
    case: str,
) -> str:
    q = shlex.quote
    nodes, gpn = hw["nodes"], hw["gpus_per_node"]
    lines = [
        "#!/bin/bash",
        f"#SBATCH --nodes={nodes}",
        f"#SBATCH --ntasks={nodes * gpn}",
        f"#SBATCH --ntasks-per-node={gpn}",
        f"#SBATCH --gpus-per-node={gpn}",
    ]
    if args.partition and args.partition != "unspecified":
        lines.append(f"#SBATCH --partition={args.partition}")
    lines += [
        f"#SBATCH --time={args.time}",
        f"#SBATCH --account={args.account}",
        f"#SBATCH --job-name={args.job_name}",
        f"#SBATCH --output={work_dir}/slurm-%j.out",
        "",
        "# Generated by the submit.py stand-in (scriptbuilder tests).",
        f"export llmSrcNode={q(llm_src)}",
        f"export jobWorkspace={q(work_dir)}",
        f"export configYamlPath={q(config_yaml)}",
        f"export testOutputDir={q(os.path.join(work_dir, case))}",
        f"export LLM_MODELS_ROOT={q(args.llm_models_root)}",
        f"export BUILD_WHEEL={'true' if args.build_wheel else 'false'}",
        f"export INSTALL_MODE={q(args.install_mode)}",
        f"export totalNodes={nodes}",
        f"export gpusPerNode={gpn}",
        f"export totalGpus={nodes * gpn}",
        "",
    ]
    mounts = args.mounts
    if llm_src not in mounts:
        mounts = f"{mounts},{llm_src}:{llm_src}" if mounts else f"{llm_src}:{llm_src}"
    srun_args = [
        f"--container-name={'aggr' if runtime == 'aggregated' else 'disagg'}_test",
        f"--container-image={args.image}",
        f"--container-mounts={mounts}",
    ]
    if args.work_dir:
        srun_args.append(f"--container-workdir={args.work_dir}")
    if args.mpi_type:
        srun_args.append(f"--mpi={args.mpi_type}")
    elif runtime == "aggregated" and nodes * hw["per_node"] > 1:
        srun_args.append("--mpi=pmix")
    # like the real slurm_run.sh, the test runs from <llm-src>/tests/integration/defs
    pytest_cmd = (
        'cd "$llmSrcNode/tests/integration/defs" && pytest -v perf/test_perf_sanity.py'
        f" --test-list={test_list_path} --output-dir={work_dir}"
    )
    lines += ["# shellcheck disable=SC2054  # commas inside --container-mounts"]
    lines += ["srunArgs=(", *(f"  {q(a)}" for a in srun_args), ")", ""]
    # The closing lines of the real slurm_launch_draft.sh bodies (aggregated and
    # disaggregated): an "Error: ..." line and exit 1 on failure, else the success line.
    what, done = (
        ("Aggregated test", "Aggregated test completed successfully")
        if runtime == "aggregated"
        else ("Benchmark", "Disagg server and benchmark completed successfully")
    )
    lines += [
        'mkdir -p "$jobWorkspace" "$testOutputDir"',
        f'if ! srun "${{srunArgs[@]}}" --kill-on-bad-exit=1 -N "$totalNodes" '
        f"--ntasks-per-node={hw['per_node']} bash -c {q(pytest_cmd)}; then",
        f'    echo "Error: {what} failed. See slurm-${{SLURM_JOB_ID}}.out"',
        "    exit 1",
        "fi",
        f'echo "{done}"',
        'echo "Total runtime: $SECONDS seconds"',
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    record_argv()
    args = build_parser().parse_args()
    if os.environ.get("SUBMIT_STANDIN_FAIL") == "1":
        raise RuntimeError(FAIL_MESSAGE)

    llm_src = os.path.abspath(
        args.llm_src or os.path.normpath(os.path.join(HERE, "..", "..", "..", ".."))
    )
    server: str | None
    if args.test_list:
        stem, server, runtime, mode = split_case(case_from_test_list(args.test_list))
        config_yaml = config_path(llm_src, stem, mode)
        with open(config_yaml, encoding="utf-8") as handle:
            config = yaml.safe_load(handle)
    elif args.config_file:
        config_yaml = os.path.abspath(args.config_file)
        stem = os.path.splitext(os.path.basename(config_yaml))[0]
        with open(config_yaml, encoding="utf-8") as handle:
            config = yaml.safe_load(handle)
        if "worker_config" in config:
            mode = args.benchmark_mode or "e2e"
            runtime = "aggregated" if mode == "ctx_only" else "disaggregated"
            server = None
        elif "server_configs" in config:
            runtime, mode, server = "aggregated", None, args.test_name
            if not server:
                raise ValueError("--test-name is required for aggregated config")
        else:
            raise ValueError("Cannot detect config type: missing worker_config or server_configs")
    else:
        raise ValueError("Either --test-list or --config-file must be provided")

    hw = hardware(config, runtime, mode, server)
    tid = test_id(runtime, mode, stem, server)
    case = tid.rsplit("[", 1)[1].rstrip("]")

    stamp = datetime.now().strftime("%Y%m%d_%H%M%S")
    work_dir = args.work_dir or os.path.join(llm_src, "jenkins", "scripts", "perf", "local", stamp)
    os.makedirs(work_dir, exist_ok=True)
    launch_sh = args.launch_sh or os.path.join(work_dir, "slurm_launch.sh")
    test_list_path = os.path.join(work_dir, "test_list.txt")
    with open(test_list_path, "w", encoding="utf-8") as handle:
        handle.write(tid + "\n")

    text = launch_script(
        args,
        hw,
        runtime,
        work_dir=work_dir,
        llm_src=llm_src,
        config_yaml=config_yaml,
        test_list_path=test_list_path,
        case=case,
    )
    with open(launch_sh, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.chmod(launch_sh, 0o755)

    print(f"\nLaunch script generated at: {launch_sh}")
    print("\nTo submit the job, run:")
    print(f"  sbatch {launch_sh}")


if __name__ == "__main__":
    main()
