"""The roles table and the banner above it: one row per role, failed and stalled roles standing out.

Fed with the source's :class:`~core.controller.ClusterStatus` once a frame; cells are only
touched when their text changes, so a steady table costs next to nothing to refresh.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from PySide6 import QtCore, QtGui, QtWidgets

from core.controller import ClusterStatus, RoleState, RoleStatus
from core.spec import Task

STATE_COLOURS = {
    RoleState.PENDING: "#8a8a8a",
    RoleState.STARTING: "#b8860b",
    RoleState.RUNNING: "#2e7d32",
    RoleState.BACKOFF: "#d9822b",
    RoleState.STOPPING: "#b8860b",
    RoleState.SUCCEEDED: "#2b6cb0",
    RoleState.FAILED: "#c62828",
    RoleState.STOPPED: "#6b6b6b",
}
FAILED_ROW = QtGui.QColor("#fde2e2")
STALLED_COLOUR = "#b45309"
COLUMNS = (
    "Role",
    "Host",
    "PID",
    "State",
    "Uptime",
    "Restarts",
    "Exit",
    "Step",
    "Loss",
    "Step time",
    "CPU",
    "RSS",
    "GPUs",
)
STATE_COLUMN = COLUMNS.index("State")


def fmt_bytes(n: int | None) -> str:
    return "" if n is None else f"{n / 2**20:.0f} MiB"


def fmt_duration(seconds: float) -> str:
    """``m:ss``, or ``h:mm:ss`` from an hour on."""
    seconds = int(seconds)
    if seconds < 3600:
        return f"{seconds // 60}:{seconds % 60:02d}"
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def state_text(role: RoleStatus) -> str:
    text = str(role.state)
    if role.waiting_for and role.state == RoleState.RUNNING:  # diagnosis (issue 13)
        text += f" (waiting for {role.waiting_for})"
    elif role.stalled and role.state == RoleState.RUNNING:
        text += f" (stalled {fmt_duration(role.stalled_for_s or 0)})"
    elif role.straggler:
        text += " (straggler)"
    return text


def html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def row_cells(role: RoleStatus, link_state: str | None, now: float) -> list[str]:
    """The table's cells for ``role``; ``link_state`` is its host's SSH link state, if any."""
    alive = role.state in (RoleState.RUNNING, RoleState.STARTING, RoleState.STOPPING)
    return [
        role.role,
        role.host if link_state in (None, "connected") else f"{role.host} ({link_state})",
        str(role.pid or ""),
        state_text(role),
        fmt_duration(now - role.started_at) if role.started_at and alive else "",
        str(role.restarts),
        role.exit_text,
        "" if role.step is None else str(role.step),
        "" if role.loss is None else f"{role.loss:.4f}" + (" (tb)" if role.loss_source == "tb" else ""),
        "" if role.step_time_s is None else f"{role.step_time_s * 1000:.1f} ms",
        "" if role.cpu_percent is None else f"{role.cpu_percent:.0f}%",
        fmt_bytes(role.rss_bytes),
        ",".join(str(g) for g in role.gpus) or "-",
    ]


class RolesView(QtWidgets.QWidget):
    """The banner (failed and stalled roles, with why) above the roles table."""

    def __init__(self, last_lines: Callable[[str, int], list[str]]) -> None:
        super().__init__()
        self._last_lines = last_lines
        self.banner = QtWidgets.QLabel()
        self.banner.setWordWrap(True)
        self.banner.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        self.banner.setStyleSheet("QLabel { background: #fde2e2; color: #7f1d1d; padding: 6px; }")
        self.banner.hide()
        self.table = QtWidgets.QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.setContextMenuPolicy(QtCore.Qt.ContextMenuPolicy.ActionsContextMenu)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QtWidgets.QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.banner)
        layout.addWidget(self.table)

    # ------------------------------------------------------------------ selection

    def select_role(self, role: str) -> None:
        for row in range(self.table.rowCount()):
            item = self.table.item(row, 0)
            if item is not None and item.text() == role:
                self.table.selectRow(row)
                return

    def selected_roles(self) -> list[str]:
        rows = sorted({index.row() for index in self.table.selectedIndexes()})
        items = [self.table.item(row, 0) for row in rows]
        return [item.text() for item in items if item is not None]

    # ------------------------------------------------------------------ contents

    def show_tasks(self, tasks: list[Task]) -> None:
        """Before a launch: the cluster's roles, not launched."""
        self.table.setRowCount(len(tasks))
        for r, task in enumerate(tasks):
            self._set_row(r, [task.role_id, task.host, "", "not launched", *[""] * 8, "-"], None)
        self.banner.hide()

    def show_status(self, status: ClusterStatus, host_states: dict[str, dict[str, Any]]) -> None:
        self.table.setRowCount(len(status.roles))
        now = time.time()
        for r, role in enumerate(status.roles):
            self._set_row(r, row_cells(role, host_states.get(role.host, {}).get("state"), now), role)
        self._update_banner(status)

    def _update_banner(self, status: ClusterStatus) -> None:
        failed = [r for r in status.roles if r.state == RoleState.FAILED]
        stalled = [r for r in status.roles if r.stalled and r.state == RoleState.RUNNING]
        waiting = [r for r in status.roles if r.waiting_for and r.state == RoleState.RUNNING]  # issue 13
        if not failed and not stalled and not waiting:
            self.banner.hide()
            return
        parts = [  # diagnosis (issue 13): who waits for whom, and the fix
            f"<b>{r.role} is waiting for {r.waiting_for}</b>: {html(r.waiting_message)}<br>Fix: {html(r.waiting_fix)}"
            for r in waiting
        ]
        parts += [
            f"<b>{r.role} is stalled</b>: no new training step for {fmt_duration(r.stalled_for_s or 0)} "
            f"(last step {r.step}). Hung? Select it and kill (Ctrl+K) or restart (Ctrl+R)."
            for r in stalled
        ]
        for role in failed:
            lines = self._last_lines(role.role, 3)
            text = f"<b>{role.role} failed</b>: {html(role.detail or role.exit_text)}"
            if lines:
                text += "<br><tt>" + "<br>".join(html(line) for line in lines) + "</tt>"
            parts.append(text)
        self.banner.setText("<br>".join(parts))
        self.banner.show()

    def _set_row(self, row: int, cells: list[str], role: RoleStatus | None) -> None:
        failed = role is not None and role.state == RoleState.FAILED
        for column, text in enumerate(cells):
            item = self.table.item(row, column)
            if item is None:
                item = QtWidgets.QTableWidgetItem()
                self.table.setItem(row, column, item)
            if item.text() != text:
                item.setText(text)
            background = FAILED_ROW if failed else QtGui.QColor(0, 0, 0, 0)
            if item.background().color() != background:
                item.setBackground(background)
            if column == STATE_COLUMN and role is not None:
                stalled = (role.stalled or bool(role.waiting_for)) and role.state == RoleState.RUNNING  # issue 13
                item.setForeground(QtGui.QColor(STALLED_COLOUR if stalled else STATE_COLOURS[role.state]))
                font = item.font()
                if font.bold() != (failed or stalled):
                    font.setBold(failed or stalled)
                    item.setFont(font)
                item.setToolTip(
                    f"{role.waiting_message}\nFix: {role.waiting_fix}"  # diagnosis (issue 13)
                    if role.waiting_for
                    else f"no new step for {fmt_duration(role.stalled_for_s or 0)}: hung? Kill it (Ctrl+K) or restart it"
                    if stalled
                    else role.detail
                )
