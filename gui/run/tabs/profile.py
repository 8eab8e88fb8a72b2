"""The Profile tab: a run's stored profile captures, and for the chosen one its roles side by side.

The list is the run's ``RUN/profiles/<time>`` folders (:func:`core.profiling.capture.list_captures`),
each named by when it was taken, why (*profile* or *why*, from the window or the CLI), the trace's
length and the roles captured (read from its ``profile.json`` off the GUI thread). A capture's
figures are its one breakdown (:func:`core.profiling.breakdown.capture_breakdown`: kept with the
capture, else computed by xprof in the profiler environment, seconds, off the GUI thread under a
hard time limit), the same figures ``profile-summary`` and ``ctl RUN why`` print; they are kept
per capture folder, so choosing a capture again shows it at once. The table has one column per
role: steps, mean and median step time, where a step's time went, and the top op types (their self
time summed over threads, which can exceed the step), the rows the CLI prints too
(:func:`core.profiling.summary.table_rows`); a cell that stands out (2x or more) is bold on amber,
with the ratio in its tooltip. Under the table, what the CLI prints under its own
(:func:`core.profiling.summary.profile_notes`): whose input is tf.data's op time, where most of
each role's step went, and xprof's advice, as xprof's, where the breakdown agrees with it. A capture made by *Why is this worker slow?* shows its
verdict and the evidence above the table, also when it is reopened later (the verdict is kept
with the capture: ``why.json``, :mod:`core.profiling.why_record`). *Open in TensorBoard* asks for
the chosen capture in TensorBoard's Profile tab (``sig_open_tensorboard``: the window's profile
action serves it, :func:`core.profiling.tensorboard.start_capture`).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from PySide6 import QtCore, QtGui, QtWidgets

from core.profiling.breakdown import SUMMARY_TIMEOUT_S, capture_breakdown
from core.profiling.capture import list_captures
from core.profiling.env import ProfileError
from core.profiling.files import CaptureRecord, read_record
from core.profiling.summary import OPS_HEADING, OPS_NOTE, RoleProfile, profile_notes, table_rows
from core.profiling.why import Verdict
from core.profiling.why_record import load_why
from gui.offthread import Relay, run_off_thread

__all__ = ["SUMMARY_TIMEOUT_S", "CaptureEntry", "CaptureSummary", "ProfilePanel", "list_entries", "summarize_capture"]
LIST_WIDTH = 240
DIFFERENCE_COLOUR = "#fde68a"
VERDICT_STYLE = "QLabel { background: #fff7e0; border: 1px solid #e0c070; padding: 6px; }"
SECTION_COLOUR = "#eef2f7"


@dataclass(frozen=True)
class CaptureSummary:
    """What the tab shows of one capture: each captured role's profile (the capture's breakdown),
    and the roles that were asked for but not captured, with why."""

    folder: Path
    profiles: tuple[RoleProfile, ...]
    failures: tuple[tuple[str, str], ...] = ()
    verdict: Verdict | None = None  # why the first role is slower than the second
    why_problem: str | None = None  # the capture's why.json is there but unreadable
    record: CaptureRecord | None = None  # what was asked: why, from where, how long
    problem: str | None = None  # the breakdown could not be kept with the capture


def summarize_capture(folder: Path) -> CaptureSummary:
    """The summary of one stored capture (may run xprof: call it off the GUI thread), with the
    verdict kept beside it when *Why* made it (the straggler's column first)."""
    found = capture_breakdown(folder, timeout_s=SUMMARY_TIMEOUT_S)
    record = found.record
    base = CaptureSummary(folder, found.profiles, tuple(record.failures), record=record, problem=found.problem)
    try:
        why = load_why(folder)
    except ProfileError as exc:
        return replace(base, why_problem=str(exc))
    if why is None:
        return base
    profiles = tuple(sorted(found.profiles, key=lambda p: p.role != why.straggler))
    return replace(base, profiles=profiles, verdict=why.verdict)


@dataclass(frozen=True)
class CaptureEntry:
    """One capture in the list: its folder, and the words it is listed by."""

    folder: Path
    text: str
    tooltip: str


def list_entries(run_path: Path) -> list[CaptureEntry]:
    """The run's captures, oldest first, each named by when, why, how long and which roles (reads
    each record: call it off the GUI thread)."""
    entries = []
    for folder in list_captures(run_path):
        try:
            record = read_record(folder)
        except ProfileError as exc:
            entries.append(CaptureEntry(folder, f"{folder.name}\nunreadable record", str(exc)))
            continue
        if not record.finished:
            roles = f"being captured: {', '.join(record.asked)}"
        else:
            roles = ", ".join(record.roles) if record.roles else "no role captured"
        tooltip = f"{folder}\nasked: {', '.join(record.asked)}" + "".join(
            f"\nnot captured: {why}" for _role, why in record.failures
        )
        entries.append(CaptureEntry(folder, f"{record.when()}\n{record.describe()}\n{roles}", tooltip))
    return entries


def marked_differences(profiles: Sequence[RoleProfile]) -> dict[str, tuple[str, str]]:
    """The rows that have a role standing out: row label -> (that role, the words)."""
    return {r.label: (r.stands_out, r.mark) for r in table_rows(profiles) if r.stands_out is not None}


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


class ProfilePanel(QtWidgets.QWidget):
    """The run's captures on the left; the chosen capture's roles side by side on the right."""

    sig_open_tensorboard = QtCore.Signal(object)  # the capture folder (a Path) to show in TensorBoard

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
        self._tensorboard_busy = False  # a TensorBoard is starting for this window

        self.captures = QtWidgets.QListWidget()
        self.captures.setMaximumWidth(LIST_WIDTH)
        self.captures.setMinimumWidth(LIST_WIDTH * 3 // 4)
        self.captures.setWordWrap(True)
        self.captures.setAlternatingRowColors(True)
        self.captures.currentItemChanged.connect(lambda item, _old: self._on_chosen(item))
        self.message = QtWidgets.QLabel("no profile yet: select roles and use Role > Profile")
        self.message.setWordWrap(True)
        self.tensorboard = QtWidgets.QPushButton("Open in TensorBoard")
        self.tensorboard.setToolTip(
            "Show the selected capture in TensorBoard's Profile tab (trace viewer, op stats, input pipeline), "
            "served on 127.0.0.1 from the profiler environment"
        )
        self.tensorboard.setEnabled(False)
        self.tensorboard.clicked.connect(lambda _c=False: self._ask_tensorboard())
        self.tensorboard_note = QtWidgets.QLabel("")
        self.tensorboard_note.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
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

        head = QtWidgets.QHBoxLayout()
        head.addWidget(self.message, 1)
        head.addWidget(self.tensorboard_note)
        head.addWidget(self.tensorboard)
        right = QtWidgets.QVBoxLayout()
        right.addLayout(head)
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
            lambda: list_entries(path),
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
        items = {
            self.captures.item(i).data(QtCore.Qt.ItemDataRole.UserRole): self.captures.item(i)
            for i in range(self.captures.count())
        }
        for entry in found:
            if not isinstance(entry, CaptureEntry):
                continue
            item = items.get(entry.folder)
            if item is None:
                item = QtWidgets.QListWidgetItem()
                item.setData(QtCore.Qt.ItemDataRole.UserRole, entry.folder)
                self.captures.addItem(item)
            # A capture listed while it was being taken is named again once it is over.
            item.setText(entry.text)
            item.setToolTip(entry.tooltip)
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
                if self.captures.currentRow() == i:  # no change to hear of: shown again (it may be over now)
                    self._on_chosen(self.captures.item(i))
                else:
                    self.captures.setCurrentRow(i)
                return

    def selected_folder(self) -> Path | None:
        """The capture selected in the list, if any."""
        item = self.captures.currentItem()
        folder = item.data(QtCore.Qt.ItemDataRole.UserRole) if item is not None else None
        return folder if isinstance(folder, Path) else None

    def list_texts(self) -> list[str]:
        """Each listed capture as the list names it (what a test or a reader checks)."""
        return [self.captures.item(i).text() for i in range(self.captures.count())]

    def _ask_tensorboard(self) -> None:
        folder = self.selected_folder()
        if folder is not None:
            self.sig_open_tensorboard.emit(folder)

    def set_tensorboard_note(self, text: str, *, busy: bool = False) -> None:
        """Say where the capture is served (or why not); ``busy`` while TensorBoard starts."""
        self._tensorboard_busy = busy
        self.tensorboard_note.setText(text)
        self.tensorboard.setEnabled(not busy and self.selected_folder() is not None)

    def _on_chosen(self, item: QtWidgets.QListWidgetItem | None) -> None:
        self.tensorboard.setEnabled(item is not None and not self._tensorboard_busy)
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
        if done.record is not None and not done.record.finished:
            # Not kept: its roles' files are still being written. Listed again when it is over.
            if is_current:
                self._clear(f"profile {folder.name}: being captured ({done.record.describe()}); its figures follow")
            return
        self.cache[folder] = done
        if is_current:
            self.show_summary(done)

    # ------------------------------------------------------------------ the side-by-side table

    def _clear(self, message: str) -> None:
        self.shown = None
        self.message.setText(message)
        self.table.clearSpans()
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
        how = f" ({summary.record.describe()})" if summary.record is not None else ""
        head = f"profile {summary.folder.name}{how}: " + ", ".join(p.role for p in profiles) if profiles else ""
        notes = (head, f"not captured: {failed}" if failed else "", summary.why_problem or "", summary.problem or "")
        self.message.setText(" | ".join(t for t in notes if t))
        self._show_verdict(summary)
        self._fill_table(profiles)
        lines = []
        for line in profile_notes(profiles):
            who, _, said = line.partition(": ")
            lines.append(f"<b>{html.escape(who)}</b>: {html.escape(said)}")
        self.bottlenecks.setText("<br>".join(lines))

    def notes_text(self) -> list[str]:
        """What is said of each role under the table, as plain lines."""
        return profile_notes(self.shown.profiles) if self.shown is not None else []

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
        self.table.clearSpans()
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

    def _set(self, row: int, column: int, text: str, *, right: bool = False) -> QtWidgets.QTableWidgetItem:
        item = QtWidgets.QTableWidgetItem(text)
        if right:
            item.setTextAlignment(QtCore.Qt.AlignmentFlag.AlignRight | QtCore.Qt.AlignmentFlag.AlignVCenter)
        self.table.setItem(row, column, item)
        return item

    def _section(self, row: int, label: str) -> None:
        ops = label.startswith(OPS_HEADING)
        # The op times' note on a line of its own: the heading's row is only as wide as the table's
        # few columns, and the note is what makes "Dataset 127 ms/step" in a 52 ms step readable.
        item = self._set(row, 0, label.replace(f", {OPS_NOTE})", f")\n{OPS_NOTE}") if ops else label)
        font = item.font()
        font.setItalic(True)
        item.setFont(font)
        if ops:
            item.setToolTip(
                f"Each op type's self time per step, {OPS_NOTE}: tf.data's parallel threads and TensorFlow's "
                "inter-op threads run ops at once, so a role's ops can add up to more than its step."
            )
            self.table.setRowHeight(row, 2 * self.table.fontMetrics().lineSpacing() + 6)
        for c in range(self.table.columnCount()):
            cell = self.table.item(row, c) or self._set(row, c, "")
            cell.setBackground(QtGui.QColor(SECTION_COLOUR))
        # A heading spans the row: its words need not widen the labels' column.
        self.table.setSpan(row, 0, 1, self.table.columnCount())

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
