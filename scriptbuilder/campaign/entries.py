"""The entries of a campaign: the lines of a list file in TensorRT-LLM's grammar, or the
tests of the test-db blocks a selection matches.

A line is ``TEST_ID [-k EXPR | -m EXPR]... [MARKER]...`` with markers ``TIMEOUT (N)``
(minutes), ``ISOLATION`` (runs in a job of its own) and ``SKIP [(reason)]`` (left out,
reported), separated by blanks or commas; blank lines are skipped and ``#`` at the
start of a line or after a blank starts a comment.  Test-db lines are the same grammar.

A test-db block matches a selection when every condition it states holds for the value
the selection gives for that key: ``ranges`` (``gte``/``lte``/``gt``/``lt``), ``wildcards``
(shell patterns, any letter case; a list matches when one pattern does) and ``terms``
(equal; YAML booleans as ``true``/``false``).  A key the selection does not give does not
restrict the block.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from scriptbuilder.errors import BuildError
from scriptbuilder.inputs.request_file import SAFE_LOADER, read_limited
from scriptbuilder.inputs.tests.testdb import LISTS
from scriptbuilder.models.request import TestDbSelection

#: Largest list file read (TensorRT-LLM's largest lists are a few hundred KiB).
MAX_LIST_BYTES = 16 * 1024 * 1024
_OPTION = re.compile(r"""\s+(-[km])\s+("(?:[^"\\]|\\.)*"|'[^']*'|[^\s"']+)""")
_MARKER = re.compile(
    r"\s*,?\s*(?:(TIMEOUT)\s*\(\s*(\d+)\s*\)|(ISOLATION)|(SKIP)(?:\s*\(([^)]*)\))?)(?=\s|,|$)"
)
_CONDITIONS = ("ranges", "wildcards", "terms")
_BOUNDS = {"gte": int.__ge__, "lte": int.__le__, "gt": int.__gt__, "lt": int.__lt__}


@dataclass(frozen=True)
class Entry:
    """One test of a campaign, as its list wrote it."""

    test_id: str
    #: ``file:line`` of the list (the test-db YAML file for a selection).
    where: str
    keyword: str | None = None
    mark: str | None = None
    timeout_minutes: int | None = None
    isolation: bool = False
    #: Set for an entry marked SKIP: its reason ("" when none was given).
    skip: str | None = None

    @property
    def selector(self) -> str:
        """The entry as pytest arguments: the id, then its ``-k``/``-m`` expression."""
        words = [self.test_id]
        words += ["-k", self.keyword] if self.keyword is not None else []
        words += ["-m", self.mark] if self.mark is not None else []
        return " ".join(shlex.quote(word) for word in words)

    @property
    def filtered(self) -> bool:
        return self.keyword is not None or self.mark is not None


def _comment_start(line: str) -> int:
    """Where a ``#`` comment starts (outside quotes, at the start or after a blank)."""
    quote = ""
    for i, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1] in " \t"):
            return i
    return len(line)


def parse_line(text: str, where: str) -> Entry | None:
    """The entry of one list line (None for a blank or comment line); a line that does
    not parse is a :class:`BuildError` naming ``where``."""
    line = text[: _comment_start(text)].strip()
    if not line:
        return None
    test_id, *tail = line.split(None, 1)
    if test_id.startswith("-"):
        raise BuildError(f"{where}: the line starts with {test_id!r}; start it with the test id")
    rest = " " + "".join(tail)
    options: dict[str, str] = {}
    while (found := _OPTION.match(rest)) is not None:
        flag, value = found[1], shlex.split(found[2])[0] if found[2] else ""
        if flag in options:
            raise BuildError(f"{where}: {flag} given twice; keep one expression per entry")
        options[flag], rest = value, rest[found.end() :]
    fields: dict[str, Any] = {}
    while rest.strip():
        marker = _MARKER.match(rest)
        if marker is None:
            bad = rest.strip().split()[0]
            raise BuildError(
                f"{where}: {bad!r} is not understood after the test id; write TEST_ID "
                '[-k "EXPR"] [-m "EXPR"] [TIMEOUT (MINUTES)] [ISOLATION] [SKIP (REASON)]'
            )
        if marker[1]:
            fields["timeout_minutes"] = int(marker[2])
            if fields["timeout_minutes"] < 1:
                raise BuildError(f"{where}: TIMEOUT (0); give at least 1 minute")
        elif marker[3]:
            fields["isolation"] = True
        else:
            fields["skip"] = (marker[5] or "").strip()
        rest = rest[marker.end() :]
    return Entry(test_id, where, options.get("-k"), options.get("-m"), **fields)


