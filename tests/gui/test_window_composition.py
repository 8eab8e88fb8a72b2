"""The main window is composed of parts, not mixed from them: each part keeps its own state behind a
narrow interface, and the window builds them and passes between them. Read from the source of
gui/window/: no class there has more than one of the project's classes as a base (a Qt class or
``Protocol`` is fine), nothing declares for the type checker what another part provides (stubs
under ``if TYPE_CHECKING:``, bare class-level attributes outside a Protocol or a dataclass), and
no code sets an attribute on the window from outside it."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers.project import ROOT

WINDOW = ROOT / "gui" / "window"
WINDOW_NAMES = {"window", "main_window", "host"}  # what the parts call the window they are given


def sources() -> dict[Path, ast.Module]:
    return {p: ast.parse(p.read_text(encoding="utf-8")) for p in sorted(WINDOW.glob("*.py"))}


def project_names(tree: ast.Module) -> set[str]:
    """The names a module binds to the project's classes: its own, and those imported from core/ and gui/."""
    names = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("core", "gui"):
            names |= {alias.asname or alias.name for alias in node.names}
    return names


def is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def test_no_window_class_inherits_from_more_than_one_project_class() -> None:
    mixed = []
    for path, tree in sources().items():
        ours = project_names(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = [b.id for b in node.bases if isinstance(b, ast.Name) and b.id in ours]
                if len(bases) > 1:
                    mixed.append(f"{path.name}: {node.name}({', '.join(bases)})")
    assert not mixed, mixed


def test_no_part_declares_what_another_provides() -> None:
    stubs = []
    for path, tree in sources().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and is_type_checking(node.test):
                stubs += [
                    f"{path.name}:{n.lineno} under TYPE_CHECKING"
                    for n in node.body
                    if isinstance(n, (ast.FunctionDef, ast.AnnAssign, ast.ClassDef))
                ]
            if isinstance(node, ast.ClassDef):
                bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
                decorated = {ast.unparse(d).split("(")[0] for d in node.decorator_list}
                if "Protocol" in bases or "dataclass" in decorated:
                    continue
                stubs += [
                    f"{path.name}:{n.lineno} {node.name}.{ast.unparse(n.target)} declared, never set"
                    for n in node.body
                    if isinstance(n, ast.AnnAssign) and n.value is None
                ]
    assert not stubs, stubs


def test_nothing_sets_an_attribute_on_the_window_from_outside_it() -> None:
    def names_the_window(target: ast.expr) -> bool:
        if not isinstance(target, ast.Attribute):
            return False
        value = target.value
        if isinstance(value, ast.Name):
            return value.id in WINDOW_NAMES
        return isinstance(value, ast.Attribute) and value.attr.lstrip("_") in WINDOW_NAMES

    found = []
    for path, tree in sources().items():
        for node in ast.walk(tree):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
                targets = [node.target]
            found += [f"{path.name}:{node.lineno} {ast.unparse(t)}" for t in targets if names_the_window(t)]
    assert not found, found
