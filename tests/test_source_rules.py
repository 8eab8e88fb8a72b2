"""Rules the source keeps so that what it says stays true, read from the files themselves:

- production code says what it does and why, never "issue N" (a number means nothing to a reader
  without the tracker, and the reason is lost when the tracker is);
- each package's ``__init__`` lists every module it holds, one line each (``- ``name``: what it
  holds``), as docs/architecture.md promises: a module added, renamed or removed shows here;
- a role view's state is entered in one place (``RoleView.enter_state``), and every thread core/
  and gui/ start has a name that says what it does (a stack dump or a hang's report names the job).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.helpers.project import ROOT

# Where production code lives: what runs, what it ships, how it is built and measured.
PRODUCTION = ("core", "gui", "main.py", "resources", "scripts", "benchmarks", "pyproject.toml", "Makefile")
TEXT_SUFFIXES = {".py", ".toml", ".md", ".txt", ".sh", ".cfg", ".ini", ""}
ISSUE_REFERENCE = re.compile(r"\bissues?\s*(?:#|no\.?\s*)?\d+|\bissue-\d+", re.IGNORECASE)


def production_files() -> list[Path]:
    found = []
    for name in PRODUCTION:
        path = ROOT / name
        if path.is_file():
            found.append(path)
        elif path.is_dir():
            found.extend(
                p
                for p in sorted(path.rglob("*"))
                if p.is_file() and p.suffix in TEXT_SUFFIXES and "__pycache__" not in p.parts
            )
    return found


def issue_references(text: str) -> list[str]:
    """Each place ``text`` cites an issue by its number instead of saying what and why."""
    return [m.group(0) for m in ISSUE_REFERENCE.finditer(text)]


def test_the_issue_check_finds_each_way_of_citing_a_number() -> None:
    text = "see issue 19; (issue #23) Issue25 issues 13 and issue-12 issue no. 7"
    assert issue_references(text) == ["issue 19", "issue #23", "Issue25", "issues 13", "issue-12", "issue no. 7"]
    # An upstream project's tracker is cited by its own name, and words near a number are not issues.
    assert issue_references("reported upstream: pyqtgraph/pyqtgraph#3485; 19 issues; tissue 5") == []


def test_production_code_says_what_and_why_instead_of_an_issue_number() -> None:
    files = production_files()
    assert ROOT / "core" / "controller" / "controller.py" in files and ROOT / "main.py" in files
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in files
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
        if issue_references(line)
    ]
    assert found == [], "say what the code does and why instead:\n" + "\n".join(found)


# ---------------------------------------------------------------------------- packages list their modules

LISTED = re.compile(r"^\s*- ``(\w+)/?``:", re.MULTILINE)


def package_contents(package: Path) -> set[str]:
    """The modules (``__main__`` included) and subpackages of ``package``."""
    modules = {p.stem for p in package.glob("*.py") if p.name != "__init__.py"}
    return modules | {p.name for p in package.iterdir() if (p / "__init__.py").is_file()}


def listed_modules(init: Path) -> set[str]:
    """The names ``init``'s docstring lists, one line each: ``- ``name``: what it holds``."""
    docstring = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
    return set(LISTED.findall(docstring))


def listing_problems(package: Path) -> list[str]:
    held, listed = package_contents(package), listed_modules(package / "__init__.py")
    where = package.relative_to(ROOT) if package.is_relative_to(ROOT) else package.name
    return [f"{where}/__init__.py does not list {name}" for name in sorted(held - listed)] + [
        f"{where}/__init__.py lists {name}, which it does not hold" for name in sorted(listed - held)
    ]


def test_the_listing_check_finds_a_missing_and_a_stale_module(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "sub" / "__init__.py").write_text("")
    for name in ("kept", "added", "__main__"):
        (package / f"{name}.py").write_text("")
    (package / "__init__.py").write_text(
        '"""A package.\n\n- ``kept``: a module\n- ``sub/``: a subpackage\n- ``__main__``: run it\n'
        '- ``gone``: renamed since\nSee ``added`` elsewhere (not a line of the list).\n"""\n'
    )
    assert listing_problems(package) == [
        "pkg/__init__.py does not list added",
        "pkg/__init__.py lists gone, which it does not hold",
    ]


def test_every_package_lists_its_modules_one_line_each() -> None:
    packages = sorted(p.parent for top in ("core", "gui", "tests/helpers") for p in (ROOT / top).rglob("__init__.py"))
    assert ROOT / "core" / "controller" in packages and ROOT / "tests" / "helpers" in packages
    problems = [problem for package in packages for problem in listing_problems(package)]
    assert problems == [], "\n".join(problems)


# ---------------------------------------------------------------------------- one place, one name


def python_files(*tops: str) -> list[Path]:
    return sorted(p for top in tops for p in (ROOT / top).rglob("*.py"))


def test_a_role_views_state_is_entered_in_enter_state_only() -> None:
    """core/run/role_view.py's ``enter_state`` is where a role view takes a state (the controller's
    role machine and the replay both reach it through ``RoleView.apply``); no other code assigns a
    role's ``state``. core/run/leftover.py keeps its own record of a journal's last state (not a view)."""
    role_view = ROOT / "core" / "run" / "role_view.py"
    leftover = ROOT / "core" / "run" / "leftover.py"
    found = []
    for path in python_files("core", "gui"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AnnAssign | ast.AugAssign)
                else []
            )
            for target in targets:
                if isinstance(target, ast.Attribute) and target.attr == "state" and path not in (role_view, leftover):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} assigns .state")
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "enter_state"
                and path != role_view
            ):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} calls enter_state")
    assert found == []


def unnamed_threads(path: Path) -> list[str]:
    """Each ``threading.Thread(...)`` (or ``Thread(...)``) in ``path`` started without a ``name``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if called == "Thread" and not any(k.arg == "name" for k in node.keywords):
            found.append((node.lineno, f"{path.name}:{node.lineno}"))
    return [where for _line, where in sorted(found)]


def test_the_thread_check_finds_a_thread_without_a_name(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        "import threading\nfrom threading import Thread\n"
        "threading.Thread(target=print, name='printer').start()\n"
        "threading.Thread(target=print, daemon=True).start()\nThread(target=print)\n"
    )
    assert unnamed_threads(source) == ["m.py:4", "m.py:5"]


def test_every_thread_of_core_and_gui_is_named_for_its_job() -> None:
    found = [
        f"{path.relative_to(ROOT).parent}/{where}"
        for path in python_files("core", "gui")
        for where in unnamed_threads(path)
    ]
    assert found == []
