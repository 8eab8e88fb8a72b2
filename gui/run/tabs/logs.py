"""Logs panel: a role's live output with search, a follow toggle, a level filter, and a way to the
last error.

Carriage-return progress bars (Keras, tqdm) are shown the way a terminal shows them: only the last
state of a line is kept, and a line still being redrawn is shown below the log until it ends. The
view keeps ``LOG_BLOCKS`` lines; the run directory keeps every byte. What the window keeps of
each role's output, the line assembly, the levels and the attempts' dividers are
:mod:`core.views.logs` (Qt-free); the panel owns a :class:`~core.views.logs.RoleOutput` and shows it.

Lines wrap by default, so a traceback reads from the left whatever long line came before it
(without wrapping the view stays at the left while it follows). Errors (a traceback's every line)
are red and warnings amber, by the same rules as the level filter; each attempt begins under a
divider. *Go to last error* (and the window's Ctrl+Shift+E) puts the last error line under the cursor,
its traceback in view.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6 import QtCore, QtGui, QtWidgets

from core.run.events import RoleStateChanged
from core.run.status import RoleStatus
from core.views.empty import log_placeholder
from core.views.logs import DIVIDER, ERROR, LEVELS, WARNING, AttemptLog, LogStream, RoleOutput, ShownLine

LOG_BLOCKS = 5000
ERROR_COLOUR = "#c62828"  # the failed state's red
WARNING_COLOUR = "#a15c00"  # amber, dark enough to read on white
DIVIDER_COLOUR, DIVIDER_BACKGROUND = "#263238", "#dfe6ee"


def _formats() -> dict[int, QtGui.QTextCharFormat]:
    formats = {}
    for kind, colour in ((ERROR, ERROR_COLOUR), (WARNING, WARNING_COLOUR), (DIVIDER, DIVIDER_COLOUR)):
        fmt = QtGui.QTextCharFormat()
        fmt.setForeground(QtGui.QColor(colour))
        if kind == DIVIDER:
            fmt.setBackground(QtGui.QColor(DIVIDER_BACKGROUND))
            fmt.setFontWeight(QtGui.QFont.Weight.Bold)
        formats[kind] = fmt
    return formats


class LogPanel(QtWidgets.QWidget):
    """The output of one role, chosen in the roles table or the role box."""

    sig_role_changed = QtCore.Signal(str)
    """The user picked another role in the box; payload: the role id."""

    def __init__(self) -> None:
        super().__init__()
        self.output = RoleOutput()
        self.attempts = AttemptLog()  # when each attempt started and how it ended: the dividers
        self.current: str | None = None
        self.stream = LogStream("", self.attempts)  # the shown role's lines, as they are appended
        self._statuses: dict[str, RoleStatus] = {}
        self._formats = _formats()
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
        self.last_error = QtWidgets.QPushButton("Go to last error")
        self.last_error.setToolTip("Put the cursor on the last error line, its traceback in view (Ctrl+Shift+E)")
        self.last_error.clicked.connect(lambda _checked=False: self.go_to_last_error())
        self.wrap = QtWidgets.QCheckBox("Wrap")
        self.wrap.setChecked(True)
        self.wrap.setToolTip("Wrap long lines, so every line reads from its start")
        self.wrap.toggled.connect(lambda on: self._on_wrap_toggled(on=on))
        self.follow = QtWidgets.QCheckBox("Follow")
        self.follow.setChecked(True)
        self.follow.setToolTip("Keep the newest output in view")
        self.follow.toggled.connect(lambda on: self._on_follow_toggled(on=on))
        self.found_label = QtWidgets.QLabel("")
        self.view = QtWidgets.QPlainTextEdit()
        self.view.setReadOnly(True)
        self.view.setUndoRedoEnabled(False)
        self.view.setMaximumBlockCount(LOG_BLOCKS)
        self.view.setLineWrapMode(QtWidgets.QPlainTextEdit.LineWrapMode.WidgetWidth)
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
        bar.addWidget(self.last_error)
        bar.addWidget(self.wrap)
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

    def set_status(self, roles: tuple[RoleStatus, ...], now: float) -> None:
        """The roles' latest status: what the view says while the shown role has printed nothing."""
        self._statuses = {r.role: r for r in roles}
        self._show_placeholder(now)

    def note_role_state(self, role: str, t: float, change: RoleStateChanged) -> None:
        """A role's state event: when its attempts start and how they end (the dividers say it)."""
        self.attempts.note(
            role, t, state=change.state, attempt=change.attempt, returncode=change.returncode, signal=change.signal
        )

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
        self.attempts.clear()
        self._statuses = {}
        self._render()

    # ------------------------------------------------------------------ text

    def add_output(self, role: str, text: str, attempt: int | None = None) -> None:
        """Keep ``text`` (printed by ``attempt``) for ``role`` (bounded) and show it if that role
        is on screen."""
        self.output.add(role, text, attempt)
        if role == self.current:
            self._show_lines(self.stream.feed(text, attempt))

    def last_lines(self, role: str, n: int) -> list[str]:
        """The last ``n`` non-empty lines this window has of ``role``'s output."""
        return self.output.last_lines(role, n)

    def _render(self) -> None:
        self.view.clear()
        self.stream = LogStream(self.current or "", self.attempts, self.level.currentIndex())
        self.progress.setText("")
        if self.current is not None:
            lines: list[ShownLine] = []
            for attempt, text in self.output.pieces(self.current):
                lines += self.stream.feed(text, attempt)
            self._show_lines(lines[-LOG_BLOCKS:])
        self._show_placeholder()

    def _show_lines(self, lines: list[ShownLine]) -> None:
        if lines:
            bar = self.view.verticalScrollBar()
            keep = None if self.follow.isChecked() else bar.value()
            self.view.appendPlainText("\n".join(line.text for line in lines))
            self._colour(lines)
            if keep is None:
                bar.setValue(bar.maximum())
                self.view.horizontalScrollBar().setValue(0)  # unwrapped, the view follows down, never sideways
            else:
                bar.setValue(keep)
        partial = self.stream.partial
        self.progress.setText(partial[-300:] if partial else "")

    def _colour(self, lines: list[ShownLine]) -> None:
        """Colour the blocks just appended (the last ``len(lines)``; fewer if the view dropped some)
        and mark each with its kind, which *Last error* looks for. Only coloured lines cost a call."""
        block = self.view.document().lastBlock()
        for line in reversed(lines):
            if not block.isValid():
                break
            if line.kind:
                block.setUserState(line.kind)
                cursor = QtGui.QTextCursor(block)
                cursor.movePosition(QtGui.QTextCursor.MoveOperation.EndOfBlock, QtGui.QTextCursor.MoveMode.KeepAnchor)
                cursor.setCharFormat(self._formats[line.kind])
            block = block.previous()

    def _show_placeholder(self, now: float | None = None) -> None:
        status = self._statuses.get(self.current) if self.current else None
        text = log_placeholder(self.current, status, now)
        if self.view.placeholderText() != text:
            self.view.setPlaceholderText(text)

    # ------------------------------------------------------------------ errors

    def go_to_last_error(self, error: str = "") -> bool:
        """Put the cursor on the last error line shown (the last line holding ``error``, the text
        a role's status gives for why it failed, if any), with its traceback in view from its first
        line when it fits; stop following so it stays there. False when no line is an error."""
        found = self._last_block(lambda b: bool(error) and error.rstrip("…") in b.text())
        if not found.isValid():
            found = self._last_block(lambda b: b.userState() == ERROR)
        if not found.isValid():
            self.found_label.setText("no error line shown")
            return False
        first = found
        while first.previous().isValid() and first.previous().userState() == ERROR:
            first = first.previous()
        self.follow.setChecked(False)
        bar = self.view.verticalScrollBar()
        bar.setValue(bar.maximum())
        # From the bottom, a cursor moved up is put at the view's top edge: the traceback's first
        # line, then its error line, which scrolls on only if the traceback is taller than the view.
        self.view.setTextCursor(QtGui.QTextCursor(first))
        self.view.ensureCursorVisible()
        cursor = QtGui.QTextCursor(found)
        cursor.movePosition(QtGui.QTextCursor.MoveOperation.EndOfBlock, QtGui.QTextCursor.MoveMode.KeepAnchor)
        # The error may be the last line: output appended after it must not grow the selection.
        cursor.setKeepPositionOnInsert(True)
        self.view.setTextCursor(cursor)
        self.view.ensureCursorVisible()
        self.view.horizontalScrollBar().setValue(0)
        self.found_label.setText(f"error at line {found.blockNumber() + 1}")
        return True

    def _last_block(self, matches: Callable[[QtGui.QTextBlock], bool]) -> QtGui.QTextBlock:
        block = self.view.document().lastBlock()
        while block.isValid() and not matches(block):
            block = block.previous()
        return block

    # ------------------------------------------------------------------ search and follow

    def find_text(self, *, backward: bool = False) -> bool:
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

    def _on_wrap_toggled(self, *, on: bool) -> None:
        mode = QtWidgets.QPlainTextEdit.LineWrapMode
        self.view.setLineWrapMode(mode.WidgetWidth if on else mode.NoWrap)

    def _on_follow_toggled(self, *, on: bool) -> None:
        if on:
            bar = self.view.verticalScrollBar()
            bar.setValue(bar.maximum())

    def _on_scrolled(self, value: int) -> None:
        # Scrolling up stops following, scrolling back to the end resumes it, as in a terminal.
        at_end = value >= self.view.verticalScrollBar().maximum() - 2
        if self.follow.isChecked() != at_end and self.view.hasFocus():
            self.follow.setChecked(at_end)
