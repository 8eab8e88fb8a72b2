"""Small pieces of the cluster editor: text <-> value conversions, problem markers, the env table.

The editor never invents its own validation messages for what ``core.cluster.spec`` checks: a form value
is handed to :func:`core.cluster.spec.parse_data` as the user typed it, so the user reads the very words
``python main.py validate`` prints. Only text that has no TOML form at all (``0, x`` as GPUs, an
env entry without ``=``) gets a message here, in the same shape (field path, message, fix).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from typing import Any

from PySide6 import QtCore, QtGui, QtWidgets

from core.cluster.problems import ERROR, Problem

ERROR_FILL = QtGui.QColor("#fde2e2")
WARNING_FILL = QtGui.QColor("#fff3cd")
ERROR_INK = "#b3261e"
WARNING_INK = "#8a5a00"

GPUS_HINT = "write GPU numbers separated by commas, e.g. 0, 1; 'none' hides every GPU; leave empty for the default"


def parse_gpus(text: str, field: str) -> tuple[list[int] | None, list[Problem]]:
    """GPU text as typed -> the TOML value (None: key left out) and any problem with the text."""
    text = text.strip()
    if not text:
        return None, []
    if text.lower() in ("none", "-", "[]"):
        return [], []
    out: list[int] = []
    for token in re.split(r"[,\s]+", text.strip("[]")):
        if not token:
            continue
        try:
            out.append(int(token))
        except ValueError:
            return None, [Problem(field, f"{token!r} is not a GPU index", GPUS_HINT)]
    return out, []


def format_gpus(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return "none" if not value else ", ".join(str(g) for g in value)
    return str(value)


def command_value(text: str) -> str | list[str] | None:
    """A command as typed -> a list of arguments; a string ``core.cluster.spec`` will refuse to split stays
    a string, so the user gets ``validate``'s own message about the quotes."""
    text = text.strip()
    if not text:
        return None
    try:
        return shlex.split(text)
    except ValueError:
        return text


# shlex.quote's safe characters, and the braces of TowerDeck's placeholders ({python}, {task_index}):
# the field is read back with shlex.split (no shell runs it), which gives braces no meaning.
_PLAIN_WORD = re.compile(r"[\w@%+=:,./{}-]+", re.ASCII)


def format_command(value: Any) -> str:
    """A command's arguments as a user types them: quoted only where a word needs it, so
    ``{python} -u train.py`` reads as written, not ``'{python}' -u train.py``."""
    if isinstance(value, list):
        return " ".join(_quote(str(v)) for v in value)
    return "" if value is None else str(value)


def _quote(word: str) -> str:
    return word if _PLAIN_WORD.fullmatch(word) else shlex.quote(word)


def parse_env_text(text: str, field: str) -> tuple[dict[str, str], list[Problem]]:
    """``A=1 B="two words"`` (a task's env in one table cell) -> a dict."""
    hint = 'write NAME=value pairs separated by spaces, e.g. OMP_NUM_THREADS=2 NAME="two words"'
    try:
        tokens = shlex.split(text)
    except ValueError as exc:
        return {}, [Problem(field, f"cannot split the environment: {exc}", hint)]
    out: dict[str, str] = {}
    for token in tokens:
        name, sep, value = token.partition("=")
        if not sep:
            return {}, [Problem(field, f"{token!r} has no '='", hint)]
        out[name] = value
    return out, []


def format_env_text(env: Any) -> str:
    if not isinstance(env, dict):
        return ""
    return " ".join(f"{k}={shlex.quote(str(v))}" for k, v in env.items())


def problem_tip(problems: list[Problem]) -> str:
    return "\n".join(f"{p.severity}: {p.message}" + (f"\nfix: {p.hint}" if p.hint else "") for p in problems)


def worst(problems: list[Problem]) -> str:
    return ERROR if any(p.severity == ERROR for p in problems) else "warning"


class Marker:
    """Marks one widget red (error) or amber (warning) with the problem in its tooltip.

    Remembers the widget's own tooltip so clearing the mark gives the help text back.
    """

    def __init__(self, widget: QtWidgets.QWidget) -> None:
        self.widget = widget
        self.help = widget.toolTip()
        if not widget.objectName():
            widget.setObjectName(f"field{id(widget)}")

    def set(self, problems: list[Problem]) -> None:
        w = self.widget
        if not problems:
            w.setStyleSheet("")
            w.setToolTip(self.help)
            w.setProperty("problem", "")
            return
        error = worst(problems) == ERROR
        fill = ERROR_FILL.name() if error else WARNING_FILL.name()
        ink = ERROR_INK if error else WARNING_INK
        # Selector by object name: the tint must not spill into child widgets (popups, cells).
        w.setStyleSheet(f"#{w.objectName()} {{ background-color: {fill}; border: 2px solid {ink}; }}")
        w.setToolTip(problem_tip(problems) + (f"\n\n{self.help}" if self.help else ""))
        w.setProperty("problem", problems[0].message)


def mark_item(item: QtWidgets.QTableWidgetItem | None, problems: list[Problem], help_text: str) -> None:
    if item is None:
        return
    if not problems:
        item.setData(QtCore.Qt.ItemDataRole.BackgroundRole, None)
        item.setToolTip(help_text)
        return
    item.setBackground(ERROR_FILL if worst(problems) == ERROR else WARNING_FILL)
    item.setToolTip(problem_tip(problems) + (f"\n\n{help_text}" if help_text else ""))


