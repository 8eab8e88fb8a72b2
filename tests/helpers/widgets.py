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


def wait_frames(qtbot: Any, window: Any, count: int = 3, timeout_ms: int = 10_000) -> None:
    """Wait until the window has drawn ``count`` more frames (its frame timer's own handler ran), so a
    check that something does NOT happen at a frame has seen frames happen, however loaded the
    machine: a fixed wait can pass before one frame has run."""
    seen = [window.frame._frame_ended]  # set at the end of each frame
    drawn = [0]

    def more() -> bool:
        if window.frame._frame_ended != seen[0]:
            seen[0] = window.frame._frame_ended
            drawn[0] += 1
        return drawn[0] >= count

    qtbot.waitUntil(more, timeout=timeout_ms)


def tiles_painted_per_frame(qtbot: Any, grid: Any, frames: int = 10) -> list[int]:
    """How many tiles ``grid`` (a GPU grid or a host grid: ``refresh()``, ``tiles_painted``) paints
    in each of ``frames`` frames: a refresh, then its paint when it asked for one."""
    shares = []
    for _ in range(frames):
        painted = grid.tiles_painted
        if grid.refresh():
            qtbot.waitUntil(lambda painted=painted: grid.tiles_painted > painted)
        shares.append(grid.tiles_painted - painted)
    return shares
