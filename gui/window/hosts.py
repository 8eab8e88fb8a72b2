"""What the window's add-ons (TensorBoard, export) need of the main window, as Protocols: they are
built onto :class:`gui.window.main_window.MainWindow` without importing it (no import circle)."""

from __future__ import annotations

from typing import Protocol

from PySide6 import QtGui, QtWidgets

from core.controller.session import RunSource
from gui.run.tabs.training import TrainingPanel


class MenuHost(Protocol):
    """A window with a File menu (ending in Quit), a status bar and the run it shows."""

    file_menu: QtWidgets.QMenu
    action_quit: QtGui.QAction
    source: RunSource | None

    def window(self) -> QtWidgets.QWidget: ...  # the window itself: the parent of what is made here

    def statusBar(self) -> QtWidgets.QStatusBar: ...


class ExportHost(MenuHost, Protocol):
    """A :class:`MenuHost` whose tabs hold plots (the Training tab's curves name their roles)."""

    tabs: QtWidgets.QTabWidget
    training: TrainingPanel
