"""The dialog that fills the cluster editor from a pasted classic command line or a TF_CONFIG.

What the text means is ``core.cluster.pasted.import_pasted``'s business, as for ``python main.py import``.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6 import QtCore, QtWidgets

from core.cluster.pasted import looks_like_tf_config
from core.cluster.problems import Problem


class PasteDialog(QtWidgets.QDialog):
    """Where the user pastes; calls ``fill(text, command)`` and closes only when it worked."""

    def __init__(
        self, parent: QtWidgets.QWidget, default_command: str, fill: Callable[[str, str | None], list[Problem]]
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Fill the cluster from a command line or TF_CONFIG")
        self._fill = fill
        intro = QtWidgets.QLabel(
            "Paste the command you start one of the roles with, e.g.<br>"
            "<tt>python trainer.py --ps_hosts=h1:2222 --worker_hosts=h2:2222,h3:2222 --job_name=worker "
            "--task_index=0</tt><br>or a TF_CONFIG value, e.g.<br>"
            '<tt>{"cluster": {"chief": ["h1:2221"], "worker": ["h2:2222"], "ps": ["h3:2222"]}, '
            '"task": {"type": "worker", "index": 0}}</tt><br><br>'
            "The jobs, tasks, training command, strategy and launch style are replaced; the name, working "
            "directory, environment and timings stay. <tt>--job_name</tt>, <tt>--task_index</tt> and the "
            "TF_CONFIG <tt>task</tt> are dropped: TowerDeck sets them for each role."
        )
        intro.setWordWrap(True)
        intro.setTextFormat(QtCore.Qt.TextFormat.RichText)
        self.text_edit = QtWidgets.QPlainTextEdit()
        self.text_edit.setPlaceholderText("paste here")
        self.text_edit.textChanged.connect(self._on_text_changed)
        self.command_edit = QtWidgets.QLineEdit(default_command)
        self.command_edit.setToolTip("A TF_CONFIG says nothing about the program: this command runs every role.")
        self.command_row = QtWidgets.QWidget()
        row = QtWidgets.QHBoxLayout(self.command_row)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(QtWidgets.QLabel("Training command for the TF_CONFIG:"))
        row.addWidget(self.command_edit, 1)
        self.command_row.hide()
        self.error_label = QtWidgets.QLabel()
        self.error_label.setWordWrap(True)
        self.error_label.setStyleSheet("color: #b3261e;")
        self.error_label.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        buttons = QtWidgets.QDialogButtonBox(QtWidgets.QDialogButtonBox.StandardButton.Cancel)
        self.fill_button = buttons.addButton("Fill the form", QtWidgets.QDialogButtonBox.ButtonRole.AcceptRole)
        buttons.accepted.connect(self._on_fill)
        buttons.rejected.connect(self.reject)
        layout = QtWidgets.QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addWidget(self.text_edit, 1)
        layout.addWidget(self.command_row)
        layout.addWidget(self.error_label)
        layout.addWidget(buttons)
        self.resize(760, 420)

    def _on_text_changed(self) -> None:
        self.command_row.setVisible(looks_like_tf_config(self.text_edit.toPlainText()))
        self.error_label.clear()

    def _on_fill(self) -> None:
        command = self.command_edit.text() if self.command_row.isVisible() or self.command_edit.text() else None
        problems = self._fill(self.text_edit.toPlainText(), command)
        if problems:
            self.error_label.setText("\n".join(p.format() for p in problems))
            return
        self.accept()
