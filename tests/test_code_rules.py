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
    ("scriptbuilder.workflows",),
    ("scriptbuilder.scenarios",),
    ("scriptbuilder.outputs",),
    ("scriptbuilder.job",),
    ("scriptbuilder.lifecycle",),
    ("scriptbuilder.campaign",),
    ("scriptbuilder.api", "scriptbuilder"),
    ("scriptbuilder.cli", "scriptbuilder.__main__"),
)


ROOT = "scriptbuilder"


def _placed(module: str) -> int | None:
    """The layer of ``module``: the one naming it or its longest enclosing package
    (the root package, ``scriptbuilder``, names its own ``__init__`` only); None
    when no layer does."""
    matches = [
        (len(name), index)
        for index, names in enumerate(LAYERS)
        for name in names
        if module == name or (name != ROOT and module.startswith(name + "."))
    ]
    return max(matches)[1] if matches else None


def _layer(module: str) -> int:
    layer = _placed(module)
    assert layer is not None, f"{module} is in no layer: add its package to LAYERS"
    return layer


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


def _modules(package: Path) -> dict[str, Path]:
    """The modules of ``package`` (files in folders that are no package, as the pytest
    plugin in ``data/``, are data)."""
    return {
        _module_name(path): path
        for path in sorted(package.rglob("*.py"))
        if all(
            (folder / "__init__.py").is_file()
            for folder in path.parents[: len(path.relative_to(package).parts)]
        )
    }


def test_every_package_is_placed_in_a_layer() -> None:
    """A new package (or module beside the packages) belongs to no layer until
    :data:`LAYERS` names it."""
    assert [module for module in _modules(PACKAGE) if _placed(module) is None] == []


def test_a_new_package_is_in_no_layer() -> None:
    assert _placed("scriptbuilder.newpackage.thing") is None
    assert _placed("scriptbuilder.newmodule") is None
    assert _placed("scriptbuilder.inputs.tests.marks") == _placed("scriptbuilder.inputs")


def _cycles(modules: dict[str, Path]) -> list[list[str]]:
    """The import cycles among ``modules`` between modules of one package (imports
    anywhere in a module, ``from package import module`` read as the module)."""
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        package = module.rpartition(".")[0] if path.name != "__init__.py" else module
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([base] if base else [])])
                for alias in node.names:
                    name = f"{base}.{alias.name}"
                    names.add(name if name in modules else base)
        graph[module] = {
            n for n in names if n in modules and n != module and n.rpartition(".")[0] == package
        }
    cycles, seen = [], set()

    def walk(module: str, trail: list[str]) -> None:
        for imported in sorted(graph[module]):
            if imported in trail:
                cycle = trail[trail.index(imported) :]
                if frozenset(cycle) not in seen:
                    seen.add(frozenset(cycle))
                    cycles.append(cycle)
            elif len(trail) < len(graph):
                walk(imported, [*trail, imported])

    for module in sorted(graph):
        walk(module, [module])
    return cycles


def test_no_import_cycle_inside_a_package() -> None:
    """Modules of one package import each other one way only."""
    assert _cycles(_modules(PACKAGE)) == []


def test_the_cycle_check_sees_a_cycle(tmp_path: Path) -> None:
    package = tmp_path / "scriptbuilder" / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from scriptbuilder.pkg import b\n")
    (package / "b.py").write_text("def f():\n    from scriptbuilder.pkg.a import x\n")
    (package / "c.py").write_text("from . import a\n")
    modules = {
        ".".join(p.relative_to(tmp_path).with_suffix("").parts): p
        for p in sorted(package.glob("*.py"))
    }
    assert _cycles(modules) == [["scriptbuilder.pkg.a", "scriptbuilder.pkg.b"]]


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


def test_imports_inside_functions_say_why() -> None:
    """An import belongs at the top of its module. One inside a function is there
    only to break an import cycle, and its line says so (``# cycle: ...``)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for inner in ast.walk(node):
                is_import = isinstance(inner, (ast.Import, ast.ImportFrom))
                if is_import and "# cycle:" not in lines[inner.lineno - 1]:
                    found.append(f"{path.relative_to(PACKAGE.parent)}:{inner.lineno}")
    assert not found, f"imports inside functions without their reason: {found}"


#: Where a job runs is the scenarios' to say (and the request model's to hold).
SCENARIO_OWNERS = ("scenarios", "models")
_SCENARIO_WORDS = frozenset({"execution_scenario", "is_slurm", "is_remote"})


def _scenario_tests(path: Path, names: frozenset[str]) -> list[str]:
    """Lines of ``path`` that read ``execution_scenario``, ask is-Slurm/is-remote, or
    name a scenario (a string that is exactly one of ``names``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        word = None
        if isinstance(node, ast.Attribute):
            word = node.attr
        elif isinstance(node, ast.Name):
            word = node.id
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            word = node.name
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            word = node.value if node.value in names else None
        if word in _SCENARIO_WORDS or word in names:
            found.append(f"{path}:{node.lineno}: {word}")
    return found


def test_only_scenarios_say_where_a_job_runs() -> None:
    """No module outside :data:`SCENARIO_OWNERS` tests ``execution_scenario``, names a
    scenario or asks whether a job runs on Slurm or remotely: it asks the scenario."""
    from scriptbuilder.scenarios.registry import SCENARIOS

    names = frozenset(SCENARIOS)
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE).parts[0] not in SCENARIO_OWNERS:
            found += _scenario_tests(path, names)
    assert found == []


def test_the_scenario_check_sees_a_scenario_test(tmp_path: Path) -> None:
    source = tmp_path / "x.py"
    source.write_text(
        'def f(req, ctx):\n    if req.execution_scenario == "local_docker" or ctx.is_remote:\n'
        '        return "remote_slurm or local_slurm"\n'
    )
    found = [line.split(": ")[-1] for line in _scenario_tests(source, frozenset({"local_docker"}))]
    assert sorted(found) == ["execution_scenario", "is_remote", "local_docker"]
