"""What the pytest stand-ins (tests/fake_bin/pytest, tests/slurm_cluster/tools/pytest) do
beyond recording their arguments, like real pytest where a generated job depends on it:

- every positional argument is a selector (``path``, ``path::name...``); when its path does
  not exist from the working directory, pytest prints ``ERROR: file or directory not found:
  <arg>`` and exits 4 (before running anything);
- a test file may have a side file ``<file>.gpus`` telling the device guard of its test:
  ``N`` (exactly N GPUs) or ``>=N`` (at least N). When the GPUs the process sees
  (the entries of ``CUDA_VISIBLE_DEVICES``; ``STANDIN_GPU_COUNT`` or 8 when it is unset)
  do not satisfy it, the test is skipped: ``1 skipped`` and exit 0.

Anything else: ``None`` (the caller's own exit code applies).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

# pytest options (and common plugins') whose value is the next argument.
VALUE_OPTIONS = frozenset(
    {
        "-k", "-m", "-p", "-o", "-c", "-W", "-n", "-r", "--deselect", "--ignore",
        "--ignore-glob", "--timeout", "--junitxml", "--junit-xml", "--rootdir", "--basetemp",
        "--confcutdir", "--log-file", "--log-level", "--durations", "--maxfail", "--tb",
        "--import-mode", "--override-ini", "--capture", "--reruns", "--dist",
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
