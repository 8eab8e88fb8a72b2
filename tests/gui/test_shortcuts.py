"""Every keyboard shortcut of the window, sent with QTest as a user presses it: each reaches its
action (one test per shortcut), the role shortcuts act on a real run, and the documented table
(docs/guide/window.md, or wherever README.md and docs/ hold a table with a Shortcut column) lists
exactly the window's shortcuts."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6 import QtCore, QtGui, QtWidgets

from core.cluster.spec import load
from tests.helpers.clusters import light_cluster
from tests.helpers.project import ROOT
from tests.helpers.typos import write_typos
from tests.helpers.widgets import cell

pytestmark = [pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")]

# Each shortcut and the action it triggers (its text, as the menus show it).
SHORTCUTS = {
    "Ctrl+E": "Cluster (edit)",
    "Ctrl+M": "Run (roles and telemetry)",
    "Ctrl+Shift+B": "Runs",
    "Ctrl+1": "Training",
    "Ctrl+2": "GPUs",
    "Ctrl+3": "Placement",
    "Ctrl+4": "Logs",
    "Ctrl+O": "Open...",
    "Ctrl+S": "Save",
    "Ctrl+Shift+V": "Paste command line / TF_CONFIG...",
    "Ctrl+Shift+O": "Open run directory...",
    "Ctrl+Shift+A": "Attach to this run",
    "Ctrl+Q": "Quit",
    "Ctrl+L": "Launch",
    "Ctrl+Shift+S": "Stop all",
    "Ctrl+Shift+R": "Restart all",
    "Ctrl+Shift+K": "Kill all",
    "Ctrl+Shift+P": "Check hosts",
    "Ctrl+T": "Stop role",
    "Ctrl+R": "Restart role",
    "Ctrl+K": "Kill role",
    "Ctrl+G": "Show log",
    "Ctrl+Shift+E": "Go to last error",
    "Ctrl+Shift+F": "Profile",
    "Ctrl+Shift+Y": "Why is this worker slow?",
}
LOG_SEARCH_BACK = "Shift+Return"  # a QShortcut of the Logs tab's search field


def window_shortcuts(window: QtWidgets.QMainWindow) -> dict[str, list[str]]:
    """Every shortcut the window defines: its actions' (the editor's too) and its QShortcuts."""
    out: dict[str, list[str]] = {}
    for action in window.findChildren(QtGui.QAction):
        for key in action.shortcuts():
            out.setdefault(key.toString(), []).append(action.text())
    for shortcut in window.findChildren(QtGui.QShortcut):
        out.setdefault(shortcut.key().toString(), []).append("QShortcut")
    return out


def documented_shortcuts() -> list[tuple[Path, set[str]]]:
    """Each table with a Shortcut column in README.md and docs/ (any depth): its file and keys."""
    tables: list[tuple[Path, set[str]]] = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        if not path.is_file():
            continue
        column: int | None = None
        keys: set[str] = set()
        for line in [*path.read_text(encoding="utf-8").splitlines(), ""]:
            cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else None
            if cells is None:
                if column is not None:
                    tables.append((path, keys))
                column, keys = None, set()
            elif column is None:
                if "Shortcut" in cells:
                    column = cells.index("Shortcut")
            elif not re.fullmatch(r"[-: ]+", "".join(cells)) and column < len(cells):
                keys.add(cells[column].strip("`"))
    return tables


def press(qtbot, widget: QtWidgets.QWidget, key: str) -> None:
    combo = QtGui.QKeySequence(key)[0]
    qtbot.keyClick(widget, combo.key(), combo.keyboardModifiers())


@pytest.fixture
def dialogs(qtbot) -> Iterator[list[str]]:
    """Rejects each modal dialog (a file dialog) as it opens, as a user pressing Escape; the
    titles of those it closed."""
    titles: list[str] = []

    def reject() -> None:
        dialog = QtWidgets.QApplication.activeModalWidget()
        if isinstance(dialog, QtWidgets.QDialog):
            titles.append(dialog.windowTitle())
            dialog.reject()

    timer = QtCore.QTimer(interval=50)
    timer.timeout.connect(reject)
    timer.start()
    yield titles
    timer.stop()


@pytest.fixture
def window(qtbot, tmp_path: Path):
    from gui.window.main_window import MainWindow

    # A form with errors: Launch (forced on below) refuses instead of starting a cluster.
    w = MainWindow(None, runs_root=tmp_path / "runs", cluster_path=write_typos(tmp_path))
    qtbot.addWidget(w)
    w.resize(1280, 800)
    w.show()
    w.activateWindow()
    qtbot.waitUntil(lambda: w.editor.path is not None, timeout=10_000)
    return w


def test_the_window_defines_exactly_the_shortcuts_tested_here(window):
    keys = window_shortcuts(window)
    assert set(keys) == {*SHORTCUTS, LOG_SEARCH_BACK}
    clashes = {k: v for k, v in keys.items() if len(v) > 1}
    assert not clashes, f"a key on two actions triggers neither: {clashes}"
    for key, text in SHORTCUTS.items():
        assert keys[key] == [text], key


def test_the_documented_shortcuts_are_exactly_the_windows(window):
    tables = documented_shortcuts()
    assert tables, "no table with a Shortcut column in README.md or docs/"
    for path, keys in tables:
        assert keys == set(window_shortcuts(window)), path


@pytest.mark.timeout(60)
@pytest.mark.parametrize("key", list(SHORTCUTS))
def test_each_shortcut_sent_with_qtest_triggers_its_action(qtbot, window, dialogs: list[str], key: str):
    action = next(a for a in window.findChildren(QtGui.QAction) if key in [s.toString() for s in a.shortcuts()])
    fired: list[bool] = []
    action.triggered.connect(lambda _checked=False: fired.append(True))
    # As a live run enables the role and cluster actions (their effect on one: the next test).
    action.setEnabled(True)
    window.pages.setCurrentWidget(window.monitor)
    press(qtbot, window, key)
    assert fired == [True], f"{key} did not trigger {action.text()!r}"
    effects = {
        "Ctrl+E": lambda: window.pages.currentWidget() is window.editor,
        "Ctrl+M": lambda: window.pages.currentWidget() is window.monitor,
        "Ctrl+Shift+B": lambda: window.pages.currentWidget() is window.runs_page,
        "Ctrl+1": lambda: window.tabs.currentIndex() == 0,
        "Ctrl+2": lambda: window.tabs.currentIndex() == 1,
        "Ctrl+3": lambda: window.tabs.currentIndex() == 2,
        "Ctrl+4": lambda: window.tabs.currentIndex() == 3,
        "Ctrl+O": lambda: dialogs == ["Open cluster file"],
        "Ctrl+Shift+O": lambda: len(dialogs) == 1,
        "Ctrl+Q": lambda: not window.isVisible(),
        "Ctrl+L": lambda: window.statusBar().currentMessage().startswith("not launched"),
        # The paste dialog is window-modal: the fixture closes it as it closes the file dialogs.
        "Ctrl+Shift+V": lambda: dialogs == ["Fill the cluster from a command line or TF_CONFIG"],
        "Ctrl+S": lambda: "saved" in window.editor.status_label.text(),
    }
    if key in effects:
        qtbot.waitUntil(effects[key], timeout=10_000)
    for widget in QtWidgets.QApplication.topLevelWidgets():
        if isinstance(widget, QtWidgets.QDialog) and widget.isVisible():
            widget.reject()


@pytest.mark.timeout(60)
def test_shift_return_in_the_logs_search_finds_backwards(qtbot, window):
    calls: list[bool] = []
    window.logs.find_text = lambda *, backward=False: calls.append(backward) or True  # type: ignore[method-assign]
    window.pages.setCurrentWidget(window.monitor)
    window.tabs.setCurrentWidget(window.logs)
    window.logs.search.setFocus()
    qtbot.waitUntil(window.logs.search.hasFocus, timeout=5_000)
    press(qtbot, window.logs.search, LOG_SEARCH_BACK)
    assert calls == [True]


@pytest.mark.timeout(60)
def test_a_role_chosen_after_a_ctrl_shortcut_is_the_one_the_next_shortcut_acts_on(qtbot, tmp_path: Path):
    """QTest leaves Ctrl in the application's modifiers after Ctrl+T, as a user may still hold it:
    choosing a role then (a tile, the banner's Show log) must select it, not toggle it off."""
    from gui.window.main_window import MainWindow

    spec, _ = load(light_cluster(tmp_path, workers=2))
    window = MainWindow(spec, runs_root=tmp_path / "runs")
    qtbot.addWidget(window)
    window.show()
    window.select_role("worker:1")
    press(qtbot, window, "Ctrl+T")
    for role in ("worker:0", "ps:0", "worker:1"):
        window.select_role(role)
        assert window.selected_roles() == [role]


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_role_shortcuts_stop_restart_and_kill_a_real_role(qtbot, tmp_path: Path):
    from gui.window.main_window import MainWindow

    spec, _ = load(light_cluster(tmp_path, workers=2, steps=0, rate=10))
    assert spec is not None
    window = MainWindow(spec, runs_root=tmp_path / "runs")
    qtbot.addWidget(window)
    window.show()
    window.controls.launch.trigger()

    def state(role: str) -> str:
        return cell(window, role, "State").split(" (")[0]

    def attempts(role: str) -> int:
        source = window.source
        status = source.status() if source is not None else None
        return next((r.attempt for r in status.roles if r.role == role), 0) if status else 0

    qtbot.waitUntil(lambda: all(state(r) == "running" for r in ("ps:0", "worker:0", "worker:1")), timeout=90_000)
    window.select_role("worker:1")
    press(qtbot, window, "Ctrl+R")  # restart: a second attempt of the same role
    qtbot.waitUntil(lambda: attempts("worker:1") >= 2 and state("worker:1") == "running", timeout=60_000)
    press(qtbot, window, "Ctrl+T")  # stop
    qtbot.waitUntil(lambda: state("worker:1") == "stopped", timeout=60_000)
    window.select_role("worker:0")
    press(qtbot, window, "Ctrl+K")  # kill
    # Whatever the recovery does next, the attempt's end says how it ended.
    qtbot.waitUntil(lambda: cell(window, "worker:0", "Exit") == "killed by SIGKILL", timeout=60_000)
    press(qtbot, window, "Ctrl+Shift+S")  # stop all
    qtbot.waitUntil(lambda: window.source is not None and window.source.done, timeout=60_000)
