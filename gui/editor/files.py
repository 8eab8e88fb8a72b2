"""The cluster editor's recent-files list (QSettings), and failures in a few words.

The text it saves, and how, is ``core.cluster.spec.write`` (``toml_text``, ``write_atomically``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6 import QtCore, QtWidgets

MAX_RECENT = 10
RECENT_KEY = "editor/recent_files"


class RecentFiles:
    """The last files opened or saved, newest first, kept in QSettings, with their menu."""

    def __init__(self, settings: QtCore.QSettings, on_open: Callable[[Path], None], parent: QtWidgets.QWidget) -> None:
        self._settings = settings
        self._on_open = on_open
        self.menu = QtWidgets.QMenu("Open Recent", parent)
        self.menu.setToolTipsVisible(True)
        self._rebuild()

    def files(self) -> list[Path]:
        value = self._settings.value(RECENT_KEY, [])
        # An ini file hands a one-element list back as a plain string.
        items = [value] if isinstance(value, str) else list(value) if isinstance(value, (list, tuple)) else []
        return [Path(p) for p in items if p][:MAX_RECENT]

    def remember(self, path: Path) -> None:
        items = [str(path)] + [str(p) for p in self.files() if p != path]
        self._settings.setValue(RECENT_KEY, items[:MAX_RECENT])
        self._rebuild()

    def forget(self, path: Path) -> None:
        self._settings.setValue(RECENT_KEY, [str(p) for p in self.files() if p != path])
        self._rebuild()

    def clear(self) -> None:
        self._settings.setValue(RECENT_KEY, [])
        self._rebuild()

    def _rebuild(self) -> None:
        self.menu.clear()
        files = self.files()
        for i, path in enumerate(files, 1):
            act = self.menu.addAction(f"&{i}  {path.name}   ({path.parent})")
            act.setData(str(path))
            act.setToolTip(str(path))
            act.triggered.connect(lambda _checked=False, p=path: self._on_open(p))
        if files:
            self.menu.addSeparator()
            self.menu.addAction("Clear the list").triggered.connect(lambda _checked=False: self.clear())
        else:
            self.menu.addAction("(no recent files)").setEnabled(False)


def reason(err: BaseException) -> str:
    """An exception as a few words for a status line: 'permission denied', not an errno tuple."""
    if isinstance(err, OSError) and err.strerror:
        return err.strerror.lower()
    return str(err) or type(err).__name__
