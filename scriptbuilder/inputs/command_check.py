"""Checks that a user command, its environment and the task counts can run at all.

A job that cannot start fails only after its queue wait, so these are refused
at build time with the one-line error (a :class:`BuildError` naming the field
and the fix), by the API, ``scriptbuilder build`` and the drop-in alike:

* :func:`check_command`: a command that is empty, holds a NUL (no program
  argument can), is longer than the way it travels can carry, or that bash
  cannot parse (an unbalanced quote, an unterminated ``$(``...). The parse is
  bash's own: ``bash -n`` (which reads without running anything), once per
  command, the command on its standard input.
* :func:`check_custom_env`: ``custom_env`` must be ``NAME=VALUE`` words, read
  with the project's shell tokenizer.
* :func:`check_counts`: node and task counts no partition can hold, or above
  what any Slurm job is given.
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

    from scriptbuilder.models import BuildRequest

#: Linux refuses a single argument (or environment string) longer than
#: MAX_ARG_STRLEN = 128 KiB, terminating NUL included.
MAX_ARG_BYTES = 128 * 1024 - 1
#: A command passed as step arguments travels in pieces of at most
#: MAX_ARG_BYTES; all arguments and the environment of one program share
#: Linux's ARG_MAX (2 MiB with the usual 8 MiB stack), so a command may take
#: up to 1.5 MiB of it.
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


#: Operators of a plain list of simple commands (``a && b | c; d &``).
_LIST_OPS = frozenset({"&&", "||", "|", ";", "&", "\n"})
#: Operators a command may not end with (``;`` and ``&`` may end one).
_OPEN_OPS = frozenset({"&&", "||", "|"})
#: Words bash may read as reserved, and a command with them goes to ``bash -n``.
_RESERVED = frozenset(
    {"!", "{", "}", "[[", "]]", "case", "coproc", "do", "done", "elif", "else", "esac", "fi",
     "for", "function", "if", "in", "select", "then", "time", "until", "while"}
)  # fmt: skip


def _plain_list(tokens: list[Token]) -> bool:
    """True when ``tokens`` are simple commands joined by list operators, each
    operator between two commands (``;`` and ``&`` may also end the list), with
    no reserved word, redirection or substitution: such a command is valid shell
    syntax, and bash need not be asked. This keeps a sweep above the
    1,000 builds/s guard (``bash -n`` costs about a millisecond a command);
    anything else is read by bash itself."""
    before = "\n"  # the operator before the current token, "" after a word
    for token in tokens:
        if token.kind == "word":
            substitutes = not token.literal and ("(" in token.value or "`" in token.value)
            if (token.literal and token.value in _RESERVED) or substitutes:
                return False
            before = ""
        elif token.value not in _LIST_OPS:
            return False
        elif token.value != "\n":
            if before:  # an operator with no command before it
                return False
            before = token.value
        elif before in ("", ";", "&"):
            before = "\n"
    return before not in _OPEN_OPS


def bash_syntax_error(command: str) -> str | None:
    """bash's complaint about ``command`` (one line), or None when bash parses it.

    Runs ``bash -n`` (read, never run) on the command given on standard input,
    with an empty environment; None as well when there is no bash to ask."""
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
    """Refuse a command that cannot run: empty, a NUL, longer than ``max_bytes``
    (``carrier`` says what carries it), or not parsed by bash."""
    if not command.strip():
        raise BuildError(f"{field} is empty; give the command to run")
    size = _text_size(field, command)
    if size > max_bytes:
        raise BuildError(
            f"{field} is {size} bytes, but {carrier} carries at most {max_bytes}; "
            "shorten it or move the work into a script the command runs"
        )
    try:
        plain = _plain_list(tokenize(command))
    except ShellSyntaxError:
        plain = False  # bash's own message says what is wrong
    problem = None if plain else bash_syntax_error(command)
    if problem is not None:
        raise BuildError(
            f"{field} {short(command)} is not a command bash can run ({problem}); "
            "close every quote, $( and ( and check the syntax, as typed at a prompt"
        )


#: Bytes of ``CUSTOM_COMMAND`` one environment string can hold.
CUSTOM_COMMAND_BYTES = MAX_ARG_BYTES - len("CUSTOM_COMMAND=")


def check_custom_command(field: str, command: str) -> None:
    """:func:`check_command` for a custom command, which travels in the
    ``CUSTOM_COMMAND`` environment variable (at most 128 KiB)."""
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
    size = _text_size(field, value)
    if size > MAX_ARG_BYTES - len("CUSTOM_ENV="):
        raise BuildError(
            f"{field} is {size} bytes, but the CUSTOM_ENV environment variable it travels in "
            f"carries at most {MAX_ARG_BYTES - len('CUSTOM_ENV=')}; set fewer variables"
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
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def check_counts(
    nodes: int,
    ntasks: int,
    *,
    nodes_field: str = "node_count",
    ntasks_field: str = "ntasks",
    partition: str | None = None,
    partitions: Iterable[tuple[str, object]] = (),
) -> None:
    """Refuse node and task counts no job can get: more nodes than the partition
    (``partitions`` are ``(name, nodes)`` pairs from slurm_env.json; ``partition``
    the one in use) or than :data:`MAX_NODES`, fewer tasks than nodes, or more
    than :data:`MAX_TASKS_PER_NODE` tasks per node."""
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


#: The command field each workflow runs.
_COMMAND_FIELDS = {"pytest": "test_cmd", "eval": "eval_cmd", "bench": "bench_cmd"}


def check_request(req: BuildRequest) -> None:
    """The command checks for the fields ``req``'s workflow runs (a missing
    command is left to the workflow's own message)."""
    kind = req.workflow_type
    field = _COMMAND_FIELDS.get(kind)
    if field is not None:
        value = getattr(req, field)
        if value:
            check_command(field, value)
    elif kind == "custom":
        if req.custom_cmd and not req.custom_script:
            check_custom_command("custom_cmd", req.custom_cmd)
        check_custom_env("custom_env", req.custom_env or "")
