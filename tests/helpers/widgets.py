"""Driving and reading the window's widgets as a user does: typing into a field, reading a role's cell."""

from __future__ import annotations

from typing import Any

from PySide6 import QtCore, QtWidgets


def cell(window: Any, role: str, column: str) -> str:
    """What the roles table of ``window`` shows for ``role`` under ``column``."""
    try:
        return window.roles.cell(role, column)
    except KeyError as e:
        raise AssertionError(f"no row for {role}") from e


def type_into(qtbot: Any, widget: QtWidgets.QLineEdit, text: str) -> None:
    """Replace the text of ``widget`` by typing ``text`` into it, key by key."""
    widget.setFocus()
    widget.selectAll()
    qtbot.keyClick(widget, QtCore.Qt.Key.Key_Delete)
    qtbot.keyClicks(widget, text)
