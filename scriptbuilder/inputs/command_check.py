"""Build-time refusal of a user command, environment or task count that cannot run
(a job that cannot start fails only after its queue wait).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from typing import TYPE_CHECKING

from scriptbuilder.errors import BuildError
from scriptbuilder.inputs.shellwords import ShellSyntaxError, Token, tokenize

if TYPE_CHECKING:
    from collections.abc import Iterable

#: Linux refuses a single argument (or environment string) longer than
#: MAX_ARG_STRLEN = 128 KiB, terminating NUL included.
MAX_ARG_BYTES = 128 * 1024 - 1
#: A command travels as step arguments sharing Linux's ARG_MAX (2 MiB) with the environment.
MAX_COMMAND_BYTES = 1536 * 1024
#: Slurm's default ``MaxTasksPerNode``.
MAX_TASKS_PER_NODE = 512
#: More nodes than any one job is given on the clusters this builder targets.
MAX_NODES = 10_000
#: Seconds ``bash -n`` may take to read a command.
BASH_TIMEOUT = 10.0

_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_MESSAGE_PREFIX = re.compile(r"^\S*bash: (?:line \d+: )?")


def short(value: str, limit: int = 60) -> str:
    """``repr(value)``, cut to about ``limit`` characters for a one-line message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 5] + "...'" + f" ({len(value)} chars)"


def bash_syntax_error(command: str) -> str | None:
    """``bash -n``'s one-line complaint about ``command``; None when it parses (or no bash)."""
    bash = shutil.which("bash")
    if bash is None:
        return None
    try:
        done = subprocess.run(
            [bash, "-n"],
            input=command.encode("utf-8", "surrogateescape"),
            capture_output=True,
            timeout=BASH_TIMEOUT,
            env={"LC_ALL": "C", "PATH": os.defpath},
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"bash did not finish reading it within {BASH_TIMEOUT:g} s"
    if done.returncode == 0:
        return None
    lines = done.stderr.decode("utf-8", "replace").splitlines() or ["syntax error"]
    return _MESSAGE_PREFIX.sub("", lines[0]).strip()


def _text_size(field: str, value: str) -> int:
    """The bytes ``value`` takes as UTF-8; a NUL or a lone surrogate is refused."""
    if "\0" in value:
        raise BuildError(
            f"{field} holds a NUL character, which no program argument can carry; remove it"
        )
    try:
        return len(value.encode("utf-8", "surrogateescape"))
    except UnicodeEncodeError:
        raise BuildError(
            f"{field} holds a lone surrogate, which is not text; pass the command as UTF-8"
        ) from None


def check_command(
    field: str,
    command: str,
    *,
    max_bytes: int = MAX_COMMAND_BYTES,
    carrier: str = "the command line of a job step",
) -> None:
    """Refuse a command that is empty, holds a NUL, exceeds ``max_bytes`` or does not parse."""
    if not command.strip():
        raise BuildError(f"{field} is empty; give the command to run")
    size = _text_size(field, command)
    if size > max_bytes:
        raise BuildError(
            f"{field} is {size} bytes, but {carrier} carries at most {max_bytes}; "
            "shorten it or move the work into a script the command runs"
        )
    try:
        tokens: list[Token] | None = tokenize(command)
    except ShellSyntaxError:
        tokens = None  # bash's own message says what is wrong
    if tokens is not None and all(t.kind == "op" for t in tokens):  # a job that runs nothing
        raise BuildError(f"{field} is empty (nothing but comments); give the command to run")
    problem = bash_syntax_error(command)
    if problem is not None:
        raise BuildError(
            f"{field} {short(command)} is not a command bash can run ({problem}); "
            "close every quote, $( and ( and check the syntax, as typed at a prompt"
        )


#: Bytes of ``CUSTOM_COMMAND`` one argument can hold (docker's ``--env=CUSTOM_COMMAND=...``).
CUSTOM_COMMAND_BYTES = MAX_ARG_BYTES - len("--env=CUSTOM_COMMAND=")


def check_custom_command(field: str, command: str) -> None:
    """:func:`check_command` for a command that travels in ``CUSTOM_COMMAND``."""
    check_command(
        field,
        command,
        max_bytes=CUSTOM_COMMAND_BYTES,
        carrier="the CUSTOM_COMMAND environment variable it travels in",
    )


def check_custom_env(field: str, value: str) -> None:
    """``value`` must be blank or ``NAME=VALUE`` words (values quoted as in bash)."""
    if not value.strip():
        return
    size, limit = _text_size(field, value), MAX_ARG_BYTES - len("--env=CUSTOM_ENV=")
    if size > limit:
        raise BuildError(
            f"{field} is {size} bytes, but the CUSTOM_ENV environment variable it travels in "
            f"carries at most {limit}; set fewer variables"
        )
    try:
        tokens = tokenize(value)
    except ShellSyntaxError as exc:
        raise BuildError(
            f"{field} {short(value)} cannot be read by bash ({exc}); write NAME=VALUE "
            "words and close every quote, e.g. A=1 B='x y'"
        ) from None
    for token in tokens:
        raw = value[token.start : token.end]
        if token.kind == "op" and token.value == "\n":
            continue
        if token.kind == "op" or _ASSIGNMENT.match(raw) is None:
            raise BuildError(
                f"{field} must be NAME=VALUE words, but {short(raw)} is not one; write e.g. "
                "A=1 B='x y' (quote values that hold spaces)"
            )


def _count(value: object) -> int | None:
    """A partition's node count (slurm_env.json writes it as a string), if known."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return int(value) if isinstance(value, str) and value.strip().isdigit() else None


def check_counts(
    nodes: int,
    ntasks: int,
    *,
    nodes_field: str = "node_count",
    ntasks_field: str = "ntasks",
    partition: str | None = None,
    partitions: Iterable[tuple[str, object]] = (),
) -> None:
    """Refuse counts no job can get (``partitions``: ``(name, nodes)`` from slurm_env.json)."""
    if nodes > MAX_NODES:
        raise BuildError(
            f"{nodes_field} = {nodes} is more nodes than a Slurm job is given (at most "
            f"{MAX_NODES}); pass the number of nodes the job needs"
        )
    if ntasks > nodes * MAX_TASKS_PER_NODE:
        raise BuildError(
            f"{ntasks_field} = {ntasks} puts more than {MAX_TASKS_PER_NODE} tasks on each of "
            f"{nodes} node(s) (Slurm's default MaxTasksPerNode); reduce {ntasks_field} or use "
            "more nodes"
        )
    known = [(name, count) for name, raw in partitions if (count := _count(raw)) is not None]
    if not known:
        return
    sizes = dict(known)
    if partition in sizes:
        size = sizes[partition]
        if nodes > size:
            bigger = sorted(name for name, count in known if count >= nodes)
            where = f"use partition {', '.join(bigger)}" if bigger else "reduce it"
            raise BuildError(
                f"{nodes_field} = {nodes}, but partition {partition} has {size} node(s) "
                f"(slurm_env.json); {where} or reduce {nodes_field} to at most {size}"
            )
        return
    largest = max(count for _, count in known)
    if nodes > largest:
        raise BuildError(
            f"{nodes_field} = {nodes}, but no partition in slurm_env.json has that many nodes "
            f"(the largest has {largest}); reduce {nodes_field} to at most {largest}"
        )
