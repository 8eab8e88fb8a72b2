"""Placement panel: per role, ops per device at a glance, and a filterable, sortable op table.

A compute op (MatMul, Conv2D, ...) that TensorFlow placed on a CPU of the role's own task while the
role has a GPU is highlighted: that is the classic performance mistake the placement log reveals.
Which ops those are, the sentence and the rows are :class:`core.views.placement.PlacementTable`
(Qt-free); this module shows it.
"""

from __future__ import annotations

from typing import Any

import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from core.telemetry.placement import short_device
from core.views.placement import PlacementTable, Row, device_kind

COLUMNS = ("Op", "Type", "Device", "Kind", "Count")
COLUMN_WIDTHS = (300, 170, 300, 60, 60)
HIGHLIGHT = QtGui.QColor("#f8d0d0")
BAR_COLOURS = {"gpu": "#2e9d4f", "own cpu": "#8a8a8a", "other task": "#2b6cb0"}


class OpTableModel(QtCore.QAbstractTableModel):
    """The op table as plain tuples: tens of thousands of rows without an object per cell."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[Row] = []
        self.highlight_tip = ""

    def set_rows(self, rows: list[Row], highlight_tip: str) -> None:
        self.beginResetModel()
        self.rows = rows
        self.highlight_tip = highlight_tip
        self.endResetModel()

    def rowCount(self, parent: QtCore.QModelIndex | QtCore.QPersistentModelIndex = QtCore.QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent: QtCore.QModelIndex | QtCore.QPersistentModelIndex = QtCore.QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(COLUMNS)

    def data(self, index: QtCore.QModelIndex | QtCore.QPersistentModelIndex, role: int = 0) -> Any:
        if not index.isValid():
            return None
        row = self.rows[index.row()]
        if role == QtCore.Qt.ItemDataRole.DisplayRole:
            return row[index.column()]
        if role == QtCore.Qt.ItemDataRole.BackgroundRole and row[5]:
            return HIGHLIGHT
        if role == QtCore.Qt.ItemDataRole.ToolTipRole and row[5]:
            return self.highlight_tip
        return None

    def headerData(self, section: int, orientation: QtCore.Qt.Orientation, role: int = 0) -> Any:
        if role == QtCore.Qt.ItemDataRole.DisplayRole and orientation == QtCore.Qt.Orientation.Horizontal:
            return COLUMNS[section]
        return None


class PlacementPanel(QtWidgets.QWidget):
    """A role picker, a bar per device, a filter box and the op table."""

    sig_role_changed = QtCore.Signal(str)
    """The user picked another role; payload: the role id."""

    def __init__(self) -> None:
        super().__init__()
        self._shown_key: tuple[str, int, int, bool] | None = None
        self.role_box = QtWidgets.QComboBox()
        self.role_box.setMinimumContentsLength(12)
        self.role_box.currentTextChanged.connect(self._on_role_picked)
        self.filter = QtWidgets.QLineEdit()
        self.filter.setPlaceholderText("Filter ops by name, type or device (e.g. MatMul, GPU:0, ps)")
        self.filter.setClearButtonEnabled(True)
        self.summary_label = QtWidgets.QLabel("No placement lines yet.")
        self.summary_label.setWordWrap(True)

        self.bars = pg.PlotWidget(title="Ops per device")
        self.bars.setBackground("w")
        self.bars.setMouseEnabled(x=False, y=False)
        self.bars.getAxis("left").enableAutoSIPrefix(False)
        self.bars.setMinimumWidth(320)
        self.bar_item: pg.BarGraphItem | None = None

        self.model = OpTableModel()
        self.proxy = QtCore.QSortFilterProxyModel()
        self.proxy.setSourceModel(self.model)
        self.proxy.setFilterKeyColumn(-1)
        self.proxy.setFilterCaseSensitivity(QtCore.Qt.CaseSensitivity.CaseInsensitive)
        self.filter.textChanged.connect(self.proxy.setFilterFixedString)
        self.table = QtWidgets.QTableView()
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(2, QtCore.Qt.SortOrder.AscendingOrder)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.setWordWrap(False)

        top = QtWidgets.QHBoxLayout()
        top.addWidget(QtWidgets.QLabel("Role:"))
        top.addWidget(self.role_box)
        top.addWidget(self.filter, 1)
        right = QtWidgets.QVBoxLayout()
        right.addLayout(top)
        right.addWidget(self.summary_label)
        right.addWidget(self.table, 1)
        right_box = QtWidgets.QWidget()
        right_box.setLayout(right)
        split = QtWidgets.QSplitter(QtCore.Qt.Orientation.Horizontal)
        split.addWidget(self.bars)
        split.addWidget(right_box)
        split.setSizes([420, 820])
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(split)

    def set_roles(self, roles: list[str]) -> None:
        current = self.role_box.currentText()
        if [self.role_box.itemText(i) for i in range(self.role_box.count())] == roles:
            return
        self.role_box.blockSignals(True)
        self.role_box.clear()
        self.role_box.addItems(roles)
        if current in roles:
            self.role_box.setCurrentText(current)
        self.role_box.blockSignals(False)

    def role(self) -> str:
        return self.role_box.currentText()

    def set_role(self, role: str) -> None:
        if role != self.role_box.currentText() and self.role_box.findText(role) >= 0:
            self.role_box.setCurrentText(role)

    def _on_role_picked(self, role: str) -> None:
        self._shown_key = None
        self.sig_role_changed.emit(role)

    def show_summary(self, role: str, summary: dict[str, Any], *, role_has_gpu: bool) -> None:
        """Show the placement ``summary`` (:meth:`PlacementAggregator.summary`) of ``role``."""
        ops: list[dict[str, Any]] = summary.get("ops") or []
        key = (role, len(ops), int(summary.get("lines_matched") or 0), role_has_gpu)
        if key == self._shown_key:
            return
        self._shown_key = key
        table = PlacementTable.of(role, summary, role_has_gpu=role_has_gpu)
        self.summary_label.setText(table.text)
        self.model.set_rows(table.rows, table.misplaced_tip)
        # Op names can be very long: cap the first column so type and device stay in view.
        for column, width in enumerate(COLUMN_WIDTHS):
            self.table.setColumnWidth(column, width)
        self._draw_bars(table.counts)

    def _draw_bars(self, counts: dict[str, int]) -> None:
        devices = list(counts)
        bars = {
            "x0": [0] * len(devices),
            "y": list(range(len(devices))),
            "height": 0.6,
            "width": [counts[d] for d in devices],
            "brushes": [pg.mkBrush(BAR_COLOURS[device_kind(d, self.role())]) for d in devices],
        }
        if self.bar_item is None:  # one bar item, updated in place: none made and dropped per role
            self.bar_item = pg.BarGraphItem(**bars)
            self.bars.addItem(self.bar_item)
        else:
            self.bar_item.setOpts(**bars)
        if not counts:
            return
        axis = self.bars.getAxis("left")
        axis.setTicks([[(i, short_device(d)) for i, d in enumerate(devices)]])
        self.bars.setLabel("bottom", "ops (green GPU, grey own CPU, blue other task)")
        self.bars.setYRange(-0.6, len(devices) - 0.4, padding=0)
        self.bars.setXRange(0, max(counts.values()) * 1.05, padding=0)
