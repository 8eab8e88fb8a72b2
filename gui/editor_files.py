"""The cluster editor's files: the recent-files list (QSettings) and the TOML text it saves."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6 import QtCore, QtWidgets

from core import tomlfmt
from core.spec import JOB_ORDER

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


def toml_text(data: dict[str, Any]) -> str:
    """The form's table as TOML laid out like the bundled cluster files (core.tomlfmt): settings
    first, then [env], then one section per job in launch order; unknown jobs stay, last."""
    ordered = {k: v for k, v in data.items() if k not in ("env", "jobs")}
    if "env" in data:
        ordered["env"] = data["env"]
    if "jobs" in data:
        jobs = data["jobs"]
        if isinstance(jobs, dict):
            jobs = {
                **{j: jobs[j] for j in JOB_ORDER if j in jobs},
                **{j: v for j, v in jobs.items() if j not in JOB_ORDER},
            }
        ordered["jobs"] = jobs
    return tomlfmt.dumps(ordered)


def write_atomically(target: Path, text: str) -> None:
    """Replace ``target`` with ``text`` in one step: a crash or a full disk never leaves half a
    cluster file; the file keeps its permissions. Runs on a worker thread (it touches the disk)."""
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".towerdeck-tmp", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        with contextlib.suppress(FileNotFoundError):
            os.chmod(tmp, stat.S_IMODE(target.stat().st_mode))
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def reason(err: BaseException) -> str:
    """An exception as a few words for a status line: 'permission denied', not an errno tuple."""
    if isinstance(err, OSError) and err.strerror:
        return err.strerror.lower()
    return str(err) or type(err).__name__
