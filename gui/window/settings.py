"""Where the window keeps its layout, the last cluster and recent runs (QSettings, INI format).

``TOWERDECK_SETTINGS_DIR`` moves the file elsewhere: the tests point it at a temporary directory
so they never read or change the user's settings.
"""

from __future__ import annotations

import os
from pathlib import Path

from PySide6 import QtCore, QtWidgets

MAX_RECENT = 10


def store() -> QtCore.QSettings:
    override = os.environ.get("TOWERDECK_SETTINGS_DIR")
    if override:
        return QtCore.QSettings(str(Path(override) / "towerdeck.ini"), QtCore.QSettings.Format.IniFormat)
    return QtCore.QSettings(
        QtCore.QSettings.Format.IniFormat, QtCore.QSettings.Scope.UserScope, "TowerDeck", "TowerDeck"
    )


def _recent(key: str) -> list[str]:
    value = store().value(key)
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value] if isinstance(value, list) else []


def _push(key: str, path: Path) -> None:
    items = [str(path)] + [p for p in _recent(key) if p != str(path)]
    s = store()
    s.setValue(key, items[:MAX_RECENT])
    s.sync()


def remember_run(path: Path) -> None:
    _push("recent/runs", path)


def recent_runs() -> list[Path]:
    return [Path(p) for p in _recent("recent/runs")]


def remember_cluster(path: Path) -> None:
    """The cluster file opened or saved last: `python main.py` opens it next time."""
    s = store()
    s.setValue("last/cluster", str(path))
    s.sync()


def last_cluster() -> Path | None:
    value = store().value("last/cluster")
    return Path(str(value)) if value else None


SPLITTER_PREFIX = "splitters/"
# Sizes kept before the splitters were fitted to their content: every session saved the first
# split's defaults (a cramped overview and table) whether or not the user moved it; not read back.
_OLD_SPLIT_KEY = "window/split"


def named_splitters(window: QtWidgets.QWidget) -> list[QtWidgets.QSplitter]:
    """The window's splitters whose positions are kept: those with an object name."""
    return [s for s in window.findChildren(QtWidgets.QSplitter) if s.objectName()]


def restore_layout(window: QtWidgets.QMainWindow, tabs: QtWidgets.QTabWidget) -> set[str]:
    """The window's geometry, toolbars, splitters and current tab, as the user left them; returns
    the names of the splitters put back (those the user had moved)."""
    store_ = store()
    geometry = store_.value("window/geometry")
    if isinstance(geometry, QtCore.QByteArray):
        window.restoreGeometry(geometry)
    state = store_.value("window/state")
    if isinstance(state, QtCore.QByteArray):
        window.restoreState(state)
    restored = set()
    for splitter in named_splitters(window):
        split_state = store_.value(SPLITTER_PREFIX + splitter.objectName())
        if isinstance(split_state, QtCore.QByteArray) and splitter.restoreState(split_state):
            restored.add(splitter.objectName())
    tab = store_.value("window/tab")
    if tab is not None:
        tabs.setCurrentIndex(int(tab))
    return restored


def save_layout(window: QtWidgets.QMainWindow, tabs: QtWidgets.QTabWidget, *, moved: set[str]) -> None:
    """Keep the window's layout; of its splitters, only those in ``moved`` (moved by the user):
    the others go on fitting their content next time."""
    store_ = store()
    store_.setValue("window/geometry", window.saveGeometry())
    store_.setValue("window/state", window.saveState())
    store_.remove(_OLD_SPLIT_KEY)
    for splitter in named_splitters(window):
        key = SPLITTER_PREFIX + splitter.objectName()
        if splitter.objectName() in moved:
            store_.setValue(key, splitter.saveState())
        else:
            store_.remove(key)
    store_.setValue("window/tab", tabs.currentIndex())
    store_.sync()
