"""The Profile tab: a run's stored profile captures, and for the chosen one its roles side by side.

The list is the run's ``RUN/profiles/<time>`` folders (:func:`core.profiling.capture.list_captures`).
A capture's summary comes from xprof in the profiler environment (seconds, in a subprocess): it is
computed off the GUI thread under a hard time limit and kept per capture folder, so choosing a
capture again shows it at once. The table has one column per role: steps, mean and median step
time, where a step's time went, and the top op types, the rows the CLI prints too
(:func:`core.profiling.summary.table_rows`); a cell that stands out (2x or more) is bold on amber,
with the ratio in its tooltip. Each role's bottleneck sentence is under the table. A capture made by
*Why is this worker slow?* shows its verdict and the evidence above the table, also when it is
reopened later (the verdict is kept with the capture: ``why.json``, :mod:`core.profiling.why_record`).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from PySide6 import QtCore, QtGui, QtWidgets

from core.profiling.capture import list_captures
from core.profiling.env import ProfileError
from core.profiling.files import read_record
from core.profiling.summary import RoleProfile, summarize, table_rows
from core.profiling.why import Verdict, with_input_ops
from core.profiling.why_record import load_why
from gui.offthread import Relay, run_off_thread

SUMMARY_TIMEOUT_S = 120.0  # xprof reads a 5 MB profile in under a second; past this it is stuck
DIFFERENCE_COLOUR = "#fde68a"
VERDICT_STYLE = "QLabel { background: #fff7e0; border: 1px solid #e0c070; padding: 6px; }"
SECTION_COLOUR = "#eef2f7"


@dataclass(frozen=True)
class CaptureSummary:
    """What the tab shows of one capture: each captured role's profile, and the roles that were
    asked for but not captured, with why."""

    folder: Path
    profiles: tuple[RoleProfile, ...]
    failures: tuple[tuple[str, str], ...] = ()
    verdict: Verdict | None = None  # why the first role is slower than the second
    why_problem: str | None = None  # the capture's why.json is there but unreadable


def summarize_capture(folder: Path) -> CaptureSummary:
    """The summary of one stored capture (runs xprof: call it off the GUI thread), with the
    verdict kept beside it when *Why* made it (the straggler's column first)."""
    xplanes, failures = read_record(folder)
    profiles = summarize(xplanes, timeout_s=SUMMARY_TIMEOUT_S) if xplanes else []
    try:
        why = load_why(folder)
    except ProfileError as exc:
        return CaptureSummary(folder, tuple(profiles), tuple(failures), why_problem=str(exc))
    if why is None:
        return CaptureSummary(folder, tuple(profiles), tuple(failures))
    # As when the verdict was given: input counted as the rules count it, the straggler first.
    profiles = sorted((with_input_ops(p) for p in profiles), key=lambda p: p.role != why.straggler)
    return CaptureSummary(folder, tuple(profiles), tuple(failures), why.verdict)


def marked_differences(profiles: Sequence[RoleProfile]) -> dict[str, tuple[str, str]]:
    """The rows that have a role standing out: row label -> (that role, the words)."""
    return {r.label: (r.stands_out, r.mark) for r in table_rows(profiles) if r.stands_out is not None}


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


class ProfilePanel(QtWidgets.QWidget):
    """The run's captures on the left; the chosen capture's roles side by side on the right."""

    def __init__(self) -> None:
        super().__init__()
        self.relay = Relay(self)
        self.run_path: Path | None = None
        self.cache: dict[Path, CaptureSummary] = {}
        self.shown: CaptureSummary | None = None
        self._pending: set[Path] = set()
        self._listing = False
        self._relist = False
        self._wanted: Path | None = None  # the capture to show once the list has it

        self.captures = QtWidgets.QListWidget()
        self.captures.setMaximumWidth(170)
        self.captures.currentItemChanged.connect(lambda item, _old: self._on_chosen(item))
        self.message = QtWidgets.QLabel("no profile yet: select roles and use Role > Profile")
        self.message.setWordWrap(True)
        self.verdict = QtWidgets.QLabel("")
        self.verdict.setWordWrap(True)
        self.verdict.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        self.verdict.setStyleSheet(VERDICT_STYLE)
        self.verdict.hide()
        self.table = QtWidgets.QTableWidget()
        self.table.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 6)  # a compact table
        self.table.setAlternatingRowColors(False)
        self.bottlenecks = QtWidgets.QLabel("")
        self.bottlenecks.setWordWrap(True)
        self.bottlenecks.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        self.bottlenecks.setAlignment(QtCore.Qt.AlignmentFlag.AlignTop)

        right = QtWidgets.QVBoxLayout()
        right.addWidget(self.message)
        right.addWidget(self.verdict)
        right.addWidget(self.table, 1)
        right.addWidget(self.bottlenecks)
        layout = QtWidgets.QHBoxLayout(self)
        layout.addWidget(self.captures)
        layout.addLayout(right, 1)

    # ------------------------------------------------------------------ the run's captures

    def set_run(self, path: Path | None, show: Path | None = None) -> None:
        """Follow ``path``'s captures (re-read off the GUI thread); then show ``show``, or the latest."""
        if path != self.run_path:
            self.run_path = path
            self._wanted = None
            self.captures.clear()
            self._clear("no profile yet: select roles and use Role > Profile")
        if show is not None:
            self._wanted = show
        if path is None:
            return
        if self._listing:
            self._relist = True  # a capture may have been added since that listing began
            return
        self._listing, self._relist = True, False
        run_off_thread(
            self.relay,
            lambda: list_captures(path),
            lambda found, error: self._on_listed(path, found, error),
            name="profile-list",
        )

    def _on_listed(self, path: Path, found: object, error: BaseException | None) -> None:
        self._listing = False
        if path != self.run_path or self._relist:
            self.set_run(self.run_path)
            return
        if error is not None or not isinstance(found, list):
            self.message.setText(f"could not list the captures of {path}: {error}")
            return
        names = [self.captures.item(i).data(QtCore.Qt.ItemDataRole.UserRole) for i in range(self.captures.count())]
        for folder in found:
            if folder not in names:
                item = QtWidgets.QListWidgetItem(folder.name)
                item.setData(QtCore.Qt.ItemDataRole.UserRole, folder)
                self.captures.addItem(item)
        wanted = self._wanted
        self._wanted = None
        if wanted is not None:
            self.choose(wanted)
        elif self.captures.currentRow() < 0 and self.captures.count():
            self.captures.setCurrentRow(self.captures.count() - 1)

    def choose(self, folder: Path) -> None:
        """Select ``folder`` in the list (its summary follows)."""
        for i in range(self.captures.count()):
            if self.captures.item(i).data(QtCore.Qt.ItemDataRole.UserRole) == folder:
                self.captures.setCurrentRow(i)
                return

    def _on_chosen(self, item: QtWidgets.QListWidgetItem | None) -> None:
        if item is None:
            return
        folder = item.data(QtCore.Qt.ItemDataRole.UserRole)
        if folder in self.cache:
            self.show_summary(self.cache[folder])
            return
        self._clear(f"reading the profile {folder.name} (xprof, in the profiler environment)...")
        if folder in self._pending:
            return
        self._pending.add(folder)
        run_off_thread(
            self.relay,
            lambda: summarize_capture(folder),
            lambda done, error: self._on_summary(folder, done, error),
            name="profile-summary",
        )

    def _on_summary(self, folder: Path, done: object, error: BaseException | None) -> None:
        self._pending.discard(folder)
        current = self.captures.currentItem()
        is_current = current is not None and current.data(QtCore.Qt.ItemDataRole.UserRole) == folder
        if error is not None or not isinstance(done, CaptureSummary):
            if is_current:
                self._clear(f"profile {folder.name}: {error}")
            return
        self.cache[folder] = done
        if is_current:
            self.show_summary(done)

    # ------------------------------------------------------------------ the side-by-side table

    def _clear(self, message: str) -> None:
        self.shown = None
        self.message.setText(message)
        self.table.clear()
        self.table.setRowCount(0)
        self.table.setColumnCount(0)
        self.bottlenecks.setText("")
        self.verdict.setText("")
        self.verdict.hide()

    def show_summary(self, summary: CaptureSummary) -> None:
        """One capture's roles side by side, the differences highlighted, then each bottleneck."""
        self.shown = summary
        profiles = summary.profiles
        failed = "; ".join(f"{why}" for _role, why in summary.failures)
        head = f"profile {summary.folder.name}: " + ", ".join(p.role for p in profiles) if profiles else ""
        notes = (head, f"not captured: {failed}" if failed else "", summary.why_problem or "")
        self.message.setText(" | ".join(t for t in notes if t))
        self._show_verdict(summary)
        self._fill_table(profiles)
        lines = [
            f"<b>{html.escape(p.role)}</b>: {html.escape(p.bottleneck or 'xprof named no bottleneck')}"
            for p in profiles
        ]
        lines += [f"<b>{html.escape(p.role)}</b>: could not read {html.escape(e)}" for p in profiles for e in p.errors]
        self.bottlenecks.setText("<br>".join(lines))

    def _show_verdict(self, summary: CaptureSummary) -> None:
        verdict = summary.verdict
        if verdict is None or not summary.profiles:
            self.verdict.setText("")
            self.verdict.hide()
            return
        evidence = "".join(f"<br>&nbsp;&nbsp;{html.escape(line)}" for line in verdict.evidence)
        question = f"Why is {html.escape(summary.profiles[0].role)} slow?"
        self.verdict.setText(f"<b>{question} {html.escape(verdict.sentence)}</b><small>{evidence}</small>")
        self.verdict.show()

    def verdict_text(self) -> str:
        """The shown verdict and its evidence as plain lines ('' when none is shown)."""
        shown = self.shown
        if shown is None or shown.verdict is None or self.verdict.isHidden():
            return ""
        return "\n".join([f"Why is {shown.profiles[0].role} slow? {shown.verdict.sentence}", *shown.verdict.evidence])

    def _fill_table(self, profiles: Sequence[RoleProfile]) -> None:
        rows = table_rows(profiles)
        columns = [p.role for p in profiles]
        self.table.clear()
        self.table.setColumnCount(1 + len(columns))
        self.table.setHorizontalHeaderLabels(["", *columns])
        self.table.setRowCount(1 + len(rows))
        self._set(0, 0, "steps captured")
        for c, p in enumerate(profiles, start=1):
            self._set(0, c, str(p.steps), right=True)
        for r, row in enumerate(rows, start=1):
            if row.values is None:
                self._section(r, row.label)
                continue
            self._set(r, 0, f"  {row.label}" if r > 2 else row.label)  # the breakdown and the ops under their heading
            for c, (role, value) in enumerate(zip(columns, row.values, strict=True), start=1):
                item = self._set(r, c, _ms(value), right=True)
                if row.stands_out == role:
                    self._highlight(item, row.mark)
        self.table.resizeColumnsToContents()
        self.table.horizontalHeader().setStretchLastSection(False)

    def _set(self, row: int, column: int, text: str, right: bool = False) -> QtWidgets.QTableWidgetItem:
        item = QtWidgets.QTableWidgetItem(text)
        if right:
            item.setTextAlignment(QtCore.Qt.AlignmentFlag.AlignRight | QtCore.Qt.AlignmentFlag.AlignVCenter)
        self.table.setItem(row, column, item)
        return item

    def _section(self, row: int, label: str) -> None:
        item = self._set(row, 0, label)
        font = item.font()
        font.setItalic(True)
        item.setFont(font)
        for c in range(self.table.columnCount()):
            cell = self.table.item(row, c) or self._set(row, c, "")
            cell.setBackground(QtGui.QColor(SECTION_COLOUR))

    @staticmethod
    def _highlight(item: QtWidgets.QTableWidgetItem, mark: str) -> None:
        font = item.font()
        font.setBold(True)
        item.setFont(font)
        item.setBackground(QtGui.QColor(DIFFERENCE_COLOUR))
        item.setToolTip(mark)

    def highlighted(self) -> list[tuple[str, str]]:
        """(row label, role) of each highlighted cell: what a test or a reader checks."""
        found = []
        for r in range(self.table.rowCount()):
            for c in range(1, self.table.columnCount()):
                item = self.table.item(r, c)
                if item is not None and item.font().bold():
                    label = self.table.item(r, 0)
                    header = self.table.horizontalHeaderItem(c)
                    found.append((label.text().strip() if label else "", header.text() if header else ""))
        return found

    def cell(self, label: str, role: str) -> str:
        """The shown value of ``label``'s row for ``role`` ('' when there is none)."""
        headers = (self.table.horizontalHeaderItem(c) for c in range(self.table.columnCount()))
        columns = [h.text() if h is not None else "" for h in headers]
        for r in range(self.table.rowCount()):
            item = self.table.item(r, 0)
            if item is not None and item.text().strip() == label and role in columns:
                value = self.table.item(r, columns.index(role))
                return value.text() if value else ""
        return ""
