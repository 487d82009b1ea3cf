"""How many GPUs a pytest command needs, read from the test source (never imported).

Rules
-----
* Test selectors are the words of the command whose part before the first
  ``::`` ends in ``.py`` (``path.py``, ``path.py::Class::func[case]``).  Words
  that are options, option values (``-k EXPR``, ``--deselect ID``...),
  environment assignments, redirections or the argument of ``cd`` are skipped;
  ``cd DIR &&`` makes later relative paths be tried under ``DIR`` first.
* A relative test path is tried under each search root in order; an absolute
  one as is.  A file is read once and again only when its size or mtime
  changes; it is never imported.
* Device markers: ``skip_less_device(N)``, ``skip_less_mpi_world_size(N)``,
  ``gpuN`` and ``skipif(<...device_count()> < N)`` (also ``<= N-1``,
  ``N > ...`` and ``N-1 >= ...``), written ``pytest.mark.x`` or ``mark.x``, as
  decorators, in ``pytestmark`` (a mark or a list/tuple) or in
  ``pytest.param(..., marks=...)``.  Names bound at module level to a mark,
  a list of marks or an int are followed.  ``skip_less_device_memory`` and
  every other mark are ignored.
* The closest level that carries a device marker wins: the selected
  parametrized case > the function's decorators > its class (decorators and
  class-body ``pytestmark``), then the class's in-file base classes, then an
  enclosing class > the module ``pytestmark``.  Several device markers on one
  level: the largest.
* Case ids: parametrize decorators contribute id parts bottom decorator first,
  then the class's, then the module's, joined by ``-`` (pytest's order).  A
  case's id part is its ``pytest.param(id=...)``, else its entry of
  ``ids=[...]``, else the auto id (``str`` of a constant, ``argname<index>`` for
  containers; ``name=value`` parts for TensorRT-LLM's
  ``parametrize_with_ids``).  Parts that cannot be computed statically match
  any text.
* When the selector names no case (or its case cannot be matched, which adds
  a warning) and the function has parametrized cases carrying device marks,
  each case counts with its own marks or, when it has none, with what the
  function inherits; the requirement is the largest over all cases.  A
  selector naming a class or a whole file takes the largest over every test
  in it.  Several selectors in one command: the largest.
* Speed: the file is not parsed whole.  A regex outline (multi-line strings
  masked) finds the statements of the needed scope, and only decorators and
  ``pytestmark``/constant assignments are parsed with :mod:`ast`.  If the
  outline disagrees with the source (a chunk fails to parse, a name is not
  found), the whole file is parsed with :mod:`ast` instead.
"""

from __future__ import annotations

import ast
import bisect
import os
import posixpath
import re
import shlex
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

__all__ = [
    "DeviceRequirement",
    "InspectResult",
    "TestId",
    "is_perf_sanity",
    "parse_test_ids",
    "required_devices",
]


@dataclass(frozen=True)
class DeviceRequirement:
    devices: int
    source: str


@dataclass(frozen=True)
class TestId:
    """One pytest selector: ``path[::cls][::func][[case]]``.

    ``cls`` may hold nested classes joined by ``::``.  ``cwd`` is the directory
    given to a preceding ``cd`` in the command, if any.
    """

    __test__: ClassVar[bool] = False  # not a pytest test class

    path: str
    cls: str | None = None
    func: str | None = None
    case: str | None = None
    cwd: str | None = None

    def __str__(self) -> str:
        text = self.path
        if self.cls:
            text += f"::{self.cls}"
        if self.func:
            text += f"::{self.func}"
        if self.case is not None:
            text += f"[{self.case}]"
        return text


@dataclass
class InspectResult:
    requirement: DeviceRequirement | None
    warnings: list[str] = field(default_factory=list)
    test_ids: list[TestId] = field(default_factory=list)


# --------------------------------------------------------------------------
# Command line -> test ids
# --------------------------------------------------------------------------

_PERF_SANITY_MARKERS = ("perf-sanity", "perf_sanity", "test_perf_sanity.py")

# Options (pytest, python, TensorRT-LLM conftest) whose value is the next word.
_VALUE_OPTIONS = frozenset(
    {
        "-k", "-m", "-p", "-o", "-c", "-W", "-n", "-F", "-S", "-O", "-P", "-R",
        "--timeout", "--timeout-method", "--junitxml", "--junit-xml", "--basetemp",
        "--rootdir", "--confcutdir", "--deselect", "--ignore", "--ignore-glob",
        "--log-file", "--log-level", "--durations", "--maxfail", "--tb", "--reruns",
        "--import-mode", "--override-ini", "--capture", "--dist", "--cov",
        "--cov-report", "--splits", "--group", "--test-list", "--waives-file",
        "--output-dir", "--test-prefix", "--regexp", "--perf-log-formats",
        "--workspace", "--ws", "--test-model-suites", "--periodic-interval",
        "--periodic-batch-size", "--html",
    }
)  # fmt: skip
_SHELL_PUNCT = frozenset("();<>|&")
_CWD_PREFIX = re.compile(r"^(?:\$\{?\w+\}?|~)/*")


def is_perf_sanity(test_cmd: str) -> bool:
    """True when the command runs a perf-sanity test."""
    return any(marker in test_cmd for marker in _PERF_SANITY_MARKERS)


