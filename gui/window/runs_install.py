"""The Runs page (:mod:`gui.runs.runs_page`) as a page of the main window: its open, attach and
compare wired to the window's own paths, and compare views opened beside it."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from PySide6 import QtCore, QtGui, QtWidgets

from core.controller.session import RunSource
from gui.runs.compare import CompareView
from gui.runs.runs_page import RunsPage
from gui.window.actions import WindowActions


class RunsHost(Protocol):
    """What the Runs page uses of the window it is a page of (:class:`gui.window.main_window.MainWindow`)."""

    pages: QtWidgets.QTabWidget
    controls: WindowActions

    @property
    def runs_root(self) -> Path | None: ...

    @property
    def source(self) -> RunSource | None: ...

    def window(self) -> QtWidgets.QWidget: ...  # the window itself: the parent of what is made here

    def open_run(self, path: Path) -> bool: ...

    def attach(self) -> bool: ...


ATTACH_TRIES = 100  # x 100 ms: how long to wait for an opened run's run.json before attaching


class InstalledRunsPage:
    """The Runs page in its window, and the compare views opened from it (still open)."""

    def __init__(self, page: RunsPage) -> None:
        self.page = page
        self.compare_views: list[QtWidgets.QWidget] = []


def install(window: RunsHost) -> InstalledRunsPage:
    """The Runs page as a page of the window, its actions wired to the window's open and attach
    paths, and compare views opened beside it."""
    from core.run.rundir import runs_root

    page = RunsPage(lambda: window.runs_root or runs_root())
    installed = InstalledRunsPage(page)
    window.pages.addTab(page, "Runs")
    page.sig_run_open.connect(window.open_run)
    page.sig_run_attach.connect(lambda path: _open_and_attach(window, path))
    page.sig_runs_compare.connect(lambda paths: _compare(window, installed.compare_views, paths))
    window.pages.currentChanged.connect(lambda _i: page.refresh() if window.pages.currentWidget() is page else None)
    action = QtGui.QAction("Runs", window.window())
    action.setShortcut(QtGui.QKeySequence("Ctrl+Shift+B"))
    action.setToolTip("Every run: sort, filter, open, attach, compare, archive, delete (Ctrl+Shift+B)")
    action.triggered.connect(lambda _c=False: window.pages.setCurrentWidget(page))
    view_menu = window.controls.view_menu
    view_menu.insertAction(view_menu.actions()[0], action)
    return installed


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


def _compare(window: RunsHost, views: list[QtWidgets.QWidget], paths: list[Path]) -> None:
    view = CompareView(paths, parent=window.window())
    view.setAttribute(QtCore.Qt.WidgetAttribute.WA_DeleteOnClose)
    views.append(view)
    view.destroyed.connect(lambda _o=None, v=view: views.remove(v) if v in views else None)
    view.show()
