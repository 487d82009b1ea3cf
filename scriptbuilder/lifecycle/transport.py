"""Where a job's commands run and its files live: this machine or a login node.

:class:`Transport` is what the lifecycle code asks of a machine: run a command
(argv, never a shell string), read the start or the end of a file without
reading all of it (logs can be gigabytes), and write a small file. Commands
that cannot start (the tool is missing) raise :class:`TransportError` with the
tool named; a command that runs and fails is the caller's to read from the
returned :class:`subprocess.CompletedProcess`.

:class:`LocalTransport` is this machine; ``scriptbuilder.lifecycle.ssh`` holds
the ssh one.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from typing import Protocol

from scriptbuilder.lifecycle.errors import TransportError
from scriptbuilder.outputs.atomic import write_atomic

__all__ = ["LocalTransport", "Transport", "TransportError"]


class Transport(Protocol):
    def describe(self) -> str:
        """``local`` or ``ssh USER@HOST``: for messages and run.json."""
        ...

    def run(
        self, argv: Sequence[str], *, stdin: bytes | None = None, timeout: float = 60.0
    ) -> subprocess.CompletedProcess[bytes]:
        """Run ``argv`` (stdout and stderr captured); raise TransportError if it
        cannot start or outlives ``timeout`` seconds."""
        ...

    def read_tail(self, path: str, max_bytes: int) -> bytes | None:
        """At most the last ``max_bytes`` of ``path``; None when it does not exist."""
        ...

    def read_head(self, path: str, max_bytes: int) -> bytes | None:
        """At most the first ``max_bytes`` of ``path``; None when it does not exist."""
        ...

    def read_range(self, path: str, offset: int, max_bytes: int) -> bytes | None:
        """At most ``max_bytes`` of ``path`` from byte ``offset``; None when it does not exist."""
        ...

    def write_file(self, path: str, data: bytes, mode: int) -> None:
        """``path`` holds ``data`` with permission bits ``mode``."""
        ...


class LocalTransport:
    """This machine: commands by :func:`subprocess.run` (with ``env`` when given, else
    this process's environment), files by seek and read."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self.env = dict(env) if env is not None else None

    def describe(self) -> str:
        return "local"

    def run(
        self, argv: Sequence[str], *, stdin: bytes | None = None, timeout: float = 60.0
    ) -> subprocess.CompletedProcess[bytes]:
        try:
            return subprocess.run(
                list(argv), input=stdin, capture_output=True, timeout=timeout, env=self.env
            )
        except FileNotFoundError:
            raise TransportError(f"{argv[0]}: command not found (is it on PATH?)") from None
        except subprocess.TimeoutExpired:
            raise TransportError(f"{argv[0]}: no answer within {timeout:g}s") from None

    def read_tail(self, path: str, max_bytes: int) -> bytes | None:
        try:
            with open(path, "rb") as f:
                size = f.seek(0, os.SEEK_END)
                f.seek(max(0, size - max_bytes))
                return f.read(max_bytes)
        except (FileNotFoundError, NotADirectoryError):
            return None

    def read_head(self, path: str, max_bytes: int) -> bytes | None:
        return self.read_range(path, 0, max_bytes)

    def read_range(self, path: str, offset: int, max_bytes: int) -> bytes | None:
        try:
            with open(path, "rb") as f:
                f.seek(offset)
                return f.read(max_bytes)
        except (FileNotFoundError, NotADirectoryError):
            return None

    def write_file(self, path: str, data: bytes, mode: int) -> None:
        write_atomic(path, data, mode)
