"""A test file's module and classes, read with :mod:`ast` (never imported).

Only what a lookup needs is parsed: a regex outline finds the file's top-level
statements (lines starting at column 0 outside multi-line strings, decorators
joined to the ``def``/``class`` below them), and a class, a function or an
assignment is parsed alone, with the file's line numbers.  When the outline
cannot answer (a statement does not parse alone, a name is bound somewhere the
outline does not see, such as under ``if``), the file is parsed whole and the
lookup is answered from the whole tree.  Both ways give the same :class:`Scope`
values, built by one function from ``ast`` nodes.
"""

from __future__ import annotations

import ast
import bisect
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef

# Comments and string literals: the multi-line ones are masked from the outline.
_LEXEMES = re.compile(
    r"#[^\n]*"
    r'|"""(?:[^"\\]|\\.|"(?!""))*"""'
    r"|'''(?:[^'\\]|\\.|'(?!''))*'''"
    r'|"(?:[^"\\\n]|\\.)*"'
    r"|'(?:[^'\\\n]|\\.)*'",
    re.S,
)
_TOP_LINE = re.compile(r"^(?=[^\s#)\]}])", re.M)
_DEF = re.compile(r"(?:async[ \t]+)?def[ \t]+([A-Za-z_]\w*)")
_CLASS = re.compile(r"class[ \t]+([A-Za-z_]\w*)")
_ASSIGN = re.compile(r"([A-Za-z_]\w*)[ \t]*(?::[^=\n]+)?=(?!=)")
_IMPORT = re.compile(r"(?:from|import)\b")


@dataclass(frozen=True)
class _Top:
    """One top-level statement: ``text[start:end]``, starting on line ``line``."""

    kind: str  # "def" | "class" | "assign" | "import" | "other"
    name: str
    start: int
    end: int
    line: int


@dataclass
class Scope:
    """A module or a class: its own marks (pytest's application order) and members."""

    kind: str  # "module" | "class"
    name: str
    parent: Scope | None
    module: TestModule
    bases: list[str] = field(default_factory=list)
    marks: list[ast.expr] = field(default_factory=list)
    funcs: dict[str, FunctionNode] = field(default_factory=dict)
    classes: dict[str, Scope] = field(default_factory=dict)

    @property
    def qualname(self) -> str:
        if self.parent is None:
            return ""
        outer = self.parent.qualname
        return f"{outer}::{self.name}" if outer else self.name


class OutlineMiss(Exception):
    """The outline cannot answer; the caller retries after :meth:`TestModule.parse_whole`."""


