"""What the pytest stand-ins (tests/fake_bin/pytest, tests/slurm_cluster/tools/pytest) do
beyond recording their arguments, like real pytest where a generated job depends on it:

- every positional argument is a selector (``path``, ``path::name...``); when its path does
  not exist from the working directory, pytest prints ``ERROR: file or directory not found:
  <arg>`` and exits 4 (before running anything);
- a test file may have a side file ``<file>.gpus`` telling the device guard of its test:
  ``N`` (exactly N GPUs) or ``>=N`` (at least N). When the GPUs the process sees
  (the entries of ``CUDA_VISIBLE_DEVICES``; ``STANDIN_GPU_COUNT`` or 8 when it is unset)
  do not satisfy it, the test is skipped: ``1 skipped`` and exit 0;
- ``--test-list=FILE`` (TensorRT-LLM's conftest.py option): the test ids to run, read
  at collection. A missing FILE is pytest's ``INTERNALERROR`` and exit 3; an id whose
  file does not exist, or a perf-sanity id whose config YAML is not in the folder
  TensorRT-LLM's ``test_perf_sanity.py`` reads (``AGG_CONFIG_FOLDER`` for ``aggr-<config>-...``,
  ``DISAGG_CONFIG_FOLDER`` for ``aggr-ctx_only-<config>`` and ``disagg-<mode>-<config>``;
  relative folders are under ``LLM_ROOT``, by default
  three folders above the working directory), is not collected: ``no tests ran`` and exit 5.

Anything else: ``None`` (the caller's own exit code applies).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence

# pytest options (and common plugins') whose value is the next argument.
VALUE_OPTIONS = frozenset(
    {
        "-k", "-m", "-p", "-o", "-c", "-W", "-n", "-r", "--deselect", "--ignore",
        "--ignore-glob", "--timeout", "--junitxml", "--junit-xml", "--rootdir", "--basetemp",
        "--confcutdir", "--log-file", "--log-level", "--durations", "--maxfail", "--tb",
        "--import-mode", "--override-ini", "--capture", "--reruns", "--dist",
        "--test-list", "--test-prefix", "--output-dir",  # TensorRT-LLM's conftest.py
    }
)  # fmt: skip


def selectors(argv: Sequence[str]) -> list[str]:
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg.startswith("-") and arg != "-":
            skip = arg in VALUE_OPTIONS
        else:
            out.append(arg)
    return out


def visible_gpus(env: Mapping[str, str]) -> int:
    devices = env.get("CUDA_VISIBLE_DEVICES")
    if devices is None:
        return int(env.get("STANDIN_GPU_COUNT", "8"))
    return len([d for d in devices.split(",") if d.strip()])


def outcome(argv: Sequence[str], env: Mapping[str, str]) -> int | None:
    """Exit code pytest would give for ``argv`` in the working directory, or None."""
    if (listed := test_list_outcome(argv, env)) is not None:
        return listed
    chosen = selectors(argv)
    missing = [arg for arg in chosen if not os.path.exists(arg.split("::", 1)[0])]
    if missing:
        for arg in missing:
            print(f"ERROR: file or directory not found: {arg}", file=sys.stderr)
        print("no tests ran in 0.01s")
        return 4
    seen = visible_gpus(env)
    for arg in chosen:
        side = arg.split("::", 1)[0] + ".gpus"
        if not os.path.isfile(side):
            continue
        with open(side, encoding="utf-8") as file:
            want = file.read().strip()
        at_least = want.startswith(">=")
        count = int(want[2:] if at_least else want)
        if (seen < count) if at_least else (seen != count):
            need = f"at least {count}" if at_least else f"exactly {count}"
            print(f"SKIPPED [1] {arg}: needs {need} GPUs, sees {seen}")
            print("1 skipped in 0.01s")
            return 0
    return None


#: A perf-sanity id's case: ``aggr[_upload]-<config>[-<server>]``,
#: ``aggr[_upload]-ctx_only-<config>``, ``disagg[_upload]-<mode>-<config>``.
_PERF_CASE = re.compile(r"test_e2e\[(aggr|disagg)(?:_upload)?-([^\]]+)\]")


def _option(argv: Sequence[str], name: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg.startswith(name + "="):
            return arg[len(name) + 1 :]
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
    return None


def _perf_config(test_id: str, env: Mapping[str, str]) -> str | None:
    """The config YAML a perf-sanity id needs, or None for another test."""
    match = _PERF_CASE.search(test_id)
    if match is None:
        return None
    kind, labels = match[1], match[2].split("-")
    disagg = kind == "disagg" or labels[0] == "ctx_only"
    stem = "-".join(labels[1:]) if disagg else labels[0]
    name, default = (
        ("DISAGG_CONFIG_FOLDER", "tests/scripts/perf-sanity/disaggregated")
        if disagg
        else ("AGG_CONFIG_FOLDER", "tests/scripts/perf-sanity/aggregated")
    )
    # conftest.py's llm_root(): LLM_ROOT, else three folders above tests/integration/defs,
    # where the tests run from
    root = env.get("LLM_ROOT") or os.path.normpath(os.path.join(os.getcwd(), "../../.."))
    folder = os.path.join(root, env.get(name) or default)
    return os.path.join(folder, f"{stem}.yaml")


def test_list_outcome(argv: Sequence[str], env: Mapping[str, str]) -> int | None:
    """Exit code for a ``--test-list`` run that collects nothing, or None."""
    path = _option(argv, "--test-list")
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as file:
            ids = [line.strip() for line in file if line.strip()]
    except OSError as exc:
        print(f"INTERNALERROR> {type(exc).__name__}: {exc}")
        return 3
    for test_id in ids:
        config = _perf_config(test_id, env)
        if not os.path.exists(test_id.split("::", 1)[0]) or (
            config is not None and not os.path.isfile(config)
        ):
            why = f" (no {config})" if config else ""
            print(f"ERROR: not found: {test_id}{why}")
            print("no tests ran in 0.01s")
            return 5
    return None
