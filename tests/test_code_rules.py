"""Rules of the code base that no behaviour test sees."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "scriptbuilder"


def test_type_checking_comes_from_typing() -> None:
    """``TYPE_CHECKING`` is typing's: a module-level ``TYPE_CHECKING = False`` only
    saved importing typing, which every entry point imports anyway (click does)."""
    fake = re.compile(r"^TYPE_CHECKING\s*=", re.MULTILINE)
    offenders = [
        str(path.relative_to(PACKAGE))
        for path in sorted(PACKAGE.rglob("*.py"))
        if fake.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []


#: The layers of the package, bottom first: a module imports only from its own
#: layer or the ones below it.
LAYERS = (
    ("scriptbuilder.errors", "scriptbuilder.version"),
    ("scriptbuilder.script",),
    ("scriptbuilder.models",),
    ("scriptbuilder.inputs",),
    ("scriptbuilder.resolution",),
    ("scriptbuilder.scenarios",),
    ("scriptbuilder.workflows",),
    ("scriptbuilder.outputs",),
    ("scriptbuilder.job",),
    ("scriptbuilder.lifecycle",),
    ("scriptbuilder.campaign",),
    ("scriptbuilder.api", "scriptbuilder"),
    ("scriptbuilder.cli", "scriptbuilder.__main__"),
)


def _layer(module: str) -> int:
    """The layer of ``module``: its longest prefix named in :data:`LAYERS`."""
    matches = [
        (len(name), index)
        for index, names in enumerate(LAYERS)
        for name in names
        if module == name or module.startswith(name + ".")
    ]
    assert matches, f"{module} is in no layer: add its package to LAYERS"
    return max(matches)[1]


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, module: str) -> list[tuple[int, str]]:
    """``(line, imported module)`` of every scriptbuilder import, wherever it stands."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            found.append((node.lineno, base))
    return [(line, name) for line, name in found if name.split(".")[0] == "scriptbuilder"]


def test_imports_point_down() -> None:
    """No module imports from a layer above its own (see :data:`LAYERS`)."""
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        for line, imported in _imports(path, module):
            if _layer(imported) > _layer(module):
                upward.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {imported}")
    assert upward == []


def test_the_layer_check_sees_an_upward_import(tmp_path: Path) -> None:
    source = tmp_path / "scriptbuilder" / "models" / "x.py"
    source.parent.mkdir(parents=True)
    source.write_text("def f():\n    from scriptbuilder.resolution import secrets\n")
    (imported,) = _imports(source, "scriptbuilder.models.x")
    assert imported == (2, "scriptbuilder.resolution")
    assert _layer("scriptbuilder.resolution.secrets") > _layer("scriptbuilder.models.x")


#: The functions that load a module when it is first asked for, so that each command
#: line loads only the modules it runs: the package's API names (PEP 562) and the
#: ``scriptbuilder`` commands of the job's life.
ON_FIRST_USE = {("__init__.py", "__getattr__"), ("cli/build.py", "get_command")}


def test_imports_inside_functions_say_why() -> None:
    """An import belongs at the top of its module. One inside a function is there
    only to break an import cycle, and its line says so (``# cycle: ...``), or it
    loads a module on first use in one of :data:`ON_FIRST_USE` (``# on first use:
    ...``)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            lazy = (str(path.relative_to(PACKAGE)), node.name) in ON_FIRST_USE
            reasons = ("# cycle:", "# on first use:") if lazy else ("# cycle:",)
            for inner in ast.walk(node):
                is_import = isinstance(inner, (ast.Import, ast.ImportFrom))
                if is_import and not any(r in lines[inner.lineno - 1] for r in reasons):
                    found.append(f"{path.relative_to(PACKAGE.parent)}:{inner.lineno}")
    assert not found, f"imports inside functions without their reason: {found}"
