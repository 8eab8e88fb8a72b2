"""The window's Runs page: every run under the runs root in a sortable, filterable table.

The rows are :class:`core.run.index.RunSummary` values, loaded off the GUI thread
(:func:`gui.offthread.run_off_thread`) from each run's cached summary. The page asks the window,
through its signals, to open a run (``sig_run_open``), reattach to one (``sig_run_attach``),
compare 2-8 (``sig_runs_compare``) or open the selected runs in one TensorBoard
(``sig_runs_tensorboard``); it deletes and archives runs itself, after a confirmation and
off the GUI thread, and never a live one (:func:`core.run.index.delete_run` refuses it too, and a
run left by its launcher whose roles still run; one whose roles may run on a host that cannot be
checked from here goes only once the user says so).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6 import QtCore, QtGui, QtWidgets

from core.run import index as runs_index
from core.run.compare import MAX_RUNS, MIN_RUNS
from core.run.index import RunSummary
from core.views import runs_select
from core.views.rates import GLOBAL, label
from core.views.runs_table import COLUMNS, hyperparam_cells, hyperparam_keys, hyperparam_sort_key, row_cells
from gui.offthread import Relay, run_off_thread

HEADERS = (
    "Run",
    "Cluster file",
    "Started",
    "Took",
    "Outcome",
    "Roles",
    "Backend",
    "Loss",
    "Best",
    label(GLOBAL),
    "Restarts",
)
SORTS = ("start", "name", "start", "duration", "outcome", "roles", "name", "loss", "best", "speed", "restarts")
OUTCOME_COLOURS = {
    "succeeded": "#15803d",
    "failed": "#b91c1c",
    "stopped": "#6b7280",
    "running": "#1d4ed8",
    "left": "#b45309",
}
SORT_ROLE = QtCore.Qt.ItemDataRole.UserRole + 1
assert len(HEADERS) == len(COLUMNS) == len(SORTS)
MAX_COLUMN_PX = 240  # a column fits its content up to this; a longer value is elided in its middle


class RunsModel(QtCore.QAbstractTableModel):
    """One row per run; the cells are the CLI's (:func:`core.views.runs_table.row_cells`), then a
    column per hyperparameter of the runs loaded (:func:`core.views.runs_table.hyperparam_keys`)."""

    def __init__(self) -> None:
        super().__init__()
        self.runs: list[RunSummary] = []
        self.headers: list[str] = list(HEADERS)
        self._cells: list[list[str]] = []
        self._keys: list[list[Any]] = []

    def set_runs(self, runs: list[RunSummary]) -> None:
        self.beginResetModel()
        self.runs = runs
        params = hyperparam_keys(runs)
        self.headers = [*HEADERS, *params]
        self._cells = [[*row_cells(s), *hyperparam_cells(s, params)] for s in runs]
        keys = [runs_select.sort_key(k) for k in SORTS]
        # Sorting asks for keys n log n times: computed once per load, not per comparison.
        self._keys = [
            [(cells[c], run.created) if c in (0, 6) else keys[c](run) for c in range(len(SORTS))]
            + [hyperparam_sort_key(v) for v in cells[len(SORTS) :]]
            for run, cells in zip(runs, self._cells, strict=True)
        ]
        self.endResetModel()

    def rowCount(self, parent: Any = None) -> int:
        return 0 if parent is not None and parent.isValid() else len(self.runs)

    def columnCount(self, parent: Any = None) -> int:
        return len(self.headers)

    def headerData(self, section: int, orientation: QtCore.Qt.Orientation, role: int = 0) -> Any:
        if orientation != QtCore.Qt.Orientation.Horizontal:
            return None
        if role == QtCore.Qt.ItemDataRole.DisplayRole:
            return self.headers[section]
        if role == QtCore.Qt.ItemDataRole.ToolTipRole and section >= len(HEADERS):
            return f"{self.headers[section]}: a flag of the run's command or an [env] value"
        return None

    def data(self, index: QtCore.QModelIndex | QtCore.QPersistentModelIndex, role: int = 0) -> Any:
        if not index.isValid():
            return None
        run = self.runs[index.row()]
        if role == QtCore.Qt.ItemDataRole.DisplayRole:
            return self._cells[index.row()][index.column()]
        if role == SORT_ROLE:
            return self._keys[index.row()][index.column()]
        if role == QtCore.Qt.ItemDataRole.ForegroundRole and self.headers[index.column()] == "Outcome":
            return QtGui.QBrush(QtGui.QColor(OUTCOME_COLOURS.get(run.outcome, "#000000")))
        if role == QtCore.Qt.ItemDataRole.ToolTipRole:
            # The full text of a cell elided to fit its column; the Run column also says where it is.
            text = self._cells[index.row()][index.column()]
            if index.column() == 0:
                text = "\n".join(t for t in (text, str(run.path), run.reason) if t)
            return text
        return None


class RunsProxy(QtCore.QSortFilterProxyModel):
    """Text (every word, anywhere in the row) and outcome filters; sorts on each column's key."""

    def __init__(self) -> None:
        super().__init__()
        self.words: list[str] = []
        self.outcome = ""
        self.setSortRole(SORT_ROLE)

    def set_filter(self, text: str, outcome: str) -> None:
        self.beginFilterChange()
        self.words, self.outcome = text.lower().split(), outcome
        self.endFilterChange(QtCore.QSortFilterProxyModel.Direction.Rows)

    def filterAcceptsRow(self, source_row: int, source_parent: Any) -> bool:
        model = self.sourceModel()
        assert isinstance(model, RunsModel)
        run = model.runs[source_row]
        if self.outcome and run.outcome != self.outcome:
            return False
        text = run.search_text()
        return all(w in text for w in self.words)

    def lessThan(self, left: Any, right: Any) -> bool:
        a, b = left.data(SORT_ROLE), right.data(SORT_ROLE)
        try:
            return bool(a < b)
        except TypeError:
            return False


