"""The roles table's model: rows grouped by job or host, filtered and sorted, updated in place.

:class:`RolesModel` holds one :class:`RoleRow` per role, under a group row per job or host (or
flat). A frame's new status only emits ``dataChanged`` for the cells that changed (one signal a run
of consecutive changed rows, with the roles that changed), and one signal a group carrying the sort key's role for the rows
whose key in the sort column changed: the proxy re-sorts only then (a full-width
signal a group re-sorted and re-measured all 65 rows 10 times a second). So a steady 65-row table
costs next to nothing, and the views' selection (persistent indexes) and
scroll position survive. Only a change of the set of roles or of the grouping resets the model;
the view then puts the selection back by role name.

:class:`RolesProxy` sorts (natural order for names and hosts, numeric for numbers, empty cells
last) and filters on role, host and state text, keeping a group when one of its roles matches.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from PySide6 import QtCore, QtGui

from core.views.overview import natural_key

SORT_KEY_ROLE = QtCore.Qt.ItemDataRole.UserRole + 1
NAME_ROLE = QtCore.Qt.ItemDataRole.UserRole + 2  # a role row's name; None on a group row
GROUP_ROLE = QtCore.Qt.ItemDataRole.UserRole + 3  # a group row's name
GROUPINGS = ("none", "job", "host")
Index = QtCore.QModelIndex | QtCore.QPersistentModelIndex
ROOT = QtCore.QModelIndex()  # the invisible root, as Qt's own default arguments use it
_R = QtCore.Qt.ItemDataRole
# What a cell's change can alter, the sort key aside (the proxy re-sorts only on SORT_KEY_ROLE).
LOOK_ROLES = [_R.DisplayRole, _R.ForegroundRole, _R.BackgroundRole, _R.FontRole, _R.ToolTipRole]


@dataclass
class RoleRow:
    """What the table shows of one role: its cells, their sort keys and how the row looks."""

    name: str
    job: str
    host: str
    state: str  # the state's word ("running"), for the group counts
    cells: list[str]
    sort_keys: list[tuple[Any, ...]]
    failed: bool = False
    emphasised: bool = False  # failed, stalled or waiting: the state cell in bold
    state_colour: str | None = None
    state_tooltip: str = ""
    cell_tooltips: dict[int, str] = field(default_factory=dict)  # column -> what its figure is, or why none
    crash_looping: bool = False  # the whole row on light amber, as failed rows are on pink

    def group(self, grouping: str) -> str:
        return self.job if grouping == "job" else self.host if grouping == "host" else ""


@dataclass
class _Group:
    name: str
    rows: list[RoleRow] = field(default_factory=list)

    def title(self) -> str:
        counts = Counter(r.state for r in self.rows)
        states = ", ".join(f"{n} {state}" for state, n in sorted(counts.items(), key=lambda kv: -kv[1]))
        return f"{self.name}: {len(self.rows)} role{'s' if len(self.rows) != 1 else ''} ({states})"


FAILED_BACKGROUND = QtGui.QColor("#fde2e2")
CRASH_LOOP_BACKGROUND = QtGui.QColor("#fff1c7")
GROUP_BACKGROUND = QtGui.QColor("#eef2f7")


def filter_pattern(text: str) -> list[re.Pattern[str]]:
    """One pattern per word of ``text``. A word ending in a digit must not be followed by one,
    so ``worker:1`` finds worker:1 but not worker:10, and ``127.0.0.3`` not 127.0.0.30."""
    return [
        re.compile(re.escape(word) + (r"(?!\d)" if word[-1].isdigit() else ""), re.IGNORECASE) for word in text.split()
    ]


class RolesModel(QtCore.QAbstractItemModel):
    """Roles under group rows (by job or host) or flat; see the module docstring."""

    def __init__(self, columns: tuple[str, ...], state_column: int) -> None:
        super().__init__()
        self.sort_column = -1  # the view's sort column: only its keys' changes re-sort the proxy
        self.changed_cells: list[tuple[int, str]] = []  # (column, text) the last set_rows changed
        self._columns = columns
        self._state_column = state_column
        self._grouping = "none"
        self._groups: list[_Group] = [_Group("")]
        # Internal pointers: a group row carries None, a role row its group's position + 1.
        self._bold = QtGui.QFont()
        self._bold.setBold(True)

    # ------------------------------------------------------------------ feeding

    @property
    def grouping(self) -> str:
        return self._grouping

    def set_grouping(self, grouping: str) -> None:
        if grouping not in GROUPINGS:
            raise ValueError(f"grouping must be one of {', '.join(GROUPINGS)}, not {grouping!r}")
        if grouping != self._grouping:
            rows = [r for g in self._groups for r in g.rows]
            self._grouping = grouping
            self._rebuild(rows)

    def needs_reset(self, rows: list[RoleRow]) -> bool:
        """Whether showing ``rows`` resets the model (the set of roles or groups changed)."""
        return [(g.name, [r.name for r in g.rows]) for g in self._groups] != self._layout_of(rows)

    def set_rows(self, rows: list[RoleRow]) -> bool:
        """Show ``rows``; True when the model was reset (the set of roles or groups changed)."""
        self.changed_cells = []
        if self.needs_reset(rows):
            self._rebuild(rows)
            return True
        grouped = self._grouping != "none"
        by_group: dict[str, list[RoleRow]] = {}
        for r in rows:
            by_group.setdefault(r.group(self._grouping), []).append(r)
        for g, group in enumerate(self._groups):
            new_rows = by_group.get(group.name, [])
            old_title = group.title()
            parent = self.index(g, 0) if grouped else ROOT
            resort: list[int] = []  # rows whose key in the sort column changed
            # One dataChanged per run of consecutive changed rows, over the columns any of them
            # changed: a refresh of 257 rows emitted 257 signals, each through the proxy and view.
            run: list[int] = []  # [first row, last row, first column, last column]
            for i, (old, new) in enumerate(zip(group.rows, new_rows, strict=True)):
                if old is new or old == new:
                    continue
                group.rows[i] = new
                span = self._changed_span(old, new)
                if span is not None:
                    if run and run[1] == i - 1:
                        run[1], run[2], run[3] = i, min(run[2], span[0]), max(run[3], span[1])
                    else:
                        self._emit_run(run, parent)
                        run = [i, i, *span]
                if 0 <= self.sort_column < len(self._columns) and (
                    old.sort_keys[self.sort_column] != new.sort_keys[self.sort_column]
                ):
                    resort.append(i)
            self._emit_run(run, parent)
            if resort:  # one signal a group a frame that re-sorts: the proxy sorts once, not once a role
                self.dataChanged.emit(
                    self.index(resort[0], self.sort_column, parent),
                    self.index(resort[-1], self.sort_column, parent),
                    [SORT_KEY_ROLE],
                )
            if grouped and group.title() != old_title:
                self.dataChanged.emit(self.index(g, 0), self.index(g, 0), LOOK_ROLES)
        return False

    def _changed_span(self, old: RoleRow, new: RoleRow) -> tuple[int, int] | None:
        """The columns of one row to signal (first, last), without the sort key's role: the proxy
        then neither re-sorts nor measures anything but those cells (see :meth:`set_rows`)."""
        columns = [c for c, (a, b) in enumerate(zip(old.cells, new.cells, strict=True)) if a != b]
        if (old.emphasised, old.state_colour, old.state_tooltip) != (
            new.emphasised,
            new.state_colour,
            new.state_tooltip,
        ) and self._state_column not in columns:
            columns.append(self._state_column)
        # A new background (failed, crash-looping) repaints the whole row, but only the cells whose
        # text changed are measured: the row turns amber as its Exit cell fills, which must widen.
        span = [0, len(self._columns) - 1] if (old.failed, old.crash_looping) != (new.failed, new.crash_looping) else []
        self.changed_cells += [(c, new.cells[c]) for c in columns]
        if columns or span:
            return min(columns + span), max(columns + span)
        return None

    def _emit_run(self, run: list[int], parent: QtCore.QModelIndex) -> None:
        """dataChanged over ``run`` (first row, last row, first column, last column), if any."""
        if run:
            first, last, left, right = run
            self.dataChanged.emit(self.index(first, left, parent), self.index(last, right, parent), LOOK_ROLES)

    def _layout_of(self, rows: list[RoleRow]) -> list[tuple[str, list[str]]]:
        if self._grouping == "none":
            return [("", [r.name for r in rows])]
        groups: dict[str, list[str]] = {}
        for r in rows:
            groups.setdefault(r.group(self._grouping), []).append(r.name)
        return list(groups.items())

    def _rebuild(self, rows: list[RoleRow]) -> None:
        self.beginResetModel()
        groups: dict[str, _Group] = {}
        for r in rows:
            name = r.group(self._grouping)
            groups.setdefault(name, _Group(name)).rows.append(r)
        self._groups = list(groups.values()) or [_Group("")]
        self.endResetModel()

    # ------------------------------------------------------------------ reading

    def role_rows(self) -> list[RoleRow]:
        return [r for g in self._groups for r in g.rows]

    def group_titles(self) -> dict[str, str]:
        return {g.name: g.title() for g in self._groups} if self._grouping != "none" else {}

    def _row(self, index: Index) -> RoleRow | None:
        g = index.internalId()
        if self._grouping == "none":
            return self._groups[0].rows[index.row()]
        return self._groups[g - 1].rows[index.row()] if g else None

    # ------------------------------------------------------------------ QAbstractItemModel

    def index(self, row: int, column: int, parent: Index = ROOT) -> QtCore.QModelIndex:
        # Checked here, not with hasIndex(): that calls rowCount() and columnCount() back into
        # Python, and a sorted 65-row table asks for ~7,500 indexes a frame (three Python calls
        # each made a frame's re-sort and repaint 50 ms of GUI-thread CPU).
        if not 0 <= column < len(self._columns) or row < 0:
            return QtCore.QModelIndex()
        if self._grouping == "none":
            if row < len(self._groups[0].rows) and not parent.isValid():
                return self.createIndex(row, column, 0)
            return QtCore.QModelIndex()
        if not parent.isValid():
            if row < len(self._groups) and self._groups[0].rows:
                return self.createIndex(row, column, 0)
            return QtCore.QModelIndex()
        if parent.internalId() == 0 and parent.column() == 0 and row < len(self._groups[parent.row()].rows):
            return self.createIndex(row, column, parent.row() + 1)
        return QtCore.QModelIndex()

    def parent(self, index: Index = ROOT) -> QtCore.QModelIndex:  # type: ignore[override]
        if not index.isValid() or self._grouping == "none" or index.internalId() == 0:
            return QtCore.QModelIndex()
        return self.createIndex(index.internalId() - 1, 0, 0)

    def rowCount(self, parent: Index = ROOT) -> int:
        if self._grouping == "none":
            return 0 if parent.isValid() else len(self._groups[0].rows)
        if not parent.isValid():
            return len(self._groups) if self._groups[0].rows else 0
        if parent.internalId() == 0 and parent.column() == 0:
            return len(self._groups[parent.row()].rows)
        return 0

    def columnCount(self, parent: Index = ROOT) -> int:
        return len(self._columns)

    def headerData(self, section: int, orientation: QtCore.Qt.Orientation, role: int = 0) -> Any:
        if orientation == QtCore.Qt.Orientation.Horizontal and role == QtCore.Qt.ItemDataRole.DisplayRole:
            return self._columns[section]
        return None

    def data(self, index: Index, role: int = 0) -> Any:
        if not index.isValid():
            return None
        row, column = self._row(index), index.column()
        R = QtCore.Qt.ItemDataRole
        if row is None:  # a group row
            group = self._groups[index.row()]
            if role == R.DisplayRole:
                return group.title() if column == 0 else ""
            if role == SORT_KEY_ROLE:  # groups sort by name whatever the column
                return natural_key(group.name)
            if role == GROUP_ROLE:
                return group.name
            if role == R.BackgroundRole:
                return GROUP_BACKGROUND
            if role == R.FontRole:
                return self._bold
            return None
        if role == R.DisplayRole:
            return row.cells[column]
        if role == SORT_KEY_ROLE:
            return row.sort_keys[column]
        if role == NAME_ROLE:
            return row.name
        if role == R.BackgroundRole and row.failed:
            return FAILED_BACKGROUND
        if role == R.BackgroundRole and row.crash_looping:
            return CRASH_LOOP_BACKGROUND
        if column == self._state_column:
            if role == R.ForegroundRole and row.state_colour:
                return QtGui.QColor(row.state_colour)
            if role == R.FontRole and row.emphasised:
                return self._bold
            if role == R.ToolTipRole:
                return row.state_tooltip
        if role == R.ToolTipRole:
            return row.cell_tooltips.get(column)
        return None


class RolesProxy(QtCore.QSortFilterProxyModel):
    """Natural/numeric sort on each column's key; filter words over role, host and state."""

    def __init__(self, state_column: int, host_column: int) -> None:
        super().__init__()
        self._patterns: list[re.Pattern[str]] = []
        self._fields = (0, host_column, state_column)
        self.setSortRole(SORT_KEY_ROLE)  # a change of a cell's text alone never re-sorts
        self.setFilterKeyColumn(-1)  # the filter reads role, host and state: any column's change
        self.setRecursiveFilteringEnabled(True)  # a group stays while one of its roles matches
        self.setDynamicSortFilter(True)

    def set_filter_text(self, text: str) -> None:
        self.beginFilterChange()
        self._patterns = filter_pattern(text)
        self.endFilterChange(QtCore.QSortFilterProxyModel.Direction.Rows)

    def filterAcceptsRow(self, source_row: int, source_parent: Index) -> bool:
        if not self._patterns:
            return True
        model = self.sourceModel()
        if isinstance(model, RolesModel) and model.grouping != "none" and not source_parent.isValid():
            return False  # a group: kept by recursive filtering while one of its roles matches
        texts = [str(model.index(source_row, c, source_parent).data()) for c in self._fields]
        return all(any(p.search(t) for t in texts) for p in self._patterns)

    def lessThan(self, left: Index, right: Index) -> bool:
        a, b = left.data(SORT_KEY_ROLE), right.data(SORT_KEY_ROLE)
        if a is None or b is None:
            return False
        a_empty, b_empty = a == (1,), b == (1,)
        if a_empty != b_empty:  # empty cells last in either order: ps:0 has no step to rank
            return a_empty if self.sortOrder() == QtCore.Qt.SortOrder.DescendingOrder else b_empty
        return bool(a < b)
