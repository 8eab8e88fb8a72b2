"""The banner above the roles table: a line per role in trouble (failed, crash-looping, stalled,
waiting on a peer), saying what is wrong and, for a role that died, a *Show log* button that
opens the Logs tab at its error.

Rebuilt only when the roles in it change; a countdown's new text only changes a label. Past
:data:`MAX_ROWS` roles, a last line counts the rest (64 crash-looping workers would push the
table off the screen).

Signals:
    sig_show_log(str): *Show log* was pressed on a role's line; the payload is the role.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6 import QtCore, QtWidgets

MAX_ROWS = 4
# Each kind of trouble in its own colours: failed red, crash-looping amber (as its tile), the
# rest (stalled, waiting) in the failed colours the banner always had.
STYLES = {
    "failed": "background: #fde2e2; color: #7f1d1d;",
    "crash-looping": "background: #fff1c7; color: #5c3d00;",
    "other": "background: #fde2e2; color: #7f1d1d;",
}


@dataclass(frozen=True)
class BannerLine:
    """One role's line: its rich text, its kind (a key of :data:`STYLES`), and whether it has a
    *Show log* button."""

    role: str
    html: str
    kind: str = "other"
    show_log: bool = False


class TroubleBanner(QtWidgets.QFrame):
    """See the module docstring. :meth:`text` gives every line's rich text (for tests and readers)."""

    sig_show_log = QtCore.Signal(str)

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self._layout = QtWidgets.QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(1)
        self._lines: list[BannerLine] = []
        self._labels: list[QtWidgets.QLabel] = []
        self.buttons: dict[str, QtWidgets.QPushButton] = {}  # role -> its Show log button
        self.more = QtWidgets.QLabel(self)
        self.more.hide()
        self._layout.addWidget(self.more)
        self.hide()

    def set_lines(self, lines: list[BannerLine]) -> None:
        """Show ``lines`` (the first :data:`MAX_ROWS`, and a count of the rest); hide when none."""
        shown, rest = lines[:MAX_ROWS], lines[MAX_ROWS:]
        if [(b.role, b.kind, b.show_log) for b in shown] != [(b.role, b.kind, b.show_log) for b in self._lines]:
            self._rebuild(shown)
        else:
            for label, old, new in zip(self._labels, self._lines, shown, strict=True):
                if old.html != new.html:
                    label.setText(new.html)
        self._lines = shown
        more = f"… and {len(rest)} more roles in trouble: filter the table by their state" if rest else ""
        if self.more.text() != more:
            self.more.setText(more)
        self.more.setVisible(bool(rest))
        self.setVisible(bool(shown))

    def _rebuild(self, lines: list[BannerLine]) -> None:
        while (item := self._layout.takeAt(0)) is not None:
            widget = item.widget()
            if widget is not None and widget is not self.more:
                # Hidden now: deleteLater waits for the event loop, and until then the old line
                # would still be drawn (over the new one) as if the role's trouble had not changed.
                widget.hide()
                widget.deleteLater()
        self._labels, self.buttons = [], {}
        for line in lines:
            row = QtWidgets.QFrame()
            row.setObjectName("banner-line")
            row.setStyleSheet(f"QFrame#banner-line {{ {STYLES[line.kind]} }} QLabel {{ {STYLES[line.kind]} }}")
            box = QtWidgets.QHBoxLayout(row)
            box.setContentsMargins(6, 4, 6, 4)
            label = QtWidgets.QLabel(line.html)
            label.setWordWrap(True)
            label.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
            box.addWidget(label, 1)
            if line.show_log:
                button = QtWidgets.QPushButton("Show log")
                button.setToolTip(f"Open the Logs tab at {line.role}'s last error")
                button.clicked.connect(lambda _checked=False, role=line.role: self.sig_show_log.emit(role))
                box.addWidget(button, 0, QtCore.Qt.AlignmentFlag.AlignTop)
                self.buttons[line.role] = button
            self._labels.append(label)
            self._layout.addWidget(row)
            row.show()  # at once: a layout shows a new child of a shown widget only on a later event
        self._layout.addWidget(self.more)

    def shown_text(self) -> list[str]:
        """The text of each line as drawn now (the visible labels'), for tests and readers."""
        return [label.text() for label in self.findChildren(QtWidgets.QLabel) if label.isVisibleTo(self)]

    def text(self) -> str:
        """Every line's rich text, one per line (the count of the rest last)."""
        texts = [line.html for line in self._lines]
        if self.more.isVisibleTo(self):
            texts.append(self.more.text())
        return "<br>".join(texts)
