"""Desktop notifications (the system tray) for the run's notifications, when the window is not the
active one: a run finished, a role failed for good, a stall or a stuck wait, a host or Slurm job
lost. The same rules as the ``[notify]`` command (:func:`core.notify.classify`)."""

from __future__ import annotations

import time

from PySide6 import QtGui, QtWidgets

from core.notify import Notification, classify
from core.run.events import Event

# Events read back from an old run arrive too: only what happened lately is news.
RECENT_S = 120.0


class DesktopNotifier:
    """Shows notifications in the system tray; does nothing where there is no tray."""

    def __init__(self, window: QtWidgets.QMainWindow) -> None:
        self.window = window
        self.tray: QtWidgets.QSystemTrayIcon | None = None
        self.shown: list[Notification] = []  # what was shown (the latest 50), for the user and tests

    def on_event(self, event: Event) -> None:
        """Called on the GUI thread for every event the window dispatches."""
        notification = classify(event)
        if notification is None or time.time() - notification.t > RECENT_S:
            return
        if not self.window.isActiveWindow():  # the user is looking at it: the window says it already
            self.show(notification)

    def show(self, notification: Notification) -> None:
        self.shown = [*self.shown[-49:], notification]
        tray = self._tray()
        if tray is not None:
            icon = QtWidgets.QSystemTrayIcon.MessageIcon.Information
            if notification.kind != "run_finished" or notification.data.get("result") != "succeeded":
                icon = QtWidgets.QSystemTrayIcon.MessageIcon.Warning
            tray.showMessage(f"TowerDeck: {notification.title}", notification.message or notification.title, icon)

    def _tray(self) -> QtWidgets.QSystemTrayIcon | None:
        if not QtWidgets.QSystemTrayIcon.isSystemTrayAvailable():
            return None
        if self.tray is None:
            icon = self.window.windowIcon()
            if icon.isNull():
                icon = self.window.style().standardIcon(QtWidgets.QStyle.StandardPixmap.SP_ComputerIcon)
            self.tray = QtWidgets.QSystemTrayIcon(QtGui.QIcon(icon), self.window)
            self.tray.setToolTip("TowerDeck")
            self.tray.show()
        return self.tray
