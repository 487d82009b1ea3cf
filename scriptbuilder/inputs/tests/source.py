"""A test file read whole with :mod:`ast` (never imported), and the conftest.py files above it."""

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
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in (t.id for t in targets if isinstance(t, ast.Name)):
                    names[target] = node.value
                    self.marks = [node.value] if target == "pytestmark" else self.marks


class TestModule:
    """One test file, parsed whole (raises SyntaxError or ValueError)."""

    __test__ = False  # not a pytest test class

    def __init__(self, text: str, filename: str, conftests: tuple[TestModule, ...] = ()) -> None:
        self.filename = filename
        #: The conftest.py files of its folder and the folders above, closest first.
        self.conftests = conftests
        #: Module-level names and the values bound to them.
        self.names: dict[str, ast.expr] = {}
        self.root = Scope("", None, self)
        self.root.fill(ast.parse(text, filename=filename).body, self.names)

    def helper(self, name: str) -> tuple[FunctionNode, TestModule] | None:
        """A module-level function of this file or of a conftest.py above it."""
        found = ((f, mod) for mod in (self, *self.conftests) if (f := mod.root.funcs.get(name)))
        return next(found, None)


def read_module(path: str, top: str | None = None) -> TestModule:
    """The file at ``path`` (undecodable bytes replaced), with the conftest.py files
    from its folder up to ``top`` (the checkout; its own folder only when None)."""
    if os.path.getsize(path) > MAX_BYTES:
        raise ValueError(f"larger than {MAX_BYTES >> 20} MB, not read")
    here = os.path.abspath(path)
    stop = os.path.abspath(top) if top else os.path.dirname(here)
    conftests: list[TestModule] = []
    for folder in map(str, PurePath(here).parents):
        conftest = os.path.join(folder, "conftest.py")
        if conftest != here and os.path.isfile(conftest):
            with contextlib.suppress(OSError, SyntaxError, ValueError):  # not ours to report
                conftests.append(read_module(conftest, folder))
        if folder == stop or not folder.startswith(stop):
            break
    with open(path, encoding="utf-8", errors="replace") as file:
        return TestModule(file.read(), path, tuple(conftests))