def _flatten(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements of a body, looking into ``if``/``try``/``with`` blocks."""
    for node in body:
        if isinstance(node, ast.If):
            yield from _flatten(node.body)
            yield from _flatten(node.orelse)
        elif isinstance(node, ast.Try):
            yield from _flatten(node.body)
            for handler in node.handlers:
                yield from _flatten(handler.body)
            yield from _flatten(node.orelse)
            yield from _flatten(node.finalbody)
        elif isinstance(node, ast.With):
            yield from _flatten(node.body)
        else:
            yield node


def _assigned(node: ast.stmt) -> Iterator[tuple[str, ast.expr]]:
    if isinstance(node, ast.Assign):
        for target in node.targets:
            if isinstance(target, ast.Name):
                yield target.id, node.value
    elif (
        isinstance(node, ast.AnnAssign)
        and node.value is not None
        and isinstance(node.target, ast.Name)
    ):
        yield node.target.id, node.value


def _fill(scope: Scope, body: list[ast.stmt]) -> list[ast.expr]:
    """Members of ``scope`` from ``body``; returns its ``pytestmark`` value, if any."""
    pytestmark: list[ast.expr] = []
    for node in _flatten(body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            scope.funcs[node.name] = node
        elif isinstance(node, ast.ClassDef):
            scope.classes[node.name] = class_scope(node, scope)
        else:
            for name, value in _assigned(node):
                if name == "pytestmark":
                    pytestmark = [value]
    return pytestmark


def class_scope(node: ast.ClassDef, parent: Scope) -> Scope:
    """The one builder of class scopes (outline and whole-file parse alike)."""
    scope = Scope("class", node.name, parent, parent.module)
    scope.bases = [ast.unparse(base) for base in node.bases]
    scope.marks = [*_fill(scope, node.body), *reversed(node.decorator_list)]
    return scope


class TestModule:
    """One test file; see the module docstring for how it is read."""

    __test__ = False  # not a pytest test class

    def __init__(self, text: str, filename: str) -> None:
        self.text = text
        self.filename = filename
        self._tops: dict[tuple[str, str], _Top] | None = None
        self._imported: set[str] | None = None
        self._names: dict[str, ast.expr | None] = {}
        self._classes: dict[str, Scope | None] = {}
        self._funcs: dict[str, FunctionNode | None] = {}
        #: The whole file's module scope once parsed whole (then the only source).
        self.whole: Scope | None = None
        self._whole_names: dict[str, ast.expr] = {}
        self.root = Scope("module", "", None, self)

    # -- the outline --------------------------------------------------------

    def _outline(self) -> dict[tuple[str, str], _Top]:
        if self._tops is None:
            text = self.text
            span_starts: list[int] = []
            span_ends: list[int] = []
            if '"""' in text or "'''" in text:
                for match in _LEXEMES.finditer(text):
                    if "\n" in match.group():
                        span_starts.append(match.start())
                        span_ends.append(match.end())
            starts = []
            for match in _TOP_LINE.finditer(text):
                pos = match.start()
                idx = bisect.bisect_right(span_starts, pos) - 1
                if idx < 0 or not span_starts[idx] < pos < span_ends[idx]:
                    starts.append(pos)
            tops: dict[tuple[str, str], _Top] = {}
            line, counted, deco = 1, 0, None
            for i, pos in enumerate(starts):
                end = starts[i + 1] if i + 1 < len(starts) else len(text)
                line += text.count("\n", counted, pos)
                counted = pos
                if text.startswith("@", pos):
                    deco = (pos, line) if deco is None else deco
                    continue
                first, first_line = deco if deco is not None else (pos, line)
                deco = None
                if m := _DEF.match(text, pos):
                    top = _Top("def", m.group(1), first, end, first_line)
                elif m := _CLASS.match(text, pos):
                    top = _Top("class", m.group(1), first, end, first_line)
                elif m := _ASSIGN.match(text, pos):
                    top = _Top("assign", m.group(1), first, end, first_line)
                elif _IMPORT.match(text, pos):
                    top = _Top("import", str(i), first, end, first_line)
                else:
                    continue
                tops[top.kind, top.name] = top  # the last binding wins, as in Python
            self._tops = tops
        return self._tops

    def _parse_top(self, top: _Top) -> ast.stmt:
        chunk = "\n" * (top.line - 1) + self.text[top.start : top.end]
        try:
            body = ast.parse(chunk, filename=self.filename).body
        except (SyntaxError, ValueError) as exc:
            raise OutlineMiss(str(exc)) from exc
        if len(body) != 1:
            raise OutlineMiss(f"{top.kind} {top.name} is not one statement")
        return body[0]

    def _imports(self) -> set[str]:
        if self._imported is None:
            names: set[str] = set()
            for top in self._outline().values():
                if top.kind == "import":
                    node = self._parse_top(top)
                    if isinstance(node, (ast.Import, ast.ImportFrom)):
                        for alias in node.names:
                            names.add((alias.asname or alias.name).split(".")[0])
            self._imported = names
        return self._imported

    def _find(self, kind: str, name: str) -> _Top | None:
        """The statement binding ``name`` as ``kind``; None when something else binds it."""
        tops = self._outline()
        top = tops.get((kind, name))
        bound = any((other, name) in tops for other in ("def", "class", "assign"))
        if top is None and not bound and name not in self._imports():
            raise OutlineMiss(f"{kind} {name} is not in the outline")
        return top

    # -- lookups (outline first, then the whole file) -----------------------

    def parse_whole(self) -> Scope:
        """Parse the file whole (raises SyntaxError); later lookups use that tree."""
        if self.whole is None:
            tree = ast.parse(self.text, filename=self.filename)
            whole = Scope("module", "", None, self)
            whole.marks = _fill(whole, tree.body)
            for node in _flatten(tree.body):
                for name, value in _assigned(node):
                    self._whole_names[name] = value
            self.whole = whole
            self.root = whole
        return self.whole

    def lookup(self, name: str) -> ast.expr | None:
        """The value bound to a module-level name, or None (imports, unknown names)."""
        if self.whole is not None:
            return self._whole_names.get(name)
        if name not in self._names:
            top = self._find("assign", name)
            if top is None:
                self._names[name] = None
            else:
                node = self._parse_top(top)
                values = dict(_assigned(node))
                if name not in values:
                    raise OutlineMiss(f"{name} is not a plain assignment")
                self._names[name] = values[name]
        return self._names[name]

    def module_marks(self) -> list[ast.expr]:
        if self.whole is not None:
            return self.whole.marks
        if ("assign", "pytestmark") not in self._outline():
            return []
        value = self.lookup("pytestmark")
        return [value] if value is not None else []

    def find_class(self, name: str) -> Scope | None:
        if self.whole is not None:
            return self.whole.classes.get(name)
        if name not in self._classes:
            top = self._find("class", name)
            node = self._parse_top(top) if top is not None else None
            if node is not None and not isinstance(node, ast.ClassDef):
                raise OutlineMiss(f"class {name} did not parse as a class")
            self._classes[name] = class_scope(node, self.root) if node is not None else None
        return self._classes[name]

    def find_func(self, name: str) -> FunctionNode | None:
        if self.whole is not None:
            return self.whole.funcs.get(name)
        if name not in self._funcs:
            top = self._find("def", name)
            node = self._parse_top(top) if top is not None else None
            if node is not None and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                raise OutlineMiss(f"function {name} did not parse as a function")
            self._funcs[name] = node
        return self._funcs[name]


def read_module(path: str) -> TestModule:
    """A test file (undecodable bytes replaced)."""
    with open(path, encoding="utf-8", errors="replace") as file:
        return TestModule(file.read(), path)
