"""Calls that read: a function of core/, gui/ or main.py that takes a flag (a ``bool``, or
``bool | None``) or more than three parameters takes the flags and the fourth and later
parameters by keyword only, so that ``decide_exit(ON_FAILURE, 1, None, 5.0, 0, True, True)`` or
``role_tree(role, table, True)`` cannot be written: the reader of a call sees what each value is.

``self`` and ``cls`` do not count. Signatures others define are left as they are: dunder methods
and Qt's overrides (``paintEvent``, ``headerData``: a lowerCamelCase name without an underscore).
Read from the source, like tests/test_imports.py.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.helpers.project import ROOT

MAX_POSITIONAL = 3

# Functions allowed to break the rule for now, by file: empty, every function of core/, gui/ and
# main.py keeps it. Should a change ever need a short grace period, list the function here; an entry
# that keeps the rule, or is gone, fails
# test_the_pending_list_names_only_functions_that_still_break_the_rule, so it cannot go stale.
PENDING: dict[str, set[str]] = {}
# A slot connected to a Qt signal is called with the signal's values by position
# (``toggled(bool)`` calls ``_on_follow_toggled(checked)``): it connects through a lambda that names
# the value, e.g. ``toggled.connect(lambda on: self._on_follow_toggled(on=on))``.


def _is_flag(annotation: ast.expr | None) -> bool:
    """``bool``, ``"bool"`` or ``bool | None`` (either order)."""
    if annotation is None:
        return False
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        return annotation.value.replace(" ", "") in ("bool", "bool|None", "None|bool")
    if isinstance(annotation, ast.Name):
        return annotation.id == "bool"
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        sides = (annotation.left, annotation.right)
        return any(_is_flag(s) for s in sides) and all(
            _is_flag(s) or (isinstance(s, ast.Constant) and s.value is None) for s in sides
        )
    return False


def _exempt(name: str) -> bool:
    """Dunder methods, and Qt's virtual methods (lowerCamelCase, no underscore), keep their signatures."""
    dunder = name.startswith("__") and name.endswith("__")
    qt_override = name[0].islower() and any(c.isupper() for c in name) and "_" not in name
    return dunder or qt_override


def _functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function with its qualified name (``Class.method``, ``outer.inner``)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + node.name, node
            yield from _functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.")
        else:
            yield from _functions(node, prefix)


def breaking_the_rule(source: str) -> dict[str, str]:
    """Qualified name -> why, for each function of ``source`` that takes a flag or a fourth
    parameter positionally."""
    found = {}
    for qualname, node in _functions(ast.parse(source)):
        if _exempt(node.name):
            continue
        positional = [*node.args.posonlyargs, *node.args.args]
        if positional and positional[0].arg in ("self", "cls"):
            positional = positional[1:]
        flags = [a.arg for a in positional if _is_flag(a.annotation)]
        if flags:
            found[qualname] = f"flags {', '.join(flags)} positional"
        elif len(positional) > MAX_POSITIONAL:
            found[qualname] = f"{len(positional)} positional parameters ({', '.join(a.arg for a in positional)})"
    return found


def source_files() -> list[Path]:
    return [*sorted((ROOT / "core").rglob("*.py")), *sorted((ROOT / "gui").rglob("*.py")), ROOT / "main.py"]


def test_the_rule_finds_flags_and_a_fourth_parameter_and_leaves_what_others_define() -> None:
    source = """
def decide(policy, code, signal, backoff_s, restarts, stopped: bool, gave_up: bool): ...
def role_tree(role, table, scan_environ: bool): ...
def maybe(role, known: bool | None = None): ...
def four(a, b, c, d): ...
def fine(a, b, c, *, d, flag: bool = False): ...
def annotated(a, b: "bool"): ...
class View:
    def status(self, straggler: bool, now: float): ...
    def paintEvent(self, event, a, b, c): ...
    def __init__(self, a, b, c, d): ...
    def _move(self, role, transition, state, *, detail): ...
    def outer(self):
        def inner(a, b, c, d): ...
"""
    assert breaking_the_rule(source) == {
        "decide": "flags stopped, gave_up positional",
        "role_tree": "flags scan_environ positional",
        "maybe": "flags known positional",
        "four": "4 positional parameters (a, b, c, d)",
        "annotated": "flags b positional",
        "View.status": "flags straggler positional",
        "View.outer.inner": "4 positional parameters (a, b, c, d)",
    }


def test_core_gui_and_main_take_flags_and_a_fourth_parameter_by_keyword() -> None:
    found = []
    for path in source_files():
        rel = path.relative_to(ROOT).as_posix()
        pending = PENDING.get(rel, set())
        for qualname, why in breaking_the_rule(path.read_text(encoding="utf-8")).items():
            if qualname not in pending:
                found.append(f"{rel}: {qualname}: {why}")
    assert found == [], "make these keyword-only (def f(a, b, *, flag: bool)) and name them at every call:\n" + (
        "\n".join(found)
    )


def test_the_pending_list_names_only_functions_that_still_break_the_rule() -> None:
    stale = []
    for rel, names in sorted(PENDING.items()):
        path = ROOT / rel
        still = breaking_the_rule(path.read_text(encoding="utf-8")) if path.is_file() else {}
        stale += [f"{rel}: {name}" for name in sorted(names - set(still))]
    assert stale == [], "these keep the rule now (or are gone): take them off PENDING:\n" + "\n".join(stale)
