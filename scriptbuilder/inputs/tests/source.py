"""A test file read whole with :mod:`ast` (never imported), the conftest.py files above it,
and the helper modules of the checkout it imports names from (``from utils.util import x``,
``from .conftest import y``), read when a name is looked up, at most :data:`DEPTH` deep."""

from __future__ import annotations

import ast
import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import PurePath

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef

#: Larger files are not read (no test file comes near it).
MAX_BYTES = 4 << 20
#: How many imports deep a name is followed (as calls into helpers).
DEPTH = 3


@dataclass
class Scope:
    """A module (no parent) or a class: its own marks (pytest's application order) and members."""

    name: str
    parent: Scope | None
    module: TestModule
    bases: list[str] = field(default_factory=list)
    marks: list[ast.expr] = field(default_factory=list)
    funcs: dict[str, FunctionNode] = field(default_factory=dict)
    classes: dict[str, Scope] = field(default_factory=dict)

    @property
    def qualname(self) -> str:
        outer = self.parent.qualname if self.parent is not None else ""
        return f"{outer}::{self.name}" if outer else self.name

    def mro(self) -> Iterator[Scope]:
        """The class, then its base classes defined in the same file (breadth first)."""
        seen, queue = {id(self)}, [self]
        while queue:
            item = queue.pop(0)
            yield item
            for base in item.bases:
                outer = item.parent.classes.get(base) if item.parent is not None else None
                found = outer or self.module.root.classes.get(base)
                if "." not in base and found is not None and id(found) not in seen:
                    seen.add(id(found))
                    queue.append(found)

    def fill(self, body: list[ast.stmt], names: dict[str, ast.expr]) -> None:
        """Members from ``body``, looking into ``if``/``try``/``with`` blocks; the
        assignments go to ``names``, ``pytestmark`` to :attr:`marks`."""
        for node in body:
            if isinstance(node, (ast.If, ast.Try, ast.With)):
                blocks = [node.body, getattr(node, "orelse", []), getattr(node, "finalbody", [])]
                blocks += [h.body for h in getattr(node, "handlers", [])]
                for block in blocks:
                    self.fill(block, names)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.funcs[node.name] = node
            elif isinstance(node, ast.ClassDef):
                cls = Scope(node.name, self, self.module, [ast.unparse(b) for b in node.bases])
                cls.fill(node.body, {})
                cls.marks += reversed(node.decorator_list)
                self.classes[node.name] = cls
            elif isinstance(node, ast.ImportFrom) and self.parent is None:
                for alias in node.names:
                    name = (node.module or "", node.level, alias.name)
                    self.module.imports[alias.asname or alias.name] = name
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in (t.id for t in targets if isinstance(t, ast.Name)):
                    names[target] = node.value
                    self.marks = [node.value] if target == "pytestmark" else self.marks


class TestModule:
    """One test file, parsed whole (raises SyntaxError or ValueError); ``top``: the
    checkout, the folder imported modules are looked for in; ``depth``: imports followed
    to reach this module."""

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        text: str,
        filename: str,
        conftests: tuple[TestModule, ...] = (),
        top: str | None = None,
        depth: int = 0,
    ) -> None:
        self.filename = filename
        #: The conftest.py files of its folder and the folders above, closest first.
        self.conftests = conftests
        self.top, self.depth = top, depth
        #: Module-level names and the values bound to them.
        self.names: dict[str, ast.expr] = {}
        #: ``from MODULE import NAME [as LOCAL]``: LOCAL -> (MODULE, level, NAME).
        self.imports: dict[str, tuple[str, int, str]] = {}
        #: The modules read for :attr:`imports` so far, by path (None: not readable).
        self.imported: dict[str, TestModule | None] = {}
        self.root = Scope("", None, self)
        self.root.fill(ast.parse(text, filename=filename).body, self.names)

    def helper(self, name: str) -> tuple[FunctionNode, TestModule] | None:
        """A module-level function of this file or of a conftest.py above it, or one
        this file imports from a module of the checkout."""
        found = ((f, mod) for mod in (self, *self.conftests) if (f := mod.root.funcs.get(name)))
        hit = next(found, None)
        if hit is None and (source := self.import_source(name)) is not None:
            return source[0].helper(source[1])
        return hit

    def binding(self, name: str) -> tuple[ast.expr, TestModule] | None:
        """The value of a module-level name of this file, or of the module it imports it
        from, and that module (the names in the value are its names)."""
        if name in self.names:
            return self.names[name], self
        source = self.import_source(name)
        return source[0].binding(source[1]) if source is not None else None

    def import_source(self, name: str) -> tuple[TestModule, str] | None:
        """The module of the checkout ``name`` is imported from, and its name there."""
        spec = self.imports.get(name)
        path = _module_path(self, spec[0], spec[1]) if spec and self.depth < DEPTH else None
        if spec is None or path is None:
            return None
        if path not in self.imported:
            try:
                module = read_module(path, self.top, self.depth + 1)
            except (OSError, SyntaxError, ValueError):  # not a module read here
                module = None
            self.imported[path] = module
        found = self.imported[path]
        return (found, spec[2]) if found is not None and found is not self else None


def _module_path(module: TestModule, name: str, level: int) -> str | None:
    """The file of the test tree ``from NAME import`` reads in ``module`` (``level``: its
    leading dots): relative to its package, else from its folder or one above it below
    the checkout's top folder (its own packages, such as ``tensorrt_llm``, are not read)."""
    here = os.path.dirname(os.path.abspath(module.filename))
    top = os.path.abspath(module.top) if module.top else here
    parts = [part for part in name.split(".") if part]
    folders = [here, *map(str, PurePath(here).parents)]
    for folder in folders[level - 1 : level] if level else folders:
        if folder != here and not folder.startswith(top.rstrip("/") + "/"):
            break
        base = os.path.join(folder, *parts)
        for path in (base + ".py", os.path.join(base, "__init__.py")):
            if parts and os.path.isfile(path):
                return path
    return None


def read_module(path: str, top: str | None = None, depth: int = 0) -> TestModule:
    """The file at ``path`` (undecodable bytes replaced), with the conftest.py files
    from its folder up to ``top`` (the checkout; its own folder only when None)."""
    if os.path.getsize(path) > MAX_BYTES:
        raise ValueError(f"larger than {MAX_BYTES >> 20} MB, not read")
    here = os.path.abspath(path)
    stop = os.path.abspath(top) if top else os.path.dirname(here)
    conftests: list[TestModule] = []
    for folder in map(str, PurePath(here).parents) if depth == 0 else ():
        conftest = os.path.join(folder, "conftest.py")
        if conftest != here and os.path.isfile(conftest):
            with contextlib.suppress(OSError, SyntaxError, ValueError):  # not ours to report
                conftests.append(read_module(conftest, top, depth + 1))
        if folder == stop or not folder.startswith(stop):
            break
    with open(path, encoding="utf-8", errors="replace") as file:
        return TestModule(file.read(), path, tuple(conftests), top, depth)
