"""The roles table and the banner above it: one row per role, failed, crash-looping and stalled
roles standing out.

Fed with the source's :class:`~core.run.status.ClusterStatus` once a frame (a large run's rows a
share a frame: :meth:`RolesView.show_status`); cells are only touched when their text changes, the table re-sorts only when a key in its sort column changes,
and a column is only measured again when one of its cells changed, so a steady table costs next
to nothing to refresh.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from PySide6 import QtCore, QtGui, QtWidgets

from core.cluster.spec import Task
from core.run.status import ClusterStatus, RoleState, RoleStatus
from core.views.conditions import crash_text, next_attempt_text, shown_attempt, trouble_text
from core.views.empty import between_attempts_text, seconds_to_next_attempt
from core.views.overview import natural_key
from core.views.rates import BATCHES, StepRates, label
from gui.run.banner import BannerLine, TroubleBanner
from gui.run.roles_model import GROUP_ROLE, GROUPINGS, NAME_ROLE, RoleRow, RolesModel, RolesProxy

STATE_COLOURS = {
    RoleState.PENDING: "#8a8a8a",
    RoleState.STARTING: "#b8860b",
    RoleState.RUNNING: "#2e7d32",
    RoleState.BACKOFF: "#d9822b",
    RoleState.STOPPING: "#b8860b",
    RoleState.SUCCEEDED: "#2b6cb0",
    RoleState.FAILED: "#c62828",
    RoleState.STOPPED: "#6b6b6b",
}
STALLED_COLOUR = "#b45309"
STRAGGLER_COLOUR = "#00838f"  # the overview's straggler tiles' (gui.run.overview)
BATCHES_COLUMN = label(BATCHES).capitalize()  # "Batches/s (30 s)": its own updates (core.views.rates)
CRASH_LOOP_COLOUR = "#8a5a00"  # the state's text: dark amber, on the row's light amber
LOOPING_STATES = (RoleState.STARTING, RoleState.RUNNING, RoleState.BACKOFF, RoleState.STOPPING)
COLUMNS = (
    "Role",
    "Host",
    "PID",
    "State",
    "Uptime",
    "Restarts",
    "Exit",
    "Step",
    "Loss",
    "Step time",
    BATCHES_COLUMN,
    "CPU",
    "RSS",
    "GPUs",
)
STATE_COLUMN = COLUMNS.index("State")
CELL_PADDING_PX = 8  # a cell's margins and focus frame around its text


def fmt_bytes(n: int | None) -> str:
    return "" if n is None else f"{n / 2**20:.0f} MiB"


def fmt_duration(seconds: float) -> str:
    """``m:ss``, or ``h:mm:ss`` from an hour on."""
    seconds = int(seconds)
    if seconds < 3600:
        return f"{seconds // 60}:{seconds % 60:02d}"
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def crash_looping(role: RoleStatus) -> bool:
    """Whether the row reads crash-looping (as its tile does: core.views.overview.category)."""
    return role.crash_looping and role.state in LOOPING_STATES


def state_text(role: RoleStatus, now: float | None = None) -> str:
    now = time.time() if now is None else now
    if crash_looping(role):  # the Exit column says how the last attempt ended, the banner why
        of = f" of {role.attempts}" if role.attempts else ""
        left = seconds_to_next_attempt(role, now)
        when = "" if left is None else f" in {left:.0f} s" if left >= 1 else " now"
        return f"crash-looping (attempt {shown_attempt(role)}{of}{when})"
    if role.state == RoleState.BACKOFF:  # "between attempts: attempt 3 of 5 in 4 s"
        return "backoff (" + between_attempts_text(role, now).removeprefix("between attempts: ") + ")"
    text = str(role.state)
    if role.waiting_for and role.state == RoleState.RUNNING:  # running, but waiting for a peer
        text += f" (waiting for {role.waiting_for})"
    elif role.stalled and role.state == RoleState.RUNNING:
        text += f" (stalled {fmt_duration(role.stalled_for_s or 0)})"
    elif role.straggler:
        text += " (straggler)"
    return text


def html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _num(value: float | int | None) -> tuple[Any, ...]:
    """Sort key of a number: by value, empty cells after every number (ascending)."""
    return (1,) if value is None else (0, value)


def crash_banner(role: RoleStatus, now: float) -> str:
    """The banner's line for a crash-looping role: ``<b>worker:1 crash-looping</b>: exit 1
    (ZeroDivisionError: division by zero), attempt 3 of 5 · next attempt in 4 s``."""
    words = crash_text(role)  # "crash-looping: exit 1 (...), attempt 3 of 5"
    head, sep, rest = words.partition(": ")
    if not sep:  # no exit or error known: "crash-looping, attempt 3 of 5"
        head, rest = "crash-looping", words.removeprefix("crash-looping, ")
    countdown = next_attempt_text(role, now)
    return f"<b>{html(role.role)} {head}</b>: {html(rest)}" + (f" · {html(countdown)}" if countdown else "")


def exit_cell(role: RoleStatus) -> str:
    """How the role's last attempt that ended did, and why: ``exit code 1 (ZeroDivisionError:
    division by zero)``. While an attempt runs, the one before it, if it failed (a crash loop's)."""
    ended = role.exit_text
    if role.state in (RoleState.FAILED, RoleState.BACKOFF) and role.last_error:
        return f"{ended or role.last_exit} ({role.last_error})"
    if ended:
        return ended
    if role.last_exit and role.state in LOOPING_STATES:
        return f"{role.last_exit} ({role.last_error})" if role.last_error else role.last_exit
    return ""


def row_cells(role: RoleStatus, link_state: str | None, now: float, *, rates: StepRates | None = None) -> list[str]:
    """The table's cells for ``role``; ``link_state`` is its host's SSH link state, if any;
    ``rates``: the run's (:func:`core.views.rates.status_rates`)."""
    batches = rates.batches_cell(role.role)[0] if rates is not None else ""
    alive = role.state in (RoleState.RUNNING, RoleState.STARTING, RoleState.STOPPING)
    return [
        role.role,
        role.host if link_state in (None, "connected") else f"{role.host} ({link_state})",
        str(role.pid or ""),
        state_text(role, now),
        fmt_duration(now - role.started_at) if role.started_at and alive else "",
        str(role.restarts),
        exit_cell(role),
        "" if role.step is None else str(role.step),
        "" if role.loss is None else f"{role.loss:.4f}" + (" (tb)" if role.loss_source == "tb" else ""),
        "" if role.step_time_s is None else f"{role.step_time_s * 1000:.1f} ms",
        batches,
        "" if role.cpu_percent is None else f"{role.cpu_percent:.0f}%",
        fmt_bytes(role.rss_bytes),
        ",".join(str(g) for g in role.gpus) or "-",
    ]


@functools.lru_cache(maxsize=4096)
def _text_key(text: str) -> tuple[Any, ...]:
    return (0, natural_key(text)) if text else (1,)


def text_keys(cells: list[str]) -> list[tuple[Any, ...]]:
    """A sort key per cell in natural order (``worker:2`` before ``worker:10``), empty cells last."""
    return [_text_key(text) for text in cells]


BATCHES_INDEX = COLUMNS.index(BATCHES_COLUMN)
NUMERIC_COLUMNS = tuple(
    COLUMNS.index(c) for c in ("PID", "Uptime", "Restarts", "Step", "Loss", "Step time", BATCHES_COLUMN, "CPU", "RSS")
)


def sort_keys(role: RoleStatus, cells: list[str], now: float, *, own: float | None = None) -> list[tuple[Any, ...]]:
    """One key per column: natural order for names, hosts and text, numeric for numbers.

    Only the text columns' keys are parsed (and cached): a frame builds 65 rows' keys."""
    alive = role.state in (RoleState.RUNNING, RoleState.STARTING, RoleState.STOPPING)
    numbers = (
        role.pid,
        # By start time (later = shorter uptime): a key that does not change every frame, which
        # would re-sort all 65 rows of a 64-worker run's table 10 times a second.
        -role.started_at if role.started_at and alive else None,
        role.restarts,
        role.step,
        role.loss,
        role.step_time_s,
        own,
        role.cpu_percent,
        role.rss_bytes,
    )
    keys = [_num(None)] * len(cells)
    for column, value in zip(NUMERIC_COLUMNS, numbers, strict=True):
        keys[column] = _num(value)
    for column, text in enumerate(cells):
        if column not in NUMERIC_COLUMNS:
            keys[column] = _text_key(text)
    return keys


def role_row(role: RoleStatus, link_state: str | None, now: float, *, rates: StepRates | None = None) -> RoleRow:
    """How ``role`` reads in the table: cells, sort keys, colours and the state's tooltip."""
    cells = row_cells(role, link_state, now, rates=rates)
    failed = role.state == RoleState.FAILED
    looping = crash_looping(role)
    stalled = (role.stalled or bool(role.waiting_for)) and role.state == RoleState.RUNNING and not looping
    straggler = role.straggler and role.state == RoleState.RUNNING and not stalled and not looping
    tooltip = (
        trouble_text(role, now)
        if looping or failed
        else f"{role.waiting_message}\nFix: {role.waiting_fix}"  # why it waits, and the fix
        if role.waiting_for
        else f"no new step for {fmt_duration(role.stalled_for_s or 0)}: hung? Kill it (Ctrl+K) or restart it"
        if stalled
        else f"straggler: {role.straggler_detail}"
        if straggler
        else role.detail
    )
    return RoleRow(
        name=role.role,
        job=role.job,
        host=role.host,
        state="crash-looping" if looping else str(role.state),
        cells=cells,
        sort_keys=sort_keys(role, cells, now, own=rates.of(role.role) if rates is not None else None),
        failed=failed,
        emphasised=failed or stalled or looping or straggler,
        state_colour=(
            CRASH_LOOP_COLOUR
            if looping
            else STALLED_COLOUR
            if stalled
            else STRAGGLER_COLOUR
            if straggler
            else STATE_COLOURS[role.state]
        ),
        state_tooltip=tooltip,
        cell_tooltips={} if rates is None else {BATCHES_INDEX: rates.batches_cell(role.role)[1]},
        crash_looping=looping,
    )


def look_key(role: RoleStatus, link_state: str | None) -> tuple[Any, ...]:
    """What of ``role`` its row shows besides figures that move every second (step, loss, step
    time, rates, CPU, RSS, uptime, a countdown): a change here reaches the row on the next frame,
    the figures once a second (:meth:`RolesView.show_status`)."""
    return (
        role.state,
        role.host,
        link_state,
        role.pid,
        role.attempt,
        role.restarts,
        role.returncode,
        role.signal,
        role.stalled,
        role.straggler,
        role.waiting_for,
        role.crash_looping,
        role.last_exit,
        role.last_error,
        role.gpus,
        role.loss_source,
    )


class TextWidths:
    """Texts' widths in one font, each shape measured once: in a font whose ten digits have one
    advance (tabular figures, as UI fonts' are), ``1234`` and ``5678`` are as wide, so a cell whose
    figures change every second is not measured again (a refresh of 257 rows measured ~2,600
    texts, 5-20 ms). In a font without them, each text is measured once."""

    MAX_KEPT = 4096

    def __init__(self, metrics: QtGui.QFontMetrics) -> None:
        self._metrics = metrics
        tabular = len({metrics.horizontalAdvance(d) for d in "0123456789"}) == 1
        self._digits = str.maketrans("123456789", "000000000") if tabular else None
        self._widths: dict[str, int] = {}
        self.measured = 0  # texts measured (for tests)

    def width(self, text: str) -> int:
        key = text.translate(self._digits) if self._digits is not None else text
        width = self._widths.get(key)
        if width is None:
            if len(self._widths) >= self.MAX_KEPT:
                self._widths.clear()
            width = self._widths[key] = self._metrics.horizontalAdvance(text)
            self.measured += 1
        return width


def task_row(task: Task) -> RoleRow:
    """A role of the cluster before a launch."""
    cells = [task.role_id, task.host, "", "not launched", *[""] * (len(COLUMNS) - 5), "-"]
    return RoleRow(task.role_id, task.job, task.host, "not launched", cells, text_keys(cells))


class RolesView(QtWidgets.QWidget):
    """The banner (failed, crash-looping, stalled and waiting roles, with why; *Show log* on the
    roles that died) above the roles table, which can be
    grouped by job or host, filtered and sorted by any column (see :mod:`gui.run.roles_model`).

    Signals: ``sig_selection_changed()`` when the selected roles change (by the user, or as rows
    come and go).
    """

    sig_selection_changed = QtCore.Signal()

    def __init__(self, last_lines: Callable[[str, int], list[str]]) -> None:
        super().__init__()
        self._last_lines = last_lines
        self.banner = TroubleBanner()
        self.model = RolesModel(COLUMNS, STATE_COLUMN)
        self.proxy = RolesProxy(STATE_COLUMN, COLUMNS.index("Host"))
        self.proxy.setSourceModel(self.model)
        self.table = QtWidgets.QTreeView()
        self.table.setModel(self.proxy)
        self.table.setUniformRowHeights(True)  # lets the view skip measuring 65 rows a frame
        self.table.setRootIsDecorated(False)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(-1, QtCore.Qt.SortOrder.AscendingOrder)  # the cluster's order until a click
        self.table.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QtWidgets.QAbstractItemView.SelectionMode.ExtendedSelection)
        self.table.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setContextMenuPolicy(QtCore.Qt.ContextMenuPolicy.ActionsContextMenu)
        header = self.table.header()
        # Not ResizeToContents: that measured every cell of all 65 rows at each frame's change
        # of a 64-worker run; columns are fitted after a reset and widened as a changed cell needs.
        header.setSectionResizeMode(QtWidgets.QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(True)
        self._collapsed: set[str] = set()
        self._shown: dict[str, tuple[tuple[Any, ...], RoleRow]] = {}  # role -> (look_key, row) shown
        self._widths: tuple[QtGui.QFont, TextWidths] | None = None
        self._row_h: tuple[QtGui.QFont, int] | None = None  # (font, a row's height) since the last reset
        self._header_h: tuple[QtGui.QFont, int] | None = None  # (font, the header's height) since the last reset
        self._last_selection: list[str] = []
        self._hidden_selection: list[str] = []
        self.table.selectionModel().selectionChanged.connect(lambda *_: self._on_selection_changed())
        self.table.collapsed.connect(lambda index: self._collapsed.add(index.data(GROUP_ROLE)))
        self.table.expanded.connect(lambda index: self._collapsed.discard(index.data(GROUP_ROLE)))

        self.filter = QtWidgets.QLineEdit()
        self.filter.setPlaceholderText("Filter roles: worker:1, failed, 127.0.0.3 ...")
        self.filter.setClearButtonEnabled(True)
        self.filter.setToolTip(
            "Words a role must all match, in its name, host or state: worker:1 (not worker:10), "
            "worker, failed, stalled, 127.0.0.3"
        )
        self.filter.textChanged.connect(self.set_filter)
        self.group_by = QtWidgets.QComboBox()
        self.group_by.addItems(["No groups", "Group by job", "Group by host"])
        self.group_by.setToolTip("Collapsible group rows, each with its count of roles per state")
        self.group_by.currentIndexChanged.connect(lambda i: self.set_grouping(GROUPINGS[i]))
        self.count = QtWidgets.QLabel()
        bar = QtWidgets.QHBoxLayout()
        bar.setContentsMargins(0, 0, 0, 0)
        bar.addWidget(self.filter, 1)
        bar.addWidget(self.group_by)
        bar.addWidget(self.count)
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.banner)
        layout.addLayout(bar)
        layout.addWidget(self.table)

    def content_height(self, *, cap: int | None = None) -> int:
        """The height that shows the banner, the filter bar and every row without scrolling: the
        window gives the table that much, up to a limit, and the rest to the plots.

        With ``cap``, rows are counted only until the height reaches it (then the answer is at
        least ``cap``): the window asks every frame, and walking all 257 rows of a large run to
        learn that the table is past its share cost 13 % of the GUI thread."""
        table = self.table
        layout = self.layout()
        spacing = layout.spacing() if layout is not None else 0
        banner = self.banner.sizeHint().height() + spacing if self.banner.isVisibleTo(self) else 0
        bar = max(self.filter.sizeHint().height(), self.group_by.sizeHint().height()) + spacing
        frame = 2 * table.frameWidth() + 2
        scroll = table.horizontalScrollBar()
        across = scroll.sizeHint().height() if scroll.maximum() > 0 else 0  # columns wider than the window
        fixed = banner + bar + self._header_height() + frame + across
        proxy = self.proxy
        top_rows = proxy.rowCount()
        row_h = self._row_height() if top_rows else table.fontMetrics().height() + 4
        enough = None if cap is None else max((cap - fixed) // max(row_h, 1) + 1, 1)
        if self.model.grouping == "none":  # no group to open: the rows are the proxy's
            return fixed + max(top_rows if enough is None else min(top_rows, enough), 1) * row_h
        rows = 0
        for row in range(top_rows):
            rows += 1
            index = proxy.index(row, 0)
            if proxy.hasChildren(index) and table.isExpanded(index):
                rows += proxy.rowCount(index)
            if enough is not None and rows >= enough:
                break
        return fixed + max(rows, 1) * row_h

    def _header_height(self) -> int:
        """The header's height, measured again only after a reset or a new font: the header's
        ``sizeHint`` measures every column's title (a model call each), and the window asks for
        the table's height every frame."""
        font = self.table.header().font()
        if self._header_h is None or self._header_h[0] != font:
            self._header_h = (font, self.table.header().sizeHint().height())
        return self._header_h[1]

    def _row_height(self) -> int:
        """A row's height (the rows are uniform), measured again only after a reset or a new
        font: ``sizeHintForRow`` asks the delegate for every cell of a row, and the window asks
        for the table's height every frame."""
        font = self.table.font()
        if self._row_h is None or self._row_h[0] != font:
            self._row_h = (font, self.table.sizeHintForRow(0))
        return self._row_h[1]

    # ------------------------------------------------------------------ selection

    def _index_of(self, role: str) -> QtCore.QModelIndex:
        hits = self.proxy.match(
            self.proxy.index(0, 0), NAME_ROLE, role, 1,
            QtCore.Qt.MatchFlag.MatchExactly | QtCore.Qt.MatchFlag.MatchRecursive,
        )  # fmt: skip
        return hits[0] if hits else QtCore.QModelIndex()

    def select_role(self, role: str) -> None:
        index = self._index_of(role)
        if index.isValid():
            self.table.selectionModel().select(
                index,
                QtCore.QItemSelectionModel.SelectionFlag.ClearAndSelect | QtCore.QItemSelectionModel.SelectionFlag.Rows,
            )
            # NoUpdate: the view's setCurrentIndex reads the keyboard, and with Ctrl held (or left
            # set by the Ctrl+T just sent) it toggled the row just selected off, so the next Ctrl+R
            # restarted no role at all.
            self.table.selectionModel().setCurrentIndex(index, QtCore.QItemSelectionModel.SelectionFlag.NoUpdate)
            self.table.scrollTo(index)

    def selected_roles(self) -> list[str]:
        """The selected roles, top to bottom as shown (group rows are never roles)."""
        rows = self.table.selectionModel().selectedRows()
        rows.sort(key=lambda index: self.table.visualRect(index).top())
        return [name for name in (index.data(NAME_ROLE) for index in rows) if name is not None]

    def _on_selection_changed(self) -> None:
        selected = self.selected_roles()
        if selected != self._last_selection:
            self._last_selection = selected
            self.sig_selection_changed.emit()

    # ------------------------------------------------------------------ grouping, filter, reading

    def set_grouping(self, grouping: str) -> None:
        """``none``, ``job`` or ``host``; the selection and the sort order are kept."""
        if grouping != self.model.grouping:
            self.group_by.setCurrentIndex(GROUPINGS.index(grouping))
            self._keeping_selection(lambda: self.model.set_grouping(grouping))

    def set_filter(self, text: str) -> None:
        if self.filter.text() != text:
            self.filter.setText(text)  # comes back here through textChanged
            return
        # Roles the filter hides lose Qt's selection: remember them, and select them again when a
        # later filter shows them (the logs and placement follow the selection).
        wanted = self.selected_roles() or self._hidden_selection
        scroll = self.table.verticalScrollBar().value()
        self.proxy.set_filter_text(text)
        shown = [name for name in wanted if self._index_of(name).isValid()]
        self._hidden_selection = wanted if len(shown) < len(wanted) else []
        self._restore(shown, scroll)

    def shown_roles(self) -> list[str]:
        """The role rows as the table shows them now (filtered, sorted, groups expanded or not)."""
        names: list[str] = []
        for row in range(self.proxy.rowCount()):
            index = self.proxy.index(row, 0)
            if index.data(NAME_ROLE) is not None:
                names.append(index.data(NAME_ROLE))
            elif self.table.isExpanded(index):
                names += [self.proxy.index(r, 0, index).data(NAME_ROLE) for r in range(self.proxy.rowCount(index))]
        return names

    def shown_groups(self) -> list[str]:
        """The group rows' titles as shown, e.g. ``127.0.0.3: 8 roles (7 running, 1 failed)``."""
        if self.model.grouping == "none":
            return []
        return [self.proxy.index(row, 0).data() for row in range(self.proxy.rowCount())]

    def cell(self, role: str, column: str) -> str:
        """The text of ``role``'s cell in ``column`` (one of :data:`COLUMNS`)."""
        row = next((r for r in self.model.role_rows() if r.name == role), None)
        if row is None:
            raise KeyError(f"no row for {role}")
        return row.cells[COLUMNS.index(column)]

    def state_index(self, role: str) -> QtCore.QModelIndex:
        """The state cell of ``role`` in the view (for its colour, font and tooltip)."""
        index = self._index_of(role)
        return index.siblingAtColumn(STATE_COLUMN) if index.isValid() else index

    # ------------------------------------------------------------------ contents

    def show_tasks(self, tasks: list[Task]) -> None:
        """Before a launch: the cluster's roles, not launched."""
        self.forget_shown()
        self._show_rows([task_row(task) for task in tasks])
        self.banner.hide()

    def forget_shown(self) -> None:
        """The next status builds every row again (another run is shown)."""
        self._shown.clear()

    def show_status(
        self,
        status: ClusterStatus,
        host_states: dict[str, dict[str, Any]],
        rates: StepRates | None = None,
        *,
        part: int = 0,
        parts: int = 1,
    ) -> None:
        """Show ``status``; ``rates``: the run's (:func:`core.views.rates.status_rates`).

        With ``parts`` > 1 (a large run, called every frame), only the roles at ``part``,
        ``part + parts``, ... get their figures again, with every role whose :func:`look_key`
        changed: a refresh of all 257 rows in one frame took 20-40 ms of it and its paint, so
        it is spread over ``parts`` frames, and a role's new state still shows on the next
        (``part`` -1: only the roles whose look changed).
        Every ``parts``-th role, not a block of consecutive ones: with blocks, the table's
        viewport took 30-35 ms of CPU to paint on every frame following 256 simulated workers,
        against ~2 ms with every tenth row (why on every frame was not found)."""
        now = time.time()
        shown = self._shown
        rows: list[RoleRow] = []
        news = False  # a role's look changed: the banner too
        for i, role in enumerate(status.roles):
            link = host_states.get(role.host, {}).get("state")
            key = look_key(role, link)
            old = shown.get(role.role)
            if old is not None and old[0] == key and i % parts != part:
                rows.append(old[1])
                continue
            news = news or old is None or old[0] != key
            row = role_row(role, link, now, rates=rates)
            shown[role.role] = (key, row)
            rows.append(row)
        if len(shown) > len(rows):  # roles gone
            self._shown = {row.name: shown[row.name] for row in rows}
        self._show_rows(rows)
        if news or part == 0:
            self._update_banner(status, now)

    def _show_rows(self, rows: list[RoleRow]) -> None:
        self.model.sort_column = self.proxy.sortColumn()
        if self.model.needs_reset(rows):  # the set of roles changed: put back what can be
            # Read only before a reset: the selection's rows, sorted by where they show, cost a
            # large run's every frame 5-10 ms for nothing while the set of roles stood.
            selected = self.selected_roles()
            scroll = self.table.verticalScrollBar().value()
            self.model.set_rows(rows)
            self._restore(selected, scroll)
            return
        self.model.set_rows(rows)
        self._widen(self.model.changed_cells)
        if self.filter.text():
            self._update_count()  # a role's new state may enter or leave the filter

    def _fit_columns(self) -> None:
        """Every column as wide as its header and widest cell, measured from the rows' texts (not
        ``sizeHintForColumn``, which asks the model for every role of every cell: after a reset
        only, and still the longest thing a regroup did on a loaded machine)."""
        header = self.table.header()
        metrics = self.table.fontMetrics()
        rows = self.model.role_rows()
        for column in range(len(COLUMNS) - 1):  # the last one stretches
            texts = {row.cells[column] for row in rows}
            needed = max((metrics.horizontalAdvance(text) for text in texts), default=0) + CELL_PADDING_PX
            if column == 0 and self.model.grouping != "none":
                needed += self.table.indentation()
            header.resizeSection(column, max(needed, header.sectionSizeHint(column)))

    def _widen(self, cells: list[tuple[int, str]]) -> None:
        """Widen a column whose changed cell no longer fits; never narrows (no jitter)."""
        if not cells:
            return
        header = self.table.header()
        font = self.table.font()
        if self._widths is None or self._widths[0] != font:
            self._widths = (font, TextWidths(self.table.fontMetrics()))
        width = self._widths[1].width
        for column, text in cells:
            if column >= len(COLUMNS) - 1:
                continue
            needed = width(text) + CELL_PADDING_PX
            if column == STATE_COLUMN:  # bold when failed, stalled or waiting
                needed += len(text)
            if needed > header.sectionSize(column):
                header.resizeSection(column, needed)

    def _keeping_selection(self, change: Callable[[], None]) -> None:
        selected = self.selected_roles()
        scroll = self.table.verticalScrollBar().value()
        change()
        self._restore(selected, scroll)

    def _restore(self, selected: list[str], scroll: int) -> None:
        self._after_reset()
        flags = QtCore.QItemSelectionModel.SelectionFlag.Select | QtCore.QItemSelectionModel.SelectionFlag.Rows
        for name in selected:
            index = self._index_of(name)
            if index.isValid():
                self.table.selectionModel().select(index, flags)
        self.table.verticalScrollBar().setValue(scroll)
        self._on_selection_changed()

    def _after_reset(self) -> None:
        """Group rows span the table and open unless the user closed them; the count follows."""
        self._row_h = self._header_h = None
        grouped = self.model.grouping != "none"
        self.table.setRootIsDecorated(grouped)
        for row in range(self.proxy.rowCount() if grouped else 0):
            index = self.proxy.index(row, 0)
            self.table.setFirstColumnSpanned(row, QtCore.QModelIndex(), True)
            self.table.setExpanded(index, index.data(GROUP_ROLE) not in self._collapsed)
        self._fit_columns()
        self._update_count()

    def _update_count(self) -> None:
        total = len(self.model.role_rows())
        if not self.filter.text():
            self.count.setText(f"{total} roles")
            return
        parents = [QtCore.QModelIndex()]
        if self.model.grouping != "none":
            parents = [self.proxy.index(row, 0) for row in range(self.proxy.rowCount())]
        shown = sum(self.proxy.rowCount(parent) for parent in parents)
        self.count.setText(f"{shown} of {total} roles")

    def _update_banner(self, status: ClusterStatus, now: float) -> None:
        lines: list[BannerLine] = []
        for role in status.roles:  # a role that died, with why, and a way to its error
            if role.state == RoleState.FAILED:
                text = f"<b>{role.role} failed</b>: {html(trouble_text(role, now).removeprefix('failed: '))}"
                if not role.last_error:  # no line of its own says why: its last lines may
                    last = self._last_lines(role.role, 3)
                    if last:
                        text += "<br><tt>" + "<br>".join(html(line) for line in last) + "</tt>"
                lines.append(BannerLine(role.role, text, "failed", show_log=True))
        for role in status.roles:
            if crash_looping(role):
                lines.append(BannerLine(role.role, crash_banner(role, now), "crash-looping", show_log=True))
        for r in status.roles:
            if r.stalled and r.state == RoleState.RUNNING and not crash_looping(r):
                lines.append(
                    BannerLine(
                        r.role,
                        f"<b>{r.role} is stalled</b>: no new training step for {fmt_duration(r.stalled_for_s or 0)} "
                        f"(last step {r.step}). Hung? Select it and kill (Ctrl+K) or restart (Ctrl+R).",
                    )
                )
        for r in status.roles:  # who waits for whom, and the fix
            if r.waiting_for and r.state == RoleState.RUNNING and not crash_looping(r):
                lines.append(
                    BannerLine(
                        r.role,
                        f"<b>{r.role} is waiting for {r.waiting_for}</b>: {html(r.waiting_message)}"
                        f"<br>Fix: {html(r.waiting_fix)}",
                    )
                )
        self.banner.set_lines(lines)
