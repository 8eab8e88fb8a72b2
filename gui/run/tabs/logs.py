"""Logs panel: a role's live output with search, a follow toggle and a level filter.

Carriage-return progress bars (Keras, tqdm) are shown the way a terminal shows them: only the last
state of a line is kept, and a line still being redrawn is shown below the log until it ends. The
view keeps ``LOG_BLOCKS`` lines; the run directory keeps every byte. What the window keeps of
each role's output, the line assembly and the levels are :mod:`core.views.logs` (Qt-free); the
panel owns a :class:`~core.views.logs.RoleOutput` and shows it.
"""

from __future__ import annotations

from PySide6 import QtCore, QtGui, QtWidgets

from core.views.logs import LEVELS, LineAssembler, RoleOutput, line_level

LOG_BLOCKS = 5000


class LogPanel(QtWidgets.QWidget):
    """The output of one role, chosen in the roles table or the role box."""

    sig_role_changed = QtCore.Signal(str)
    """The user picked another role in the box; payload: the role id."""

    def __init__(self) -> None:
        super().__init__()
        self.output = RoleOutput()
        self.assembler = LineAssembler()  # the shown role's lines, as they are appended to the view
        self.current: str | None = None
        self.role_box = QtWidgets.QComboBox()
        self.role_box.setMinimumContentsLength(12)
        self.role_box.currentTextChanged.connect(self._on_role_picked)
        self.level = QtWidgets.QComboBox()
        self.level.addItems(LEVELS)
        self.level.currentIndexChanged.connect(lambda _i: self._render())
        self.search = QtWidgets.QLineEdit()
        self.search.setPlaceholderText("Search (Enter: next, Shift+Enter: previous)")
        self.search.setClearButtonEnabled(True)
        self.search.returnPressed.connect(lambda: self.find_text(backward=False))
        QtGui.QShortcut(QtGui.QKeySequence("Shift+Return"), self.search, lambda: self.find_text(backward=True))
        self.follow = QtWidgets.QCheckBox("Follow")
        self.follow.setChecked(True)
        self.follow.setToolTip("Keep the newest output in view")
        self.follow.toggled.connect(self._on_follow_toggled)
        self.found_label = QtWidgets.QLabel("")
        self.view = QtWidgets.QPlainTextEdit()
        self.view.setReadOnly(True)
        self.view.setMaximumBlockCount(LOG_BLOCKS)
        self.view.setLineWrapMode(QtWidgets.QPlainTextEdit.LineWrapMode.NoWrap)
        self.view.setFont(QtGui.QFontDatabase.systemFont(QtGui.QFontDatabase.SystemFont.FixedFont))
        self.view.verticalScrollBar().valueChanged.connect(self._on_scrolled)
        self.progress = QtWidgets.QLabel("")
        self.progress.setFont(self.view.font())
        self.progress.setToolTip("The line the role is redrawing (a progress bar)")
        self.title = QtWidgets.QLabel("Select a role to see its output")

        bar = QtWidgets.QHBoxLayout()
        bar.addWidget(QtWidgets.QLabel("Role:"))
        bar.addWidget(self.role_box)
        bar.addWidget(self.level)
        bar.addWidget(self.search, 1)
        bar.addWidget(self.found_label)
        bar.addWidget(self.follow)
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.title)
        layout.addLayout(bar)
        layout.addWidget(self.view, 1)
        layout.addWidget(self.progress)

    # ------------------------------------------------------------------ roles

    def set_roles(self, roles: list[str]) -> None:
        self.output.set_role_count(len(roles))
        if [self.role_box.itemText(i) for i in range(self.role_box.count())] == roles:
            return
        self.role_box.blockSignals(True)
        self.role_box.clear()
        self.role_box.addItems(roles)
        if self.current in roles:
            self.role_box.setCurrentText(self.current)
        else:
            self.role_box.setCurrentIndex(-1)
        self.role_box.blockSignals(False)

    def show_role(self, role: str | None) -> None:
        """Show ``role``'s output (what this window has kept of it), then follow it."""
        if role == self.current:
            return
        self.current = role
        if role is not None and self.role_box.currentText() != role:
            self.role_box.blockSignals(True)
            self.role_box.setCurrentText(role)
            self.role_box.blockSignals(False)
        self.title.setText("Select a role to see its output" if role is None else f"Output of {role}")
        self._render()

    def _on_role_picked(self, role: str) -> None:
        if role:
            self.show_role(role)
            self.sig_role_changed.emit(role)

    def clear(self) -> None:
        self.output.clear()
        self._render()

    # ------------------------------------------------------------------ text

    def add_output(self, role: str, text: str) -> None:
        """Keep ``text`` for ``role`` (bounded) and show it if that role is on screen."""
        self.output.add(role, text)
        if role == self.current:
            self._show_lines(self.assembler.feed(text))

    def last_lines(self, role: str, n: int) -> list[str]:
        """The last ``n`` non-empty lines this window has of ``role``'s output."""
        return self.output.last_lines(role, n)

    def _render(self) -> None:
        self.view.clear()
        self.assembler = LineAssembler()
        self.progress.setText("")
        if self.current is not None:
            self._show_lines(self.assembler.feed(self.output.text(self.current)))

    def _show_lines(self, lines: list[str]) -> None:
        minimum = self.level.currentIndex()
        if minimum:
            lines = [line for line in lines if line_level(line) >= minimum]
        if lines:
            bar = self.view.verticalScrollBar()
            keep = None if self.follow.isChecked() else bar.value()
            self.view.appendPlainText("\n".join(lines))
            if keep is None:
                bar.setValue(bar.maximum())
            else:
                bar.setValue(keep)
        partial = self.assembler.partial
        self.progress.setText(partial[-300:] if partial else "")

    # ------------------------------------------------------------------ search and follow

    def find_text(self, backward: bool = False) -> bool:
        """Select the next (or previous) match of the search text; wraps around."""
        needle = self.search.text()
        if not needle:
            return False
        flags = QtGui.QTextDocument.FindFlag.FindBackward if backward else QtGui.QTextDocument.FindFlag(0)
        found = self.view.find(needle, flags)
        if not found:
            cursor = self.view.textCursor()
            cursor.movePosition(
                QtGui.QTextCursor.MoveOperation.End if backward else QtGui.QTextCursor.MoveOperation.Start
            )
            self.view.setTextCursor(cursor)
            found = self.view.find(needle, flags)
        if found:
            self.follow.setChecked(False)  # stay on the match instead of jumping to the end
        count = self.view.toPlainText().lower().count(needle.lower())
        self.found_label.setText(f"{count} matches" if found else "not found")
        return found

    def _on_follow_toggled(self, on: bool) -> None:
        if on:
            bar = self.view.verticalScrollBar()
            bar.setValue(bar.maximum())

    def _on_scrolled(self, value: int) -> None:
        # Scrolling up stops following, scrolling back to the end resumes it, as in a terminal.
        at_end = value >= self.view.verticalScrollBar().maximum() - 2
        if self.follow.isChecked() != at_end and self.view.hasFocus():
            self.follow.setChecked(at_end)
