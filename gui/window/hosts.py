"""What the window's add-ons (TensorBoard, export) use of the main window, as Protocols: they are
given :class:`gui.window.main_window.MainWindow` without importing it (no import circle)."""

from __future__ import annotations

from typing import Protocol

from PySide6 import QtWidgets

from core.cluster.spec import ClusterSpec
from core.controller.session import RunSource
from gui.run.tabs.training import TrainingPanel
from gui.window.actions import WindowActions


class MenuHost(Protocol):
    """A window with actions (a File menu ending in Quit), a status bar and the run it shows."""

    controls: WindowActions

    @property
    def source(self) -> RunSource | None: ...

    def window(self) -> QtWidgets.QWidget: ...  # the window itself: the parent of what is made here

    def statusBar(self) -> QtWidgets.QStatusBar: ...


class ExportHost(MenuHost, Protocol):
    """A :class:`MenuHost` whose tabs hold plots (the Training tab's curves name their roles)."""

    tabs: QtWidgets.QTabWidget
    training: TrainingPanel

    @property
    def spec(self) -> ClusterSpec | None: ...