def read_list(path: str) -> list[Entry]:
    """Every entry of the list file ``path``, in order."""
    text = read_limited(path, f"test_list {path}", MAX_LIST_BYTES)
    entries = (parse_line(line, f"{path}:{n}") for n, line in enumerate(text.splitlines(), 1))
    return [entry for entry in entries if entry is not None]


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _holds(kind: str, condition: Any, value: Any, where: str) -> bool:
    """Whether the selection's ``value`` meets one condition of a block."""
    if kind == "ranges":
        if not isinstance(condition, Mapping) or set(condition) - set(_BOUNDS):
            raise BuildError(f"{where}: a range takes gte, lte, gt and lt; fix the block")
        try:
            number = int(value)
        except (TypeError, ValueError):
            raise BuildError(f"{where}: {value!r} is not a number; pass one") from None
        return all(_BOUNDS[op](number, int(bound)) for op, bound in condition.items())
    if kind == "wildcards":
        patterns = condition if isinstance(condition, list) else [condition]
        return any(fnmatch.fnmatchcase(_text(value).lower(), _text(p).lower()) for p in patterns)
    return _text(condition) == _text(value)


def _node_line(node: yaml.Node, path: str) -> str:
    return f"{path}:{node.start_mark.line + 1}"


def select_test_db(repo_root: str, selection: TestDbSelection) -> list[Entry]:
    """The entries of every block of ``<repo_root>/<LISTS>/<context>.yml`` whose condition
    the selection meets, in file order; a selection matching no block is a BuildError."""
    path = os.path.join(repo_root, LISTS, f"{selection.context}.yml")
    if "/" in selection.context or not os.path.isfile(path):
        raise BuildError(
            f"test_db.context {selection.context!r}: {path} does not exist; pass the name of "
            f"a list in {os.path.join(repo_root, LISTS)}"
        )
    text = read_limited(path, f"test-db list {path}", MAX_LIST_BYTES)
    try:
        root, doc = yaml.compose(text, Loader=SAFE_LOADER), yaml.load(text, Loader=SAFE_LOADER)
    except yaml.YAMLError as exc:
        raise BuildError(f"test-db list {path} is not YAML ({exc}); fix its syntax") from None
    values: dict[str, Any] = dict(selection.terms)
    given = {"system_gpu_count": selection.gpus, "gpu": selection.gpu}
    given |= {"stage": selection.stage, "backend": selection.backend}
    values |= {key: value for key, value in given.items() if value is not None}
    mapping = root.value if isinstance(root, yaml.MappingNode) else []
    nodes = [v for k, v in mapping if k.value == selection.context]
    blocks = doc.get(selection.context) if isinstance(doc, dict) else None
    if not isinstance(blocks, list) or not nodes or not isinstance(nodes[0], yaml.SequenceNode):
        raise BuildError(f"{path} holds no list of blocks named {selection.context}; fix it")
    entries: list[Entry] = []
    for data, block in zip(blocks, nodes[0].value, strict=True):
        where = _node_line(block, path)
        condition = data.get("condition") or {} if isinstance(data, dict) else None
        if not isinstance(condition, dict) or set(condition) - set(_CONDITIONS):
            raise BuildError(
                f"{where}: a block's condition holds {', '.join(_CONDITIONS)} only; fix it"
            )
        if all(
            _holds(kind, wanted, values[key], f"{where} ({kind}.{key})")
            for kind in _CONDITIONS
            for key, wanted in (condition.get(kind) or {}).items()
            if key in values
        ):
            tests = [v for k, v in block.value if k.value == "tests"]
            for node in tests[0].value if tests and isinstance(tests[0], yaml.SequenceNode) else ():
                entry = parse_line(str(node.value), _node_line(node, path))
                entries += [entry] if entry is not None else []
    if not entries:
        shown = ", ".join(f"{k}={_text(v)}" for k, v in values.items()) or "no values"
        raise BuildError(
            f"test_db: no block of {path} matches {shown}; check the values against the "
            "blocks' condition"
        )
    return entries