class EnvTable(QtWidgets.QWidget):
    """Environment variables as a two-column table with add/remove buttons."""

    sig_changed = QtCore.Signal()

    def __init__(self, what: str, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.table = QtWidgets.QTableWidget(0, 2)
        self.table.setHorizontalHeaderLabels(["Variable", "Value"])
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.horizontalHeader().resizeSection(0, 180)
        self.table.setToolTip(f"Environment variables for {what}. Values may use {{job_name}}, {{task_index}}, ...")
        self.table.setFixedHeight(78)  # a header and three rows: the job tab must fit an 800-pixel window
        self.table.itemChanged.connect(lambda _item: self.sig_changed.emit())
        self.add_button = QtWidgets.QPushButton("Add variable")
        self.remove_button = QtWidgets.QPushButton("Remove variable")
        self.add_button.clicked.connect(lambda: self.add_row())
        self.remove_button.clicked.connect(self._on_remove)
        buttons = QtWidgets.QHBoxLayout()
        buttons.addWidget(self.add_button)
        buttons.addWidget(self.remove_button)
        buttons.addStretch(1)
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        layout.addWidget(self.table)
        layout.addLayout(buttons)
        self.marker = Marker(self.table)

    def add_row(self, name: str = "", value: str = "") -> None:
        row = self.table.rowCount()
        self.table.blockSignals(True)
        self.table.insertRow(row)
        self.table.setItem(row, 0, QtWidgets.QTableWidgetItem(name))
        self.table.setItem(row, 1, QtWidgets.QTableWidgetItem(value))
        self.table.blockSignals(False)
        if not name:
            self.table.setCurrentCell(row, 0)
        self.sig_changed.emit()

    def _on_remove(self) -> None:
        rows = sorted({i.row() for i in self.table.selectedIndexes()} or {self.table.currentRow()}, reverse=True)
        for row in rows:
            if row >= 0:
                self.table.removeRow(row)
        self.sig_changed.emit()

    def set_env(self, env: Any) -> None:
        self.table.blockSignals(True)
        self.table.setRowCount(0)
        self.table.blockSignals(False)
        if isinstance(env, dict):
            for key, value in env.items():
                self.add_row(str(key), str(value))

    def env(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for row in range(self.table.rowCount()):
            name_item, value_item = self.table.item(row, 0), self.table.item(row, 1)
            name = name_item.text().strip() if name_item else ""
            value = value_item.text() if value_item else ""
            if name or value:
                out[name] = value
        return out

    def mark(self, problems: list[Problem]) -> None:
        self.marker.set(problems)


class FileNumber:
    """A spin box that never changes a file's number behind the user's back.

    A value the spin box can show exactly is shown; any other (``"five"``, ``true``, ``-1``,
    ``0.25`` at one decimal, ``1e9`` past its range) is kept as written and shown as such, so the
    form hands it to ``core.cluster.spec`` unchanged and the field turns red with ``validate``'s
    own message (a spin box would have clamped it or fallen back to the default, and the user
    would launch with a number nobody chose). The first edit of the field replaces it.
    """

    def __init__(self, spin: QtWidgets.QSpinBox | QtWidgets.QDoubleSpinBox, on_edit: Callable[[], None]) -> None:
        self.spin = spin
        self._on_edit = on_edit
        self._held: tuple[Any] | None = None  # a 1-tuple: the value kept as written
        spin.lineEdit().textEdited.connect(lambda _text: self._release())
        spin.valueChanged.connect(lambda _value: self._release())
        # The kept text goes once the edit is over: changing it while the user types would
        # reformat the line under their cursor.
        spin.editingFinished.connect(self._forget_text)

    def set(self, value: Any, default: float) -> None:
        """Show ``value`` (None: the key is absent, so ``default``) without emitting a change."""
        self.spin.blockSignals(True)
        try:
            if value is None:
                self._show(default)
            elif self._exact(value):
                self._show(value)
            else:
                self._held = (value,)
                self.spin.setSpecialValueText(_as_written(value))
                self._set_spin(self.spin.minimum())  # the special text shows at the minimum
        finally:
            self.spin.blockSignals(False)

    def value(self) -> Any:
        """The number shown, or the value kept as the file wrote it."""
        return self._held[0] if self._held is not None else self.spin.value()

    @property
    def holds_file_value(self) -> bool:
        return self._held is not None

    def _show(self, value: float) -> None:
        self._held = None
        self.spin.setSpecialValueText("")
        self._set_spin(value)

    def _set_spin(self, value: float) -> None:
        if isinstance(self.spin, QtWidgets.QSpinBox):
            self.spin.setValue(int(value))
        else:
            self.spin.setValue(float(value))

    def _exact(self, value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if isinstance(self.spin, QtWidgets.QSpinBox) and not isinstance(value, int):
            return False
        if not (self.spin.minimum() <= value <= self.spin.maximum()):  # also false for nan
            return False
        decimals = self.spin.decimals() if isinstance(self.spin, QtWidgets.QDoubleSpinBox) else 0
        return round(value, decimals) == value

    def _release(self) -> None:
        if self._held is None:
            return
        self._held = None
        self._on_edit()

    def _forget_text(self) -> None:
        if self._held is None and self.spin.specialValueText():
            self.spin.setSpecialValueText("")


def _as_written(value: Any) -> str:
    """A TOML value as a user wrote it in the file: strings quoted, true/false, lists and tables."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(value, ensure_ascii=False, default=str)