def _ask(parent: QtWidgets.QWidget, title: str, text: str) -> bool:
    answer = QtWidgets.QMessageBox.question(parent, title, text)
    return answer == QtWidgets.QMessageBox.StandardButton.Yes


def _warn(parent: QtWidgets.QWidget, title: str, text: str) -> None:
    QtWidgets.QMessageBox.warning(parent, title, text)


class RunsPage(QtWidgets.QWidget):
    """The Runs page. ``sig_run_open(Path)``, ``sig_run_attach(Path)``, ``sig_runs_compare(list[Path])``
    ask the window; ``confirm(title, text) -> bool`` asks the user and ``warn(title, text)`` tells
    them (tests replace both)."""

    sig_run_open = QtCore.Signal(object)
    sig_run_attach = QtCore.Signal(object)
    sig_runs_compare = QtCore.Signal(object)
    sig_runs_tensorboard = QtCore.Signal(object)  # list[Path]: the selected runs, in one TensorBoard
    sig_loaded = QtCore.Signal(int)  # rows loaded (after each refresh)

    def __init__(self, root: Callable[[], Path]) -> None:
        super().__init__()
        self._root = root
        self._relay = Relay(self)
        self._loading = False
        self.confirm: Callable[[str, str], bool] = lambda title, text: _ask(self, title, text)
        self.warn: Callable[[str, str], None] = lambda title, text: _warn(self, title, text)
        self.model = RunsModel()
        self.proxy = RunsProxy()
        self.proxy.setSourceModel(self.model)
        self.filter_edit = QtWidgets.QLineEdit()
        self.filter_edit.setPlaceholderText("filter: words in name, cluster file, outcome, backend...")
        self.filter_edit.setClearButtonEnabled(True)
        self.outcome_box = QtWidgets.QComboBox()
        self.outcome_box.addItem("every outcome", "")
        for outcome in runs_index.OUTCOMES:
            self.outcome_box.addItem(outcome, outcome)
        self.filter_edit.textChanged.connect(self._apply_filter)
        self.outcome_box.currentIndexChanged.connect(self._apply_filter)
        self.table = QtWidgets.QTableView()
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(2, QtCore.Qt.SortOrder.DescendingOrder)
        self.table.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QtWidgets.QAbstractItemView.SelectionMode.ExtendedSelection)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setStretchLastSection(False)  # not a 1,000-pixel Restarts column
        # One line a run: a run id wrapped over two lines reads as two values. Too long a value is
        # elided in its middle, where ids, paths and flags say least; the tooltip has it whole.
        self.table.setWordWrap(False)
        self.table.setTextElideMode(QtCore.Qt.TextElideMode.ElideMiddle)
        self.table.doubleClicked.connect(lambda _i: self.open_selected())
        self.table.selectionModel().selectionChanged.connect(lambda *_: self._update_buttons())
        self.count_label = QtWidgets.QLabel("")
        self.buttons: dict[str, QtWidgets.QPushButton] = {}
        bar = QtWidgets.QHBoxLayout()
        bar.addWidget(self.filter_edit, 1)
        bar.addWidget(self.outcome_box)
        for name, slot, tip in (
            ("Refresh", self.refresh, "Read the runs directory again"),
            ("Open", self.open_selected, "Show the run in the Run page"),
            ("Attach", self.attach_selected, "Reattach to a live run (running, or left by its launcher)"),
            ("Compare", self.compare_selected, f"Put {MIN_RUNS}-{MAX_RUNS} selected runs side by side"),
            ("TensorBoard", self.tensorboard_selected, "Open the selected runs in one TensorBoard, overlaid"),
            ("Archive", self.archive_selected, "Move the selected runs under archived/ (kept on disk)"),
            ("Delete", self.delete_selected, "Delete the selected runs (never a live one)"),
        ):
            button = QtWidgets.QPushButton(name)
            button.setToolTip(tip)
            button.clicked.connect(lambda _c=False, s=slot: s())
            bar.addWidget(button)
            self.buttons[name] = button
        layout = QtWidgets.QVBoxLayout(self)
        layout.addLayout(bar)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.count_label)
        self._update_buttons()

    # ------------------------------------------------------------------ loading, off the GUI thread

    def refresh(self) -> None:
        """Reload every run's summary on a worker thread; the table changes when it is done."""
        if self._loading:
            return
        self._loading = True
        root = self._root()
        self.count_label.setText(f"reading {root}...")
        run_off_thread(self._relay, lambda: runs_index.list_summaries(root), self._on_loaded, name="runs-list")

    def _on_loaded(self, runs: list[RunSummary] | None, error: BaseException | None) -> None:
        self._loading = False
        if error is not None or runs is None:
            self.count_label.setText(f"cannot read the runs directory: {error}")
            return
        selected = {s.path for s in self.selected_runs()}
        self.model.set_runs(runs)
        self.fit_columns()
        for row in range(self.proxy.rowCount()):
            if self.model.runs[self.proxy.mapToSource(self.proxy.index(row, 0)).row()].path in selected:
                self.table.selectRow(row)
        self._show_count()
        self._update_buttons()
        self.sig_loaded.emit(len(runs))

    def fit_columns(self) -> None:
        """Each column as wide as its header and widest cell, up to :data:`MAX_COLUMN_PX`."""
        self.table.resizeColumnsToContents()
        header = self.table.horizontalHeader()
        for column in range(self.model.columnCount()):
            if header.sectionSize(column) > MAX_COLUMN_PX:
                header.resizeSection(column, MAX_COLUMN_PX)

    def _apply_filter(self) -> None:
        self.proxy.set_filter(self.filter_edit.text(), str(self.outcome_box.currentData() or ""))
        self._show_count()

    def _show_count(self) -> None:
        shown, total = self.proxy.rowCount(), len(self.model.runs)
        self.count_label.setText(
            f"{shown} of {total} runs in {self._root()}" if shown != total else f"{total} runs in {self._root()}"
        )

    # ------------------------------------------------------------------ selection and actions

    def selected_runs(self) -> list[RunSummary]:
        rows = sorted({i.row() for i in self.table.selectionModel().selectedRows()})
        return [self.model.runs[self.proxy.mapToSource(self.proxy.index(r, 0)).row()] for r in rows]

    def select_ids(self, ids: list[str]) -> None:
        """Select the runs with these ids (tests, and after a refresh)."""
        self.table.clearSelection()
        mode = QtCore.QItemSelectionModel.SelectionFlag.Select | QtCore.QItemSelectionModel.SelectionFlag.Rows
        for row in range(self.proxy.rowCount()):
            index = self.proxy.index(row, 0)
            if self.model.runs[self.proxy.mapToSource(index).row()].id in ids:
                self.table.selectionModel().select(index, mode)

    def _update_buttons(self) -> None:
        chosen = self.selected_runs()
        one = len(chosen) == 1
        self.buttons["Open"].setEnabled(one)
        self.buttons["Attach"].setEnabled(one and chosen[0].outcome in ("running", "left"))
        self.buttons["Compare"].setEnabled(MIN_RUNS <= len(chosen) <= MAX_RUNS)
        self.buttons["TensorBoard"].setEnabled(bool(chosen))
        removable = bool(chosen) and not any(s.live for s in chosen)
        self.buttons["Archive"].setEnabled(removable)
        self.buttons["Delete"].setEnabled(removable)

    def open_selected(self) -> None:
        chosen = self.selected_runs()
        if len(chosen) == 1:
            self.sig_run_open.emit(chosen[0].path)

    def attach_selected(self) -> None:
        chosen = self.selected_runs()
        if len(chosen) == 1 and chosen[0].outcome in ("running", "left"):
            self.sig_run_attach.emit(chosen[0].path)

    def compare_selected(self) -> None:
        chosen = self.selected_runs()
        if MIN_RUNS <= len(chosen) <= MAX_RUNS:
            self.sig_runs_compare.emit([s.path for s in chosen])

    def tensorboard_selected(self) -> None:
        chosen = self.selected_runs()
        if chosen:
            self.sig_runs_tensorboard.emit([s.path for s in chosen])

    def delete_selected(self) -> None:
        self._remove("Delete", runs_index.delete_run, "deleted from disk: their logs and figures are gone")

    def archive_selected(self) -> None:
        self._remove("Archive", runs_index.archive_run, f"moved under {runs_index.ARCHIVE_DIR}/ in the runs directory")

    def _remove(self, verb: str, act: Callable[..., Any], what: str) -> None:
        chosen = [s for s in self.selected_runs() if not s.live]  # a live run is never removed
        if not chosen:
            return
        names = "\n".join(s.id for s in chosen[:10]) + ("\n..." if len(chosen) > 10 else "")
        left = [s.id for s in chosen if s.outcome == "left"]
        note = f"\n\n{len(left)} of them were left by their launcher: their roles may still run." if left else ""
        if not self.confirm(f"{verb} runs", f"{verb} {len(chosen)} run(s)? They are {what}.\n\n{names}{note}"):
            return
        self._remove_paths(verb, act, [s.path for s in chosen], force=False)

    def _remove_paths(self, verb: str, act: Callable[..., Any], paths: list[Path], *, force: bool) -> None:
        """``act`` on each run off the GUI thread. A run whose roles may still run on hosts that
        cannot be checked from here is refused first; the user may then say to go on anyway."""

        def work() -> tuple[list[str], list[tuple[Path, str]]]:
            failures: list[str] = []
            unsure: list[tuple[Path, str]] = []
            for path in paths:
                try:
                    act(path, force=force)
                except runs_index.RunBusyError as exc:
                    if exc.forceable and not force:
                        unsure.append((path, str(exc)))
                    else:
                        failures.append(f"{path.name}: {exc}")
                except OSError as exc:
                    failures.append(f"{path.name}: {exc}")
            return failures, unsure

        def done(result: tuple[list[str], list[tuple[Path, str]]] | None, error: BaseException | None) -> None:
            failures, unsure = result or ([], [])
            problems = failures or ([str(error)] if error else [])
            if problems:
                self.warn(f"{verb} runs", "\n".join(problems))
            if unsure and self.confirm(
                f"{verb} runs",
                "\n\n".join(text for _, text in unsure) + f"\n\n{verb} {len(unsure)} run(s) anyway?",
            ):
                self._remove_paths(verb, act, [path for path, _ in unsure], force=True)
                return
            self.refresh()

        run_off_thread(self._relay, work, done, name=f"runs-{verb.lower()}")
