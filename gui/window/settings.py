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


def restore_layout(window: QtWidgets.QMainWindow, split: QtWidgets.QSplitter, tabs: QtWidgets.QTabWidget) -> None:
    """The window's geometry, toolbars, splitter and current tab, as the user left them."""
    store_ = store()
    geometry = store_.value("window/geometry")
    if isinstance(geometry, QtCore.QByteArray):
        window.restoreGeometry(geometry)
    state = store_.value("window/state")
    if isinstance(state, QtCore.QByteArray):
        window.restoreState(state)
    split_state = store_.value("window/split")
    if isinstance(split_state, QtCore.QByteArray):
        split.restoreState(split_state)
    tab = store_.value("window/tab")
    if tab is not None:
        tabs.setCurrentIndex(int(tab))


def save_layout(window: QtWidgets.QMainWindow, split: QtWidgets.QSplitter, tabs: QtWidgets.QTabWidget) -> None:
    store_ = store()
    store_.setValue("window/geometry", window.saveGeometry())
    store_.setValue("window/state", window.saveState())
    store_.setValue("window/split", split.saveState())
    store_.setValue("window/tab", tabs.currentIndex())
    store_.sync()
