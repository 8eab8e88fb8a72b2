"""The import contract: no import cycle in core/ or gui/, and core/ never imports Qt or TensorFlow.

Read from the source (every ``import``, at the top of a module or inside a function, since a lazy
import is still a dependency), plus one real import of every core module in a fresh interpreter.
Imports under ``if TYPE_CHECKING:`` are left out: they never run.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.helpers.project import ROOT

PACKAGES = ("core", "gui")
# core/ is usable from the CLI, tests and a remote host: no GUI toolkit, no TensorFlow (trainers
# import it; the GUI never does either).
FORBIDDEN = {"core": ("PySide6", "pyqtgraph", "tensorflow"), "gui": ("tensorflow",)}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported_names(name: str, path: Path, type_only_too: bool = False) -> set[str]:
    """Every module ``name`` imports (``from a import b`` also names ``a.b``: b may be a module);
    with ``type_only_too`` also those under ``if TYPE_CHECKING:``."""
    out: set[str] = set()
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node) and not type_only_too:
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            out.add(module)
            out.update(f"{module}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
    return out


def import_graph(type_only_too: bool = False) -> dict[str, set[str]]:
    """Module -> the modules of core/ and gui/ it imports (at run time; ``type_only_too``: also for
    the type checker only)."""
    mods = modules()
    return {
        name: {m for m in imported_names(name, path, type_only_too) if m in mods and m != name}
        for name, path in mods.items()
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_cycles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"f"}, "f": {"e"}, "g": set()}
    assert sorted(cycles(graph)) == [["a", "b", "c"], ["e", "f"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_sees_lazy_and_relative_imports(tmp_path):
    source = tmp_path / "m.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "from . import sibling\n"
        "def f():\n    from core.cluster.spec import model\n"
        "if TYPE_CHECKING:\n    from core import never_runs\n"
    )
    names = imported_names("core.pkg.m", source)
    assert {"core.pkg.sibling", "core.cluster.spec.model"} <= names
    assert "core.never_runs" not in names


def test_core_and_gui_have_no_import_cycle():
    graph = import_graph()
    assert "core.cluster.spec.model" in graph and "gui.editor.widget" in graph  # it reads the real tree
    found = cycles(graph)
    assert found == [], "import cycles (each: modules that import each other): " + "; ".join(
        " <-> ".join(c) for c in found
    )


def test_core_never_imports_qt_or_tensorflow_in_its_source():
    offenders = []
    for name, path in modules().items():
        banned = FORBIDDEN[name.split(".")[0]]
        for imported in imported_names(name, path):
            if imported.split(".")[0] in banned:
                offenders.append(f"{name} imports {imported}")
    assert offenders == []


def test_importing_every_core_module_loads_no_qt_or_tensorflow():
    names = [n for n in modules() if n.split(".")[0] == "core" and not n.endswith("__main__")]
    assert len(names) > 10
    code = (
        "import importlib, sys\n"
        f"for name in {names!r}:\n    importlib.import_module(name)\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'PySide6', 'pyqtgraph', 'tensorflow'}))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "[]"


# The layers, lowest first: a package imports only packages at its own level or below (the agent is
# stdlib-only and shipped alone; the window is the top). docs/architecture.md draws the same order.
LAYERS = {
    "core": (
        "agent",
        "textsafe",
        "atomic",
        "telemetry",
        "cluster",
        "diagnosis",
        "run",
        "views",
        "remote",
        "slurm",
        "preflight",
        "notify",
        "profiling",
        "controller",
        "install",
        "cli",
    ),
    "gui": ("offthread", "editor", "run", "runs", "window"),
}


def layer_of(module: str) -> tuple[str, int] | None:
    """(top package, level) of ``module``: ``core.run.rundir`` -> ("core", 4); None for a top package."""
    parts = module.split(".")
    if len(parts) < 2:
        return None
    order = LAYERS[parts[0]]
    if parts[1] not in order:
        raise AssertionError(f"{module}: package {parts[0]}.{parts[1]} has no layer in tests/test_imports.py LAYERS")
    return parts[0], order.index(parts[1])


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """Each import of a higher package by a lower one, within core/ and within gui/ (gui above core)."""
    found = []
    for name, imported in sorted(graph.items()):
        mine = layer_of(name)
        for other in sorted(imported):
            theirs = layer_of(other)
            if mine is None or theirs is None or mine[0] != theirs[0]:
                if name.startswith("core") and other.startswith("gui"):
                    found.append(f"{name} imports {other} (core never imports gui)")
                continue
            if theirs[1] > mine[1]:
                found.append(f"{name} imports {other}, a higher layer")
    return found


def test_the_layer_check_fails_on_a_lower_package_importing_a_higher_one():
    graph = {
        "core.cluster.spec.model": {"core.telemetry.metrics"},  # down: fine
        "core.run.rundir": {"core.controller.controller"},  # up: a violation
        "core.cli.main": {"gui.window.app"},
        "gui.editor.widget": {"gui.window.main_window", "core.cli.main"},
    }
    assert layer_violations(graph) == [
        "core.cli.main imports gui.window.app (core never imports gui)",
        "core.run.rundir imports core.controller.controller, a higher layer",
        "gui.editor.widget imports gui.window.main_window, a higher layer",
    ]


def test_every_package_imports_only_its_own_layer_or_below():
    graph = import_graph(type_only_too=True)  # a type-only import upwards is a layer's knot too
    assert {name.split(".")[1] for name in graph if name.count(".") >= 1 and name.startswith("core.")} == set(
        LAYERS["core"]
    ), "a package of core/ is missing from LAYERS, or LAYERS names one that is gone"
    assert layer_violations(graph) == []


# ---------------------------------------------------------------------------- the tests' own imports
# What tests share lives in tests/helpers. A test module that imports another (``from
# tests.core.test_launch import Launch``) runs that module's tests' imports and fixtures too, breaks
# when its tests move, and hides where a helper lives; conftest modules are pytest's, not a library.


def helper_import_offenders(mods: dict[str, Path]) -> list[str]:
    """Each import, by one of ``mods`` (module name -> file), of a module under tests/ that is not
    tests/helpers: a test module, a conftest, a helper kept beside the tests."""
    found = []
    for name, path in sorted(mods.items()):
        for imported in sorted(imported_names(name, path, type_only_too=True)):
            parts = imported.split(".")
            if parts[0] == "tests" and len(parts) > 1 and parts[1] != "helpers":
                found.append(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name} imports {imported}")
    return found


def test_the_helper_import_check_finds_a_test_importing_a_test_module(tmp_path):
    source = tmp_path / "test_x.py"
    source.write_text(
        "from tests.helpers.ports import free_ports\n"
        "from tests.core.test_launch import Launch\n"
        "from ..conftest import ROOT\n"
        "def test_y():\n    from tests.faults import harness\n"
    )
    assert helper_import_offenders({"tests.gui.test_x": source}) == [
        "test_x.py imports tests.conftest",
        "test_x.py imports tests.conftest.ROOT",
        "test_x.py imports tests.core.test_launch",
        "test_x.py imports tests.core.test_launch.Launch",
        "test_x.py imports tests.faults",
        "test_x.py imports tests.faults.harness",
    ]


def test_tests_and_benchmarks_import_shared_helpers_from_tests_helpers_only():
    mods = {module_name(p): p for top in ("tests", "benchmarks") for p in sorted((ROOT / top).rglob("*.py"))}
    assert "tests.core.test_launch" in mods and "tests.helpers.procs" in mods  # it reads the real tree
    assert helper_import_offenders(mods) == []
