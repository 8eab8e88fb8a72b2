"""The Runs page (:mod:`gui.runs.runs_page`) as a page of the main window: its open, attach and
compare wired to the window's own paths, and compare views opened beside it."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from PySide6 import QtCore, QtGui, QtWidgets

from core.controller.session import RunSource
from gui.runs.compare import CompareView
from gui.runs.runs_page import RunsPage


class RunsHost(Protocol):
    """What the Runs page needs of the window it is a page of (:class:`gui.window.main_window.MainWindow`)."""

    runs_root: Path | None
    source: RunSource | None
    pages: QtWidgets.QTabWidget
    view_menu: QtWidgets.QMenu
    compare_views: list[QtWidgets.QWidget]

    def window(self) -> QtWidgets.QWidget: ...  # the window itself: the parent of what is made here

    def open_run(self, path: Path) -> bool: ...

    def attach(self) -> bool: ...


ATTACH_TRIES = 100  # x 100 ms: how long to wait for an opened run's run.json before attaching


def install(window: RunsHost) -> RunsPage:
    """The Runs page as a page of the window, its actions wired to the window's open and attach
    paths, and compare views opened beside it."""
    from core.run.rundir import runs_root

    page = RunsPage(lambda: window.runs_root or runs_root())
    window.pages.addTab(page, "Runs")
    window.compare_views = []
    page.sig_run_open.connect(window.open_run)
    page.sig_run_attach.connect(lambda path: _open_and_attach(window, path))
    page.sig_runs_compare.connect(lambda paths: _compare(window, paths))
    window.pages.currentChanged.connect(lambda _i: page.refresh() if window.pages.currentWidget() is page else None)
    action = QtGui.QAction("Runs", window.window())
    action.setShortcut(QtGui.QKeySequence("Ctrl+Shift+B"))
    action.setToolTip("Every run: sort, filter, open, attach, compare, archive, delete (Ctrl+Shift+B)")
    action.triggered.connect(lambda _c=False: window.pages.setCurrentWidget(page))
    window.view_menu.insertAction(window.view_menu.actions()[0], action)
    return page


def _open_and_attach(window: RunsHost, path: Path) -> None:
    """A running run: opening it is reattaching (its launcher takes commands over its socket). A
    left one: open it, then attach once the reader has read its run.json (off this thread)."""
    if not window.open_run(path):
        return
    tries = [0]

    def attempt() -> None:
        source = window.source
        if source is None or source.path != path:
            return
        if source.attachable:
            window.attach()
        elif not source.done or tries[0] >= ATTACH_TRIES:
            return  # a live launcher holds it (its socket controls it), or it never said
        else:
            tries[0] += 1
            QtCore.QTimer.singleShot(100, attempt)

    attempt()


def _compare(window: RunsHost, paths: list[Path]) -> None:
    view = CompareView(paths, parent=window.window())
    view.setAttribute(QtCore.Qt.WidgetAttribute.WA_DeleteOnClose)
    window.compare_views.append(view)
    view.destroyed.connect(
        lambda _o=None, v=view: window.compare_views.remove(v) if v in window.compare_views else None
    )
    view.show()
