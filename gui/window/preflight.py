"""The pre-flight results as a table: one row per check of every host, failures first-class."""

from __future__ import annotations

from typing import Any

from PySide6 import QtGui, QtWidgets

COLUMNS = ("Host", "Via", "Check", "Result", "Detail", "Fix")
FAILED = QtGui.QColor("#fde2e2")
WARNING = QtGui.QColor("#fff4cc")  # a task's GPU already busy: said, not a reason to stop


class PreflightDialog(QtWidgets.QDialog):
    """Shows :func:`core.preflight.runner.preflight`'s results; closes with OK."""

    def __init__(self, parent: QtWidgets.QWidget | None, results: list[Any]) -> None:
        super().__init__(parent)
        self.setWindowTitle("Hosts")
        self.resize(1000, 420)
        good = sum(1 for r in results if r.ok)
        self.summary = QtWidgets.QLabel(
            f"{good} of {len(results)} hosts ready."
            + ("" if good == len(results) else " Fix what is marked, then launch again.")
        )
        self.table = QtWidgets.QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        for result in results:
            for check in result.checks:
                row = self.table.rowCount()
                self.table.insertRow(row)
                warning = getattr(check, "warning", False)
                mark = "ok" if check.ok else ("FAILED" if check.ok is False else ("WARNING" if warning else "-"))
                values = (result.host, result.destination, check.name, mark, check.detail, check.fix or "")
                for column, text in enumerate(values):
                    item = QtWidgets.QTableWidgetItem(str(text))
                    if check.ok is False or warning:
                        item.setBackground(FAILED if check.ok is False else WARNING)
                    item.setToolTip(str(text))
                    self.table.setItem(row, column, item)
        self.table.resizeColumnsToContents()
        self.table.horizontalHeader().setStretchLastSection(True)
        buttons = QtWidgets.QDialogButtonBox(QtWidgets.QDialogButtonBox.StandardButton.Ok)
        buttons.accepted.connect(self.accept)
        layout = QtWidgets.QVBoxLayout(self)
        layout.addWidget(self.summary)
        layout.addWidget(self.table, 1)
        layout.addWidget(buttons)