def _shell_words(cmd: str) -> list[str]:
    lexer = shlex.shlex(cmd, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    return list(lexer)


def _join_cwd(current: str | None, new: str) -> str | None:
    if not posixpath.isabs(new):
        new = _CWD_PREFIX.sub("", new)  # "$LLM_ROOT/tests/x" -> "tests/x"
    if not new:
        return current
    if current is not None and not posixpath.isabs(new):
        new = posixpath.join(current, new)
    return posixpath.normpath(new)


def _parse_selector(word: str, cwd: str | None) -> TestId | None:
    head, _, rest = word.partition("::")
    if not head.endswith(".py") or "=" in head or "[" in head:
        return None
    case: str | None = None
    if "[" in rest:
        cut = rest.index("[")
        case = rest[cut + 1 :]
        case = case[:-1] if case.endswith("]") else case
        rest = rest[:cut]
    names = [name for name in rest.split("::") if name]
    cls: str | None = None
    func: str | None = None
    if len(names) == 1:
        if case is None and names[0][:1].isupper():
            cls = names[0]
        else:
            func = names[0]
    elif names:
        cls = "::".join(names[:-1])
        func = names[-1]
    return TestId(posixpath.normpath(head), cls, func, case, cwd)


def _is_pytest_word(word: str) -> bool:
    return posixpath.basename(word) in ("pytest", "py.test")


def parse_test_ids(test_cmd: str) -> list[TestId]:
    """See :func:`_parse_test_ids`; the last few commands' answers are reused."""
    hit = _recent_ids.get(test_cmd)
    if hit is None:
        hit = tuple(_parse_test_ids(test_cmd))
        if len(_recent_ids) >= 64:
            _recent_ids.clear()
        _recent_ids[test_cmd] = hit
    return list(hit)


_recent_ids: dict[str, tuple[TestId, ...]] = {}


def _parse_test_ids(test_cmd: str) -> list[TestId]:
    """The test selectors of a pytest command line, in order, without duplicates.

    The command is cut into simple commands at ``&&``, ``||``, ``;``, ``|`` and
    ``&``; when some of them run pytest (a ``pytest`` word or ``-m pytest``),
    only those are searched, so ``| tee log.py`` is not a selector.
    """
    try:
        words = _shell_words(test_cmd)
    except ValueError:
        return []
    segments: list[tuple[list[TestId], bool]] = []
    current: list[TestId] = []
    runs_pytest = False
    cwd: str | None = None
    skip_next = False
    cd_arg = False
    for word in words:
        is_op = bool(word) and all(ch in _SHELL_PUNCT for ch in word)
        redirect = is_op and ("<" in word or ">" in word)
        if is_op and not redirect:
            segments.append((current, runs_pytest))
            current, runs_pytest = [], False
        elif not is_op and _is_pytest_word(word):
            runs_pytest = True  # also `python -m pytest`
        if skip_next:
            skip_next = False
            if not is_op:
                continue
        if cd_arg:
            cd_arg = False
            if not is_op:
                cwd = _join_cwd(cwd, word)
                continue
        if is_op:
            skip_next = redirect  # the redirection target
            continue
        if word == "cd":
            cd_arg = True
            continue
        if word.startswith("-"):
            skip_next = word in _VALUE_OPTIONS
            continue
        tid = _parse_selector(word, cwd)
        if tid is not None:
            current.append(tid)
    segments.append((current, runs_pytest))
    with_pytest = any(flag for _ids, flag in segments)
    found: list[TestId] = []
    for ids, flag in segments:
        if flag or not with_pytest:
            found.extend(tid for tid in ids if tid not in found)
    return found


# --------------------------------------------------------------------------
# Source outline: statements found by regex, only small chunks parsed
# --------------------------------------------------------------------------


class _OutlineFailed(Exception):
    """The regex outline does not match the source; parse the file whole."""


# Comments and string literals; multi-line matches are masked from the outline.
_LEXEMES = re.compile(
    r"#[^\n]*"
    r'|"""(?:[^"\\]|\\.|"(?!""))*"""'
    r"|'''(?:[^'\\]|\\.|'(?!''))*'''"
    r'|"(?:[^"\\\n]|\\.)*"'
    r"|'(?:[^'\\\n]|\\.)*'",
    re.S,
)
_DEF_RE = re.compile(r"(?:async[ \t]+)?def[ \t]+([A-Za-z_]\w*)")
_CLASS_RE = re.compile(r"class[ \t]+([A-Za-z_]\w*)[ \t]*")
_ASSIGN_RE = re.compile(r"([A-Za-z_]\w*)[ \t]*(?::[^=\n]+)?=(?!=)")
_BODY_LINE = re.compile(r"^([ \t]+)(?=[^\s#])", re.M)
_START_PATTERNS: dict[str, re.Pattern[str]] = {}


def _start_pattern(indent: str) -> re.Pattern[str]:
    pattern = _START_PATTERNS.get(indent)
    if pattern is None:
        pattern = re.compile("^" + re.escape(indent) + r"(?=[^\s#)\]}])", re.M)
        _START_PATTERNS[indent] = pattern
    return pattern


@dataclass
class _Stmt:
    kind: str  # "def" | "class" | "assign" | "other"
    name: str
    deco: int | None  # offset of the first decorator line
    pos: int  # offset of the statement's first line
    end: int  # offset of the next statement at this level (or region end)
    indent: str


class _Source:
    def __init__(self, text: str) -> None:
        self.text = text
        self._newlines: list[int] | None = None
        self._span_starts: list[int] = []
        self._span_ends: list[int] = []
        self._spans_done = False
        # decorator chunks not parsed yet: (holder, deco_start, def_pos, indent)
        self.pending: list[tuple[_Func, int, int, str]] = []

    def prefetch(self) -> None:
        """Parse every registered, not yet parsed decorator chunk in one go."""
        todo = [item for item in self.pending if item[0].decorators_loaded is None]
        self.pending = []
        if todo:
            parsed = self.parse_stub_decorators([(d, p, i) for _f, d, p, i in todo])
            for (func, _d, _p, _i), decorators in zip(todo, parsed, strict=False):
                func.decorators_loaded = decorators

    def lineno(self, pos: int) -> int:
        if self._newlines is None:
            text = self.text
            newlines: list[int] = []
            at = text.find("\n")
            while at >= 0:
                newlines.append(at)
                at = text.find("\n", at + 1)
            self._newlines = newlines
        return bisect.bisect_left(self._newlines, pos) + 1

    def in_string(self, pos: int) -> bool:
        if not self._spans_done:
            self._spans_done = True
            if '"""' in self.text or "'''" in self.text:
                for match in _LEXEMES.finditer(self.text):
                    if "\n" in match.group():
                        self._span_starts.append(match.start())
                        self._span_ends.append(match.end())
        idx = bisect.bisect_right(self._span_starts, pos) - 1
        return idx >= 0 and self._span_starts[idx] < pos < self._span_ends[idx]

    def statements(self, start: int, end: int, indent: str) -> list[_Stmt]:
        text = self.text
        starts = [
            m.start()
            for m in _start_pattern(indent).finditer(text, start, end)
            if not self.in_string(m.start())
        ]
        out: list[_Stmt] = []
        deco: int | None = None
        for i, pos in enumerate(starts):
            nxt = starts[i + 1] if i + 1 < len(starts) else end
            body = pos + len(indent)
            if text.startswith("@", body):
                if deco is None:
                    deco = pos
                continue
            if m := _DEF_RE.match(text, body):
                out.append(_Stmt("def", m.group(1), deco, pos, nxt, indent))
            elif m := _CLASS_RE.match(text, body):
                out.append(_Stmt("class", m.group(1), deco, pos, nxt, indent))
            elif m := _ASSIGN_RE.match(text, body):
                out.append(_Stmt("assign", m.group(1), None, pos, nxt, indent))
            else:
                out.append(_Stmt("other", "", None, pos, nxt, indent))
            deco = None
        return out

    def _parse_padded(self, pieces: list[tuple[int, str]]) -> list[ast.stmt]:
        """Parse ``(first_line, text)`` pieces, padded with blank lines to their real lines.

        Nodes then carry the file's line numbers without ``ast.increment_lineno``
        (which costs a walk of every node).  Pieces must be in file order and
        not overlap; the caller guarantees that.
        """
        parts: list[str] = []
        line = 1
        for first, text in pieces:
            parts.append("\n" * (first - line))
            parts.append(text)
            line = first + text.count("\n")
        try:
            return ast.parse("".join(parts)).body
        except (SyntaxError, ValueError) as exc:
            raise _OutlineFailed(str(exc)) from exc

    def parse_stub_decorators(self, items: Sequence[tuple[int, int, str]]) -> list[list[ast.expr]]:
        """Decorators of ``(deco_start, def_pos, indent)`` chunks, parsed together.

        Each chunk becomes ``<decorators> def _(): pass`` (inside ``if 1:`` when
        indented, the ``if`` on the line above the first decorator).
        """
        order = sorted(range(len(items)), key=lambda i: items[i][0])
        groups: list[list[tuple[int, tuple[int, str]]]] = [[]]
        next_free = 1
        for i in order:
            deco, pos, indent = items[i]
            first = self.lineno(deco) - (1 if indent else 0)
            if first < 1:
                raise _OutlineFailed("indented code on the first line")
            if first < next_free:  # touches the previous piece: parse separately
                groups.append([])
            text = ("if 1:\n" if indent else "") + self.text[deco:pos] + indent + "def _(): pass\n"
            groups[-1].append((i, (first, text)))
            next_free = first + text.count("\n")
        result: list[list[ast.expr]] = [[] for _ in items]
        for group in groups:
            if not group:
                continue
            body = self._parse_padded([piece for _i, piece in group])
            if len(body) != len(group):
                raise _OutlineFailed("decorator chunk count")
            for (i, _piece), node in zip(group, body, strict=False):
                func = node.body[0] if isinstance(node, ast.If) and node.body else node
                if not isinstance(func, ast.FunctionDef):
                    raise _OutlineFailed("decorator chunk shape")
                result[i] = func.decorator_list
        return result

    def parse_assign_value(self, stmt: _Stmt) -> ast.expr | None:
        first = self.lineno(stmt.pos) - (1 if stmt.indent else 0)
        if first < 1:
            raise _OutlineFailed("indented code on the first line")
        text = ("if 1:\n" if stmt.indent else "") + self.text[stmt.pos : stmt.end]
        body = self._parse_padded([(first, text)])
        node = body[0] if body else None
        if isinstance(node, ast.If) and stmt.indent and node.body:
            node = node.body[0]
        return node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None


# --------------------------------------------------------------------------
# Scope model shared by the outline and the full-AST builders
# --------------------------------------------------------------------------


class _Func:
    def __init__(self, name: str, decorators: list[ast.expr] | None = None) -> None:
        self.name = name
        self.decorators_loaded = decorators
        self.loader: Callable[[], list[ast.expr]] | None = None

    @property
    def decorators(self) -> list[ast.expr]:
        if self.decorators_loaded is None:
            assert self.loader is not None
            self.decorators_loaded = self.loader()
        return self.decorators_loaded


class _Scope:
    """A module or a class: its own marks and its members, loaded lazily."""

    def __init__(
        self,
        kind: str,
        name: str,
        parent: _Scope | None,
        bases: list[str],
        load_marks: Callable[[], list[ast.expr]],
        load_members: Callable[[], tuple[dict[str, _Func], dict[str, _Scope]]],
    ) -> None:
        self.kind = kind
        self.name = name
        self.parent = parent
        self.bases = bases
        self._load_marks = load_marks
        self._load_members = load_members
        self._marks: list[ast.expr] | None = None
        self._members: tuple[dict[str, _Func], dict[str, _Scope]] | None = None
        self.prefetch: Callable[[], None] = (
            parent.prefetch if parent is not None else (lambda: None)
        )
        self.lookup: Callable[[str], ast.expr | None] = (
            parent.lookup if parent is not None else (lambda _name: None)
        )
        self.outline: bool = parent.outline if parent is not None else False

    @property
    def qualname(self) -> str:
        if self.kind == "module":
            return ""
        outer = self.parent.qualname if self.parent is not None else ""
        return f"{outer}::{self.name}" if outer else self.name

    @property
    def root(self) -> _Scope:
        scope = self
        while scope.parent is not None:
            scope = scope.parent
        return scope

    @property
    def marks(self) -> list[ast.expr]:
        """Own marks in pytest's application order."""
        if self._marks is None:
            self._marks = self._load_marks()
        return self._marks

    def _members_loaded(self) -> tuple[dict[str, _Func], dict[str, _Scope]]:
        if self._members is None:
            self._members = self._load_members()
        return self._members

    @property
    def funcs(self) -> dict[str, _Func]:
        return self._members_loaded()[0]

    @property
    def classes(self) -> dict[str, _Scope]:
        return self._members_loaded()[1]


def _split_bases(text: str) -> list[str]:
    bases = []
    for part in text.split(","):
        part = part.strip()
        if re.fullmatch(r"[A-Za-z_][\w.]*", part):
            bases.append(part)
    return bases


def _outline_module(src: _Source) -> _Scope:
    stmts = src.statements(0, len(src.text), "")
    assigns: dict[str, _Stmt] = {}
    for stmt in stmts:
        if stmt.kind == "assign":
            assigns[stmt.name] = stmt  # last binding wins
    cache: dict[str, ast.expr | None] = {}

    def lookup(name: str) -> ast.expr | None:
        if name not in cache:
            stmt = assigns.get(name)
            cache[name] = src.parse_assign_value(stmt) if stmt is not None else None
        return cache[name]

    def load_marks() -> list[ast.expr]:
        value = lookup("pytestmark")
        return [value] if value is not None else []

    module = _Scope("module", "", None, [], load_marks, lambda: ({}, {}))
    module.lookup = lookup
    module.outline = True
    module.prefetch = src.prefetch
    module._load_members = lambda: _outline_members(src, module, stmts)
    return module


def _decorator_loader(
    src: _Source, deco: int, pos: int, indent: str
) -> Callable[[], list[ast.expr]]:
    return lambda: src.parse_stub_decorators([(deco, pos, indent)])[0]


def _stub(src: _Source, name: str, stmt: _Stmt) -> _Func:
    """A function (or a class's decorator holder) whose decorators parse on demand."""
    if stmt.deco is None:
        return _Func(name, [])
    func = _Func(name, None)
    func.loader = _decorator_loader(src, stmt.deco, stmt.pos, stmt.indent)
    src.pending.append((func, stmt.deco, stmt.pos, stmt.indent))
    return func


def _outline_members(
    src: _Source, owner: _Scope, stmts: list[_Stmt]
) -> tuple[dict[str, _Func], dict[str, _Scope]]:
    funcs: dict[str, _Func] = {}
    classes: dict[str, _Scope] = {}
    for stmt in stmts:
        if stmt.kind == "def":
            funcs[stmt.name] = _stub(src, stmt.name, stmt)
        elif stmt.kind == "class":
            classes[stmt.name] = _outline_class(src, owner, stmt)
    return funcs, classes


def _outline_class(src: _Source, parent: _Scope, stmt: _Stmt) -> _Scope:
    text = src.text
    head = _CLASS_RE.match(text, stmt.pos + len(stmt.indent))
    assert head is not None
    at = head.end()
    bases: list[str] = []
    if text.startswith("(", at):
        depth = 0
        close = at
        while close < stmt.end:
            ch = text[close]
            if ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth -= 1
                if depth == 0:
                    break
            close += 1
        bases = _split_bases(text[at + 1 : close])
        at = close + 1
    colon = text.find(":", at, stmt.end)
    line_end = text.find("\n", colon if colon >= 0 else at, stmt.end)
    body_start = line_end + 1 if line_end >= 0 else stmt.end
    body_cache: list[list[_Stmt]] = []
    holder = _stub(src, stmt.name, stmt)

    def body() -> list[_Stmt]:
        """The class body's statements, outlined on first use only."""
        if not body_cache:
            body_indent: str | None = None
            for match in _BODY_LINE.finditer(text, body_start, stmt.end):
                if src.in_string(match.start()):
                    continue
                if len(match.group(1)) > len(stmt.indent):
                    body_indent = match.group(1)
                break
            found: list[_Stmt] = []
            if body_indent is not None:
                found = src.statements(body_start, stmt.end, body_indent)
            body_cache.append(found)
        return body_cache[0]

    def load_marks() -> list[ast.expr]:
        marks: list[ast.expr] = []
        for item in body():
            if item.kind == "assign" and item.name == "pytestmark":
                value = src.parse_assign_value(item)
                marks = [value] if value is not None else []
        marks.extend(reversed(holder.decorators))
        return marks

    scope = _Scope("class", stmt.name, parent, bases, load_marks, lambda: ({}, {}))
    scope._load_members = lambda: _outline_members(src, scope, body())
    return scope


def _flatten_body(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements of a body, looking into ``if``/``try``/``with`` blocks."""
    for node in body:
        if isinstance(node, ast.If):
            yield from _flatten_body(node.body)
            yield from _flatten_body(node.orelse)
        elif isinstance(node, ast.Try):
            yield from _flatten_body(node.body)
            for handler in node.handlers:
                yield from _flatten_body(handler.body)
            yield from _flatten_body(node.orelse)
            yield from _flatten_body(node.finalbody)
        elif isinstance(node, ast.With):
            yield from _flatten_body(node.body)
        else:
            yield node


def _assigned(node: ast.stmt) -> Iterator[tuple[str, ast.expr]]:
    if isinstance(node, ast.Assign) and node.value is not None:
        for target in node.targets:
            if isinstance(target, ast.Name):
                yield target.id, node.value
    elif (
        isinstance(node, ast.AnnAssign)
        and node.value is not None
        and isinstance(node.target, ast.Name)
    ):
        yield node.target.id, node.value


def _ast_members(
    owner: _Scope, body: list[ast.stmt]
) -> tuple[dict[str, _Func], dict[str, _Scope], list[ast.expr]]:
    funcs: dict[str, _Func] = {}
    classes: dict[str, _Scope] = {}
    pytestmark: list[ast.expr] = []
    for node in _flatten_body(body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            funcs[node.name] = _Func(node.name, list(node.decorator_list))
        elif isinstance(node, ast.ClassDef):
            classes[node.name] = _ast_class(owner, node)
        else:
            for name, value in _assigned(node):
                if name == "pytestmark":
                    pytestmark = [value]
    return funcs, classes, pytestmark


def _ast_class(parent: _Scope, node: ast.ClassDef) -> _Scope:
    bases = [ast.unparse(base) for base in node.bases]
    scope = _Scope("class", node.name, parent, bases, lambda: [], lambda: ({}, {}))
    funcs, classes, pytestmark = _ast_members(scope, node.body)
    marks = [*pytestmark, *reversed(node.decorator_list)]
    scope._load_marks = lambda: marks
    scope._load_members = lambda: (funcs, classes)
    return scope


def _ast_module(text: str, filename: str) -> _Scope:
    tree = ast.parse(text, filename=filename)
    names: dict[str, ast.expr] = {}
    for node in _flatten_body(tree.body):
        for name, value in _assigned(node):
            names[name] = value
    module = _Scope("module", "", None, [], lambda: [], lambda: ({}, {}))
    module.lookup = names.get
    funcs, classes, pytestmark = _ast_members(module, tree.body)
    module._load_marks = lambda: pytestmark
    module._load_members = lambda: (funcs, classes)
    return module


# --------------------------------------------------------------------------
# Marks
# --------------------------------------------------------------------------

_GPU_MARK = re.compile(r"gpu(\d+)")
_COUNT_FUNCS = frozenset({"device_count", "get_device_count"})
_MAX_NAME_DEPTH = 4


@dataclass(frozen=True)
class _Hit:
    devices: int
    label: str
    lineno: int


@dataclass
class _Case:
    id: str | None  # None: not computable statically, matches anything
    marks: list[ast.expr]
    index: int


def _callee_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _mark_name(node: ast.expr) -> tuple[str | None, ast.Call | None]:
    """``pytest.mark.x`` / ``mark.x`` (optionally called) -> ``("x", call)``."""
    call = node if isinstance(node, ast.Call) else None
    func = call.func if call is not None else node
    if isinstance(func, ast.Attribute):
        owner = func.value
        if (isinstance(owner, ast.Name) and owner.id == "mark") or (
            isinstance(owner, ast.Attribute) and owner.attr == "mark"
        ):
            return func.attr, call
    return None, None


def _iter_marks(
    exprs: Sequence[ast.expr], scope: _Scope, depth: int = 0, use_line: int | None = None
) -> Iterator[tuple[ast.expr, int]]:
    """Marks of a decorator list or ``pytestmark``/``marks=`` value, lists flattened."""
    for expr in exprs:
        line = use_line if use_line is not None else expr.lineno
        if isinstance(expr, (ast.List, ast.Tuple)):
            yield from _iter_marks(expr.elts, scope, depth, line)
        elif isinstance(expr, ast.Name) and depth < _MAX_NAME_DEPTH:
            value = scope.lookup(expr.id)
            if value is not None:
                yield from _iter_marks([value], scope, depth + 1, line)
        else:
            yield expr, line


def _int_value(node: ast.expr, scope: _Scope, depth: int = 0) -> int | None:
    if isinstance(node, ast.Constant):
        value = node.value
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if isinstance(node, ast.Name) and depth < _MAX_NAME_DEPTH:
        bound = scope.lookup(node.id)
        return _int_value(bound, scope, depth + 1) if bound is not None else None
    if isinstance(node, ast.BinOp):
        left = _int_value(node.left, scope, depth)
        right = _int_value(node.right, scope, depth)
        if left is None or right is None:
            return None
        if isinstance(node.op, ast.Add):
            return left + right
        if isinstance(node.op, ast.Sub):
            return left - right
        if isinstance(node.op, ast.Mult):
            return left * right
        if isinstance(node.op, ast.FloorDiv) and right:
            return left // right
    return None


def _is_device_count(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and _callee_name(node.func) in _COUNT_FUNCS


def _devices_from_condition(cond: ast.expr, scope: _Scope) -> int | None:
    if isinstance(cond, ast.Constant) and isinstance(cond.value, str):
        try:
            cond = ast.parse(cond.value, mode="eval").body
        except SyntaxError:
            return None
    best: int | None = None
    for node in ast.walk(cond):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        for op, left, right in zip(node.ops, operands, operands[1:], strict=False):
            need: int | None = None
            if _is_device_count(left) and (n := _int_value(right, scope)) is not None:
                need = n if isinstance(op, ast.Lt) else n + 1 if isinstance(op, ast.LtE) else None
            elif _is_device_count(right) and (n := _int_value(left, scope)) is not None:
                need = n if isinstance(op, ast.Gt) else n + 1 if isinstance(op, ast.GtE) else None
            if need is not None and need >= 1 and (best is None or need > best):
                best = need
    return best


def _device_hit(mark: ast.expr, line: int, scope: _Scope) -> _Hit | None:
    name, call = _mark_name(mark)
    if name is None:
        return None
    if name in ("skip_less_device", "skip_less_mpi_world_size"):
        if call is not None and call.args:
            n = _int_value(call.args[0], scope)
            if n is not None and n >= 1:
                return _Hit(n, f"{name}({n})", line)
        return None
    gpu = _GPU_MARK.fullmatch(name)
    if gpu is not None:
        n = int(gpu.group(1))
        return _Hit(n, name, line) if n >= 1 else None
    if name == "skipif" and call is not None:
        cond = call.args[0] if call.args else None
        for kw in call.keywords:
            if kw.arg == "condition":
                cond = kw.value
        if cond is not None:
            n = _devices_from_condition(cond, scope)
            if n is not None:
                return _Hit(n, f"skipif({ast.unparse(cond)})", line)
    return None


def _best(hits: Sequence[_Hit]) -> _Hit | None:
    best: _Hit | None = None
    for hit in hits:
        if best is None or hit.devices > best.devices:
            best = hit
    return best


def _hits(exprs: Sequence[ast.expr], scope: _Scope) -> list[_Hit]:
    out = []
    for mark, line in _iter_marks(exprs, scope):
        hit = _device_hit(mark, line, scope)
        if hit is not None:
            out.append(hit)
    return out


def _resolve_list(node: ast.expr | None, scope: _Scope) -> list[ast.expr] | None:
    for _ in range(_MAX_NAME_DEPTH):
        if isinstance(node, ast.Name):
            node = scope.lookup(node.id)
        else:
            break
    if isinstance(node, (ast.List, ast.Tuple)):
        return list(node.elts)
    return None


def _ascii(text: str) -> str:
    return text.encode("unicode_escape").decode("ascii")


_CONTAINERS = (
    ast.List, ast.Tuple, ast.Set, ast.Dict, ast.ListComp, ast.SetComp, ast.DictComp,
    ast.GeneratorExp,
)  # fmt: skip


def _literal(node: ast.expr) -> tuple[bool, object]:
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _auto_id(node: ast.expr, argname: str, idx: int) -> str | None:
    """pytest's id for one parameter value, when it is statically known."""
    if isinstance(node, _CONTAINERS):
        return f"{argname}{idx}"
    if isinstance(node, ast.Lambda):
        return "<lambda>"
    ok, value = _literal(node)
    if not ok:
        return None
    if isinstance(value, str):
        return _ascii(value)
    if isinstance(value, bytes):
        return value.decode("ascii", "backslashreplace")
    if value is None or isinstance(value, (bool, int, float, complex)):
        return str(value)
    return f"{argname}{idx}"


def _str_id(node: ast.expr) -> str | None:
    """``str(value)`` of a constant (TensorRT-LLM ``parametrize_with_ids``)."""
    ok, value = _literal(node)
    if not ok or not (value is None or isinstance(value, (str, bool, int, float))):
        return None
    return str(value)


def _const_str(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _is_param(node: ast.expr) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Name):
        return func.id == "param"
    return isinstance(func, ast.Attribute) and func.attr == "param"


def _argnames(node: ast.expr | None) -> list[str] | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [part.strip() for part in node.value.split(",") if part.strip()]
    if isinstance(node, (ast.List, ast.Tuple)):
        names = []
        for elt in node.elts:
            if not (isinstance(elt, ast.Constant) and isinstance(elt.value, str)):
                return None
            names.append(elt.value)
        return names
    return None


def _parametrize_cases(mark: ast.expr, scope: _Scope) -> list[_Case] | None:
    """The cases of a parametrize mark, or None when ``mark`` is not one."""
    if not isinstance(mark, ast.Call):
        return None
    name, _call = _mark_name(mark)
    helper = name is None and _callee_name(mark.func) == "parametrize_with_ids"
    if name != "parametrize" and not helper:
        return None
    args = list(mark.args)
    kwargs = {kw.arg: kw.value for kw in mark.keywords if kw.arg}
    argnames = _argnames(args[0] if args else kwargs.get("argnames"))
    values = _resolve_list(args[1] if len(args) > 1 else kwargs.get("argvalues"), scope)
    if argnames is None or values is None:
        return [_Case(None, [], 0)]
    ids_node = None if helper else (args[3] if len(args) > 3 else kwargs.get("ids"))
    ids = _resolve_list(ids_node, scope) if ids_node is not None else None
    ids_unknown = ids_node is not None and ids is None
    cases = []
    for idx, elt in enumerate(values):
        marks: list[ast.expr] = []
        case_id: str | None = None
        explicit = False
        vals: list[ast.expr] | None
        if _is_param(elt):
            assert isinstance(elt, ast.Call)
            vals = list(elt.args)
            for kw in elt.keywords:
                if kw.arg == "marks":
                    marks = [kw.value]
                elif kw.arg == "id":
                    if isinstance(kw.value, ast.Constant) and kw.value.value is None:
                        continue
                    explicit = True
                    case_id = _const_str(kw.value)
        elif len(argnames) == 1:
            vals = [elt]
        else:
            vals = list(elt.elts) if isinstance(elt, (ast.Tuple, ast.List)) else None
        if not explicit and ids is not None and idx < len(ids):
            entry = ids[idx]
            if isinstance(entry, ast.Constant) and entry.value is None:
                pass  # pytest falls back to the auto id
            else:
                explicit = True
                case_id = _const_str(entry)
        if not explicit and not ids_unknown and vals is not None and len(vals) == len(argnames):
            parts = [
                (f"{n}={s}" if (s := _str_id(v)) is not None else None)
                if helper
                else _auto_id(v, n, idx)
                for n, v in zip(argnames, vals, strict=False)
            ]
            case_id = None if None in parts else "-".join(p for p in parts if p is not None)
        cases.append(_Case(case_id, marks, idx))
    return cases


def _match_case(case: str, params: list[list[_Case]]) -> list[tuple[_Case, ...]]:
    """Every way to read ``case`` as one id part per parametrize decorator."""
    found: list[tuple[_Case, ...]] = []
    limit = 64

    def walk(i: int, pos: int, chosen: tuple[_Case, ...]) -> None:
        if len(found) >= limit:
            return
        last = i == len(params) - 1
        for option in params[i]:
            if option.id is None:  # wildcard: any non-empty run of the id
                if last:
                    if pos < len(case):
                        found.append((*chosen, option))
                else:
                    for j in range(pos + 1, len(case)):
                        if case[j] == "-":
                            walk(i + 1, j + 1, (*chosen, option))
            elif case.startswith(option.id, pos):
                end = pos + len(option.id)
                if last:
                    if end == len(case):
                        found.append((*chosen, option))
                elif end < len(case) and case[end] == "-":
                    walk(i + 1, end + 1, (*chosen, option))

    if params:
        walk(0, 0, ())
    return found


# --------------------------------------------------------------------------
# Requirement of one test
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Found:
    devices: int
    label: str
    where: str
    lineno: int

    def source(self, display: str) -> str:
        return f"{self.label} on {self.where} in {display}:{self.lineno}"


def _found(hit: _Hit | None, where: str) -> _Found | None:
    return _Found(hit.devices, hit.label, where, hit.lineno) if hit is not None else None


def _larger(a: _Found | None, b: _Found | None) -> _Found | None:
    if a is None:
        return b
    if b is None or a.devices >= b.devices:
        return a
    return b


def _mro(scope: _Scope) -> Iterator[tuple[_Scope, str]]:
    """A class, then its base classes defined in the same file (breadth first)."""
    seen = {id(scope)}
    queue = [scope]
    while queue:
        item = queue.pop(0)
        yield item, (item.qualname if item is scope else f"{item.qualname} (base of {scope.name})")
        for base in item.bases:
            if "." in base:
                continue
            found = item.parent.classes.get(base) if item.parent is not None else None
            if found is None:
                found = item.root.classes.get(base)
            if found is not None and id(found) not in seen:
                seen.add(id(found))
                queue.append(found)


def _class_levels(scope: _Scope) -> Iterator[tuple[_Scope, str]]:
    """Mark levels above a test, closest first: class (and bases), outer classes, module."""
    current: _Scope | None = scope
    while current is not None:
        if current.kind == "module":
            yield current, "module"
            return
        yield from _mro(current)
        current = current.parent


def _find_func(scope: _Scope, name: str) -> _Func | None:
    if scope.kind == "module":
        return scope.funcs.get(name)
    for level, _label in _mro(scope):
        func = level.funcs.get(name)
        if func is not None:
            return func
    return None


def _func_requirement(
    owner: _Scope, func: _Func, case: str | None, warnings: list[str], display: str
) -> _Found | None:
    qual = f"{owner.qualname}::{func.name}" if owner.qualname else func.name
    root = owner.root
    params: list[list[_Case]] = []
    inherited: _Found | None = None
    levels: list[tuple[list[ast.expr], str]] = [(list(reversed(func.decorators)), qual)]
    levels += [(level.marks, label) for level, label in _class_levels(owner)]
    for exprs, label in levels:
        hits: list[_Hit] = []
        for mark, line in _iter_marks(exprs, root):
            cases = _parametrize_cases(mark, root)
            if cases is not None:
                params.append(cases)
                continue
            hit = _device_hit(mark, line, root)
            if hit is not None:
                hits.append(hit)
        if inherited is None and hits:
            inherited = _found(_best(hits), label)

    if not params:
        return inherited
    if case is not None:
        combos = _match_case(case, params)
        if combos:
            case_hits = [hit for combo in combos for c in combo for hit in _hits(c.marks, root)]
            return _found(_best(case_hits), f"{qual}[{case}]") or inherited
        warnings.append(
            f"case [{case}] of {display}::{qual} matches none of its parametrize ids;"
            " using the largest requirement over all its cases"
        )
    best: _Found | None = None
    for cases in params:
        for option in cases:
            shown = option.id if option.id is not None else f"#{option.index}"
            best = _larger(best, _found(_best(_hits(option.marks, root)), f"{qual}[{shown}]"))
    if best is None:
        return inherited
    unmarked_combo = all(any(not _hits(c.marks, root) for c in cases) for cases in params)
    return _larger(best, inherited) if unmarked_combo else best


def _register_tree(scope: _Scope) -> None:
    """Outline every class below ``scope`` (and its in-file bases) so all chunks are known."""
    levels = [scope] if scope.kind == "module" else [level for level, _l in _mro(scope)]
    for level in levels:
        for cls in level.classes.values():
            _register_tree(cls)


def _scope_requirement(scope: _Scope, warnings: list[str], display: str) -> _Found | None:
    """Largest requirement over every test of a class or module."""
    if scope.parent is None or scope.parent.kind == "module":
        _register_tree(scope)
        scope.prefetch()  # one parse for every decorator below (outline mode)
    best: _Found | None = None
    any_test = False
    seen: set[str] = set()
    levels = [scope] if scope.kind == "module" else [level for level, _label in _mro(scope)]
    for level in levels:
        level.prefetch()
        for name, func in level.funcs.items():
            if name.startswith("test") and name not in seen:
                seen.add(name)
                any_test = True
                best = _larger(best, _func_requirement(scope, func, None, warnings, display))
    for name, cls in scope.classes.items():
        if name.startswith("Test"):
            best = _larger(best, _scope_requirement(cls, warnings, display))
            any_test = True
    if not any_test:
        for level, label in _class_levels(scope):
            hit = _best(_hits(level.marks, level.root))
            if hit is not None:
                return _found(hit, label)
    return best


def _requirement(module: _Scope, tid: TestId, warnings: list[str], display: str) -> _Found | None:
    names = [*(tid.cls.split("::") if tid.cls else []), *([tid.func] if tid.func else [])]
    scope = module
    for i, name in enumerate(names):
        last = i == len(names) - 1
        func = _find_func(scope, name) if last else None
        if func is not None:
            return _func_requirement(scope, func, tid.case, warnings, display)
        cls = scope.classes.get(name)
        if cls is None:
            if module.outline:
                raise _OutlineFailed(f"{name} not found")
            kind = "test" if last else "class"
            warnings.append(
                f"{kind} {name} not found in {display}; using the markers of "
                f"{scope.qualname or 'the module'}"
            )
            hit = None
            for level, label in _class_levels(scope):
                hit = _found(_best(_hits(level.marks, module)), label)
                if hit is not None:
                    break
            return hit
        scope = cls
    return _scope_requirement(scope, warnings, display)


# --------------------------------------------------------------------------
# Public entry points
# --------------------------------------------------------------------------


class _FileCache:
    """Sources, outlines and full parses of test files, kept across calls (a sweep
    inspects the same files again and again) while a file's size and mtime stay
    the same."""

    limit = 256

    def __init__(self) -> None:
        self.stamps: dict[str, tuple[int, int]] = {}
        self.sources: dict[str, _Source | None] = {}
        self.outlines: dict[str, _Scope] = {}
        self.full: dict[str, _Scope | None] = {}
        #: (path, test id) -> what _inspect_one found and warned, for the current file.
        self.answers: dict[tuple[str, str], tuple[_Found | None, tuple[str, ...]]] = {}

    def source(self, path: str) -> _Source | None:
        try:
            info = os.stat(path)
            stamp = (info.st_mtime_ns, info.st_size)
        except OSError:
            stamp = (-1, -1)
        if self.stamps.get(path) != stamp or path not in self.sources:
            if len(self.stamps) >= self.limit:
                self.__init__()  # type: ignore[misc]
            self.outlines.pop(path, None)
            self.full.pop(path, None)
            for key in [k for k in self.answers if k[0] == path]:
                del self.answers[key]
            self.stamps[path] = stamp
            try:
                self.sources[path] = _Source(read_source(path))
            except OSError:
                self.sources[path] = None
        return self.sources[path]


_FILES = _FileCache()


def read_source(path: str) -> str:
    """A test file's text (undecodable bytes replaced)."""
    with open(path, encoding="utf-8", errors="replace") as file:
        return file.read()


def _candidates(tid: TestId, roots: Sequence[str]) -> list[str]:
    path = tid.path
    if os.path.isabs(path):
        return [path]
    join = os.path.join
    out: list[str] = []
    if tid.cwd is not None:
        if os.path.isabs(tid.cwd):
            out.append(join(tid.cwd, path))
        else:
            out.extend(join(root, tid.cwd, path) for root in roots)
    out.extend(join(root, path) for root in roots)
    return out


def _inspect_one(tid: TestId, path: str, cache: _FileCache, warnings: list[str]) -> _Found | None:
    """:func:`_inspect_file`, remembered while the file is unchanged."""
    src = cache.source(path)
    key = (path, str(tid))
    hit = cache.answers.get(key)
    if hit is None or src is None:
        own: list[str] = []
        hit = (_inspect_file(tid, path, src, cache, own), tuple(own))
        cache.answers[key] = hit
    warnings.extend(hit[1])
    return hit[0]


def _inspect_file(
    tid: TestId, path: str, src: _Source | None, cache: _FileCache, warnings: list[str]
) -> _Found | None:
    if src is None:
        warnings.append(f"test file {tid.path} could not be read ({path})")
        return None
    own: list[str] = []
    if path not in cache.full:
        try:
            outline = cache.outlines.get(path)
            if outline is None:
                outline = cache.outlines[path] = _outline_module(src)
            result = _requirement(outline, tid, own, tid.path)
            warnings.extend(own)
            return result
        except _OutlineFailed:
            own.clear()
            try:
                cache.full[path] = _ast_module(src.text, str(path))
            except (SyntaxError, ValueError) as exc:
                cache.full[path] = None
                warnings.append(f"test file {tid.path} is not valid Python: {exc}")
    module = cache.full[path]
    if module is None:
        return None
    result = _requirement(module, tid, own, tid.path)
    warnings.extend(own)
    return result


def required_devices(
    test_cmd: str, search_roots: Sequence[str | os.PathLike[str]]
) -> InspectResult:
    """GPUs the command's tests declare (``.requirement``, None when nothing is derivable).

    ``.warnings`` explains what could not be derived (file not found, case not
    matched, no marker); ``.test_ids`` lists the selectors found.
    """
    test_ids = parse_test_ids(test_cmd)
    result = InspectResult(None, [], test_ids)
    if not test_ids:
        result.warnings.append(f"no test file (*.py) found in test command: {test_cmd}")
        return result
    cache = _FILES
    roots = [os.fspath(root) for root in search_roots]
    best: tuple[_Found, str] | None = None
    unmarked: list[str] = []
    for tid in test_ids:
        candidates = _candidates(tid, roots)
        path = next((c for c in candidates if os.path.isfile(c)), None)
        if path is None:
            depth = len(Path(tid.path).parts)
            bases = [str(Path(c).parents[depth - 1]) for c in candidates] if depth else []
            tried = ", ".join(dict.fromkeys(bases)) or "(no search roots)"
            result.warnings.append(f"test file {tid.path} not found under {tried}")
            continue
        found = _inspect_one(tid, path, cache, result.warnings)
        if found is None:
            unmarked.append(str(tid))
        elif best is None or found.devices > best[0].devices:
            best = (found, tid.path)
    if best is not None:
        found, display = best
        result.requirement = DeviceRequirement(found.devices, found.source(display))
    else:
        result.warnings.extend(f"no GPU-count marker found for {name}" for name in unmarked)
    return result
