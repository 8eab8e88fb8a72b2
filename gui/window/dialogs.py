"""Questions the window asks."""

from __future__ import annotations

from PySide6 import QtWidgets


def ask_close_choice(parent: QtWidgets.QWidget) -> str:
    """Closing while the cluster runs: ``stop``, ``leave`` (it runs on; reattach later) or ``cancel``."""
    box = QtWidgets.QMessageBox(parent)
    box.setIcon(QtWidgets.QMessageBox.Icon.Question)
    box.setWindowTitle("TowerDeck")
    box.setText("The cluster is still running.")
    box.setInformativeText(
        "Stop every role, or leave the cluster running? A cluster left running keeps writing its "
        "run directory; open it later (File > Open run directory, then Attach) to take it over."
    )
    stop = box.addButton("Stop the cluster", QtWidgets.QMessageBox.ButtonRole.DestructiveRole)
    leave = box.addButton("Leave it running", QtWidgets.QMessageBox.ButtonRole.AcceptRole)
    box.addButton(QtWidgets.QMessageBox.StandardButton.Cancel)
    box.setDefaultButton(stop)
    box.exec()
    clicked = box.clickedButton()
    return "stop" if clicked is stop else "leave" if clicked is leave else "cancel"
