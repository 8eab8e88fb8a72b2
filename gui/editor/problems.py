"""The list of problems under the cluster form: every one as ``python main.py validate`` prints
it, coloured by severity, with a title that counts them."""

from __future__ import annotations

from collections.abc import Callable

from PySide6 import QtCore, QtGui, QtWidgets

from core.cluster.problems import ERROR, Problem
from gui.editor.fields import ERROR_INK, WARNING_INK


class ProblemList(QtWidgets.QWidget):
    """A title and the list. ``sig_field_clicked(str)``: a problem was clicked (its dotted field);
    ``sig_remove_requested(str)``: the user asked to drop an unknown key (offered only where
    ``can_remove(field)``: such a key has no widget to fix it in, so this is where it can go)."""

    sig_field_clicked = QtCore.Signal(str)
    sig_remove_requested = QtCore.Signal(str)

    def __init__(self, can_remove: Callable[[str], bool], parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self._can_remove = can_remove
        self.title = QtWidgets.QLabel()
        self.list = QtWidgets.QListWidget()
        self.list.setWordWrap(True)
        self.list.setAlternatingRowColors(True)
        self.list.setToolTip("Every problem, as `python main.py validate` reports it. Click one to go there.")
        self.list.itemClicked.connect(self._on_item_clicked)
        self.list.setContextMenuPolicy(QtCore.Qt.ContextMenuPolicy.CustomContextMenu)
        self.list.customContextMenuRequested.connect(self._on_menu_requested)
        box = QtWidgets.QVBoxLayout(self)
        box.setContentsMargins(0, 4, 0, 0)
        box.addWidget(self.title)
        box.addWidget(self.list, 1)

    def show_problems(self, problems: list[Problem], source: str, *, edited_file: bool, checking: bool) -> None:
        """Show ``problems`` (``source``: the file's name in each line). ``edited_file``: the form
        differs from its file, so there are no line numbers; ``checking``: this machine's checks run."""
        self.list.clear()
        for problem in problems:
            item = QtWidgets.QListWidgetItem(problem.format(source))
            item.setForeground(QtGui.QColor(ERROR_INK if problem.severity == ERROR else WARNING_INK))
            item.setData(QtCore.Qt.ItemDataRole.UserRole, problem.field)
            self.list.addItem(item)
        errors = sum(p.severity == ERROR for p in problems)
        warnings = len(problems) - errors
        checking_note = " Checking ports and paths on this machine..." if checking else ""
        if problems:
            counts = ", ".join(
                f"{n} {word}{'s' if n != 1 else ''}" for n, word in ((errors, "error"), (warnings, "warning")) if n
            )
            lines = " Line numbers come back when the file is saved." if edited_file else ""
            self.title.setText(
                f"<b>Problems: {counts}</b> (the same as <tt>python main.py validate</tt>).{lines}{checking_note}"
            )
        else:
            self.title.setText(f"<b style='color:#1e7b34'>No problems: this cluster can launch.</b>{checking_note}")

    def _on_item_clicked(self, item: QtWidgets.QListWidgetItem) -> None:
        self.sig_field_clicked.emit(str(item.data(QtCore.Qt.ItemDataRole.UserRole) or ""))

    def _on_menu_requested(self, pos: QtCore.QPoint) -> None:
        item = self.list.itemAt(pos)
        field = str(item.data(QtCore.Qt.ItemDataRole.UserRole) or "") if item else ""
        if not self._can_remove(field):
            return
        menu = QtWidgets.QMenu(self)
        menu.addAction(f"Remove {field} from the cluster").triggered.connect(
            lambda _checked=False: self.sig_remove_requested.emit(field)
        )
        menu.popup(self.list.viewport().mapToGlobal(pos))
