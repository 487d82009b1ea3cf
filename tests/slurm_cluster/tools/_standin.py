"""Shared code of the stand-in tools in this directory (nvidia-smi, pip, trtllm-*, pytest...).

Each tool appends one JSON line per invocation to the file named by ``STANDIN_RECORD``
(nothing is recorded when it is unset or empty). A record holds:

- ``tool``: the tool name; ``argv``: the full argv as strings (non-UTF-8 bytes are kept
  as lone surrogates, ``os.fsencode`` gives the exact bytes back); ``argv_hex``: the same
  argv as hex of the raw bytes;
- ``env``: the whole environment; ``cwd``: ``os.getcwd()``; ``pid``, ``ppid``, ``host``;
- ``time``: seconds since the epoch; ``seq``: position of the record in the file (0-based,
  taken under an exclusive lock, so it orders records from concurrent tasks).

Exit codes: ``STANDIN_EXIT_CODE_<TOOL>`` (tool name upper-cased, ``-`` as ``_``, e.g.
``STANDIN_EXIT_CODE_TRTLLM_BENCH``) wins over ``STANDIN_EXIT_CODE``; the default is 0.
``pip`` and ``nvidia-smi`` always exit 0; ``pytest`` exits 4 for a selector that does not
exist and skips a test whose device guard fails, as pytest does (``_pytest_standin.py``).
``STANDIN_STDOUT`` (optional) is printed to stdout by every tool, after the tool's own
output.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time

ALWAYS_SUCCEED = frozenset({"pip", "nvidia-smi"})


def _record(tool: str) -> None:
    path = os.environ.get("STANDIN_RECORD", "")
    if not path:
        return
    raw_argv = [os.fsencode(a) for a in sys.argv]
    record: dict[str, object] = {
        "tool": tool,
        "argv": list(sys.argv),
        "argv_hex": [a.hex() for a in raw_argv],
        "env": dict(os.environ),
        "cwd": os.getcwd(),
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "host": socket.gethostname(),
        "time": time.time(),
    }
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with open(fd, "rb", closefd=False) as existing:
            record["seq"] = sum(1 for _ in existing)
        line = json.dumps(record, ensure_ascii=True) + "\n"
        os.write(fd, line.encode("ascii"))
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _exit_code(tool: str) -> int:
    if tool in ALWAYS_SUCCEED:
        return 0
    specific = "STANDIN_EXIT_CODE_" + tool.upper().replace("-", "_")
    value = os.environ.get(specific) or os.environ.get("STANDIN_EXIT_CODE") or "0"
    try:
        return int(value)
    except ValueError:
        return 0


def _fake_nvidia_smi() -> None:
    count = int(os.environ.get("STANDIN_GPU_COUNT", "8"))
    if "-L" in sys.argv[1:] or "--list-gpus" in sys.argv[1:]:
        for i in range(count):
            print(f"GPU {i}: NVIDIA Stand-in GPU (UUID: GPU-00000000-0000-0000-0000-{i:012d})")
    else:
        print("NVIDIA-SMI stand-in    Driver Version: 000.00    CUDA Version: 00.0")
        print(f"{count} GPUs (stand-in, no real device)")


def main(tool: str) -> int:
    """Record this invocation and behave like ``tool`` would, minimally."""
    _record(tool)
    if tool == "trtllm-llmapi-launch" and len(sys.argv) > 1:
        sys.stdout.flush()
        try:
            os.execvp(sys.argv[1], sys.argv[1:])
        except OSError as exc:
            print(
                f"trtllm-llmapi-launch (stand-in): cannot run {sys.argv[1]!r}: {exc}",
                file=sys.stderr,
            )
            return 127
    if tool == "nvidia-smi":
        _fake_nvidia_smi()
    if tool == "pytest":
        from _pytest_standin import outcome

        code = outcome(sys.argv[1:], os.environ)
        if code is not None:
            sys.stdout.flush()
            return code
    extra = os.environ.get("STANDIN_STDOUT")
    if extra:
        print(extra)
    sys.stdout.flush()
    return _exit_code(tool)
