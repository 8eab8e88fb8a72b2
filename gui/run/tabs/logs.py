"""Logs panel: a role's live output with search, a follow toggle and a level filter.

Carriage-return progress bars (Keras, tqdm) are shown the way a terminal shows them: only the last
state of a line is kept, and a line still being redrawn is shown below the log until it ends. The
view keeps ``LOG_BLOCKS`` lines; the run directory keeps every byte.
"""

from __future__ import annotations

import collections
import re

from PySide6 import QtCore, QtGui, QtWidgets

LOG_BLOCKS = 5000
# What the window keeps of each role's output, to show when the view switches to that role (the
# run directory keeps every byte): all roles together at most LOG_TEXT_BUDGET characters, each
# between ROLE_TEXT_MIN and ROLE_TEXT_CHARS. Eight roles keep 512 KiB each; 65 keep 64 KiB each
# (about a thousand lines, a terminal's scrollback), 4 MiB in all instead of 33 (issue 25: the
# text was most of the window's growth over a day at 64 workers).
ROLE_TEXT_CHARS = 512 * 1024
ROLE_TEXT_MIN = 64 * 1024
LOG_TEXT_BUDGET = 4 * 1024 * 1024
PARTIAL_LINE_CHARS = 4096  # an unterminated line longer than this is shown as it is

LEVELS = ("All lines", "Warnings and errors", "Errors only")
_ERROR = re.compile(r"^[EF]\d{4} |\b(ERROR|FATAL|CRITICAL|Traceback)\b|^[\w.]*(Error|Exception)(:|$)|\[towerdeck\]")
_WARNING = re.compile(r"^W\d{4} |\bWARNING\b|\bWarning\b")


def line_level(line: str) -> int:
    """0 for an ordinary line, 1 for a warning, 2 for an error (absl prefixes, logging, tracebacks)."""
    if _ERROR.search(line):
        return 2
    if _WARNING.search(line):
        return 1
    return 0


class LineAssembler:
    """Turns a stream of output chunks into complete display lines, as a terminal would.

    ``\\r`` returns to the start of the line, so of ``10%\\r20%\\r30%\\n`` only ``30%`` stays; a
    chunk may end in the middle of a line, which is kept as :attr:`partial` until its end arrives.
    """

    def __init__(self) -> None:
        self.partial = ""

    def feed(self, text: str) -> list[str]:
        text = self.partial + text
        lines = text.split("\n")
        self.partial = lines.pop()
        if len(self.partial) > PARTIAL_LINE_CHARS and "\r" not in self.partial[-PARTIAL_LINE_CHARS:]:
            lines.append(self.partial)  # a line without an end (binary, or a huge blob): show it
            self.partial = ""
        self.partial = _last_state(self.partial) if "\r" in self.partial else self.partial
        return [_last_state(line) for line in lines]


def _last_state(line: str) -> str:
    line = line.rstrip("\r")
    return line.rsplit("\r", 1)[-1]


class LogPanel(QtWidgets.QWidget):
    """The output of one role, chosen in the roles table or the role box."""

    sig_role_changed = QtCore.Signal(str)
    """The user picked another role in the box; payload: the role id."""

    def __init__(self) -> None:
        super().__init__()
        self.role_text: dict[str, collections.deque[str]] = {}
        self.role_chars: dict[str, int] = {}
        self.role_cap = ROLE_TEXT_CHARS  # characters kept per role, from the number of roles
        self.assembler = LineAssembler()
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
        self.role_cap = max(ROLE_TEXT_MIN, min(ROLE_TEXT_CHARS, LOG_TEXT_BUDGET // max(1, len(roles))))
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
        self.role_text.clear()
        self.role_chars.clear()
        self._render()

    # ------------------------------------------------------------------ text

    def add_output(self, role: str, text: str) -> None:
        """Keep ``text`` for ``role`` (bounded) and show it if that role is on screen."""
        buffer = self.role_text.setdefault(role, collections.deque())
        buffer.append(text)
        chars = self.role_chars.get(role, 0) + len(text)
        while chars > self.role_cap and len(buffer) > 1:
            chars -= len(buffer.popleft())
        self.role_chars[role] = chars
        if role == self.current:
            self._show_lines(self.assembler.feed(text))

    def last_lines(self, role: str, n: int) -> list[str]:
        """The last ``n`` non-empty lines this window has of ``role``'s output."""
        buffer = self.role_text.get(role)
        if not buffer:
            return []
        tail = "".join(list(buffer)[-4:])[-8192:]
        return [line for line in LineAssembler().feed(tail + "\n") if line.strip()][-n:]

    def _render(self) -> None:
        self.view.clear()
        self.assembler = LineAssembler()
        self.progress.setText("")
        if self.current is not None:
            self._show_lines(self.assembler.feed("".join(self.role_text.get(self.current, ()))))

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
