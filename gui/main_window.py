"""The main window: roles with their state and figures, loss curves, logs.

A view over one :class:`core.controller.Controller`. The GUI thread never waits on a process,
pipe or file: the controller runs on its own thread, its events land in an :class:`EventInbox`,
and a QTimer drains them and redraws at most ``FRAME_HZ`` times a second.
"""

from __future__ import annotations

import collections
from pathlib import Path

import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from core.controller import ClusterPhase, Controller, RoleState, RoleStatus
from core.rundir import RunDir
from core.spec import ClusterSpec
from core.telemetry.series import Series
from gui.bridge import EventInbox

FRAME_HZ = 10
LOG_BLOCKS = 5000  # lines the log view keeps; the run directory keeps everything
ROLE_TEXT_CHARS = 512 * 1024  # per role, for switching the log view between roles

STATE_COLOURS = {
    RoleState.PENDING: "#8a8a8a",
    RoleState.STARTING: "#c9a227",
    RoleState.RUNNING: "#2e9d4f",
    RoleState.BACKOFF: "#d9822b",
    RoleState.STOPPING: "#c9a227",
    RoleState.SUCCEEDED: "#2b6cb0",
    RoleState.FAILED: "#d03b3b",
    RoleState.STOPPED: "#6b6b6b",
}
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
    "CPU",
    "RSS",
    "GPUs",
)


def _fmt_bytes(n: int | None) -> str:
    return "" if n is None else f"{n / 2**20:.0f} MiB"


class MainWindow(QtWidgets.QMainWindow):
    """TowerDeck's window for one cluster."""

    def __init__(self, spec: ClusterSpec, runs_root: Path | None = None) -> None:
        super().__init__()
        self.spec = spec
        self.runs_root = runs_root
        self.controller: Controller | None = None
        self.inbox = EventInbox()
        self.loss_series: dict[str, Series] = {}
        self.role_text: dict[str, collections.deque[str]] = {}
        self._closing = False
        self.setWindowTitle(f"TowerDeck - {spec.name}")
        self.resize(1280, 800)
        self._build()
        self.timer = QtCore.QTimer(self)
        self.timer.setInterval(1000 // FRAME_HZ)
        self.timer.timeout.connect(self._on_frame)
        self.timer.start()
        self._refresh_table()

    # ------------------------------------------------------------------ layout

    def _build(self) -> None:
        bar = self.addToolBar("Cluster")
        bar.setObjectName("cluster-toolbar")
        self.action_launch = bar.addAction("Launch", self.launch)
        self.action_launch.setShortcut(QtGui.QKeySequence("Ctrl+L"))
        self.action_stop_all = bar.addAction("Stop all", self.stop_all)
        self.action_stop_all.setShortcut(QtGui.QKeySequence("Ctrl+Shift+S"))
        self.action_restart_all = bar.addAction("Restart all", lambda: self._act(lambda c: c.restart_all()))
        bar.addSeparator()
        self.action_stop = bar.addAction("Stop role", lambda: self._on_role_action("stop"))
        self.action_restart = bar.addAction("Restart role", lambda: self._on_role_action("restart"))
        self.action_kill = bar.addAction("Kill role", lambda: self._on_role_action("kill"))
        self.phase_label = QtWidgets.QLabel("not launched")
        self.phase_label.setContentsMargins(12, 0, 12, 0)
        bar.addSeparator()
        bar.addWidget(self.phase_label)

        self.table = QtWidgets.QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QtWidgets.QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        self.table.itemSelectionChanged.connect(self._on_selection_changed)

        self.plot = pg.PlotWidget(title="Loss by step")
        self.plot.setBackground("w")
        self.plot.showGrid(x=True, y=True, alpha=0.3)
        self.plot.setLabel("bottom", "global step")
        self.plot.setLabel("left", "loss")
        self.plot.getAxis("left").enableAutoSIPrefix(False)
        self.plot.addLegend()
        self.curves: dict[str, pg.PlotDataItem] = {}

        self.log_view = QtWidgets.QPlainTextEdit()
        self.log_view.setReadOnly(True)
        self.log_view.setMaximumBlockCount(LOG_BLOCKS)
        self.log_view.setFont(QtGui.QFontDatabase.systemFont(QtGui.QFontDatabase.SystemFont.FixedFont))
        self.log_title = QtWidgets.QLabel("Select a role to see its output")

        log_box = QtWidgets.QWidget()
        log_layout = QtWidgets.QVBoxLayout(log_box)
        log_layout.setContentsMargins(0, 0, 0, 0)
        log_layout.addWidget(self.log_title)
        log_layout.addWidget(self.log_view)

        bottom = QtWidgets.QSplitter(QtCore.Qt.Orientation.Horizontal)
        bottom.addWidget(self.plot)
        bottom.addWidget(log_box)
        bottom.setSizes([640, 640])
        split = QtWidgets.QSplitter(QtCore.Qt.Orientation.Vertical)
        split.addWidget(self.table)
        split.addWidget(bottom)
        split.setSizes([260, 540])
        self.setCentralWidget(split)
        self.statusBar().showMessage(
            f"{len(self.spec.tasks())} roles; strategy {self.spec.strategy}; launch style {self.spec.launch_style}"
        )

    # ------------------------------------------------------------------ actions

    def launch(self) -> None:
        if self.controller is not None and not self.controller.done:
            return
        run = RunDir.create(self.spec, root=self.runs_root)
        self.loss_series.clear()
        self.role_text.clear()
        for curve in self.curves.values():
            self.plot.removeItem(curve)
        self.curves.clear()
        self.controller = Controller(self.spec, run)
        self.controller.subscribe(self.inbox.put)
        self.controller.start()
        self.statusBar().showMessage(f"run directory: {run.path}")
        workers = [t.role_id for t in self.spec.tasks() if t.job in ("chief", "worker")]
        self._refresh_table()
        if workers and not self.selected_roles():
            self.select_role(workers[0])

    def select_role(self, role: str) -> None:
        for row in range(self.table.rowCount()):
            item = self.table.item(row, 0)
            if item is not None and item.text() == role:
                self.table.selectRow(row)
                return

    def stop_all(self) -> None:
        self._act(lambda c: c.stop_all())

    def _act(self, fn: object) -> None:
        if self.controller is not None and not self.controller.done:
            future = fn(self.controller)  # type: ignore[operator]
            future.add_done_callback(lambda f: None)

    def selected_roles(self) -> list[str]:
        rows = sorted({index.row() for index in self.table.selectedIndexes()})
        items = [self.table.item(row, 0) for row in rows]
        return [item.text() for item in items if item is not None]

    def _on_role_action(self, action: str) -> None:
        if self.controller is None or self.controller.done:
            return
        for role in self.selected_roles():
            getattr(self.controller, f"{action}_role")(role)

    # ------------------------------------------------------------------ frame

    def _on_frame(self) -> None:
        events, output = self.inbox.drain()
        for event in events:
            if event.kind == "metrics" and event.role:
                series = self.loss_series.setdefault(event.role, Series(capacity=4096))
                for sample in event.data["samples"]:
                    if sample.get("step") is not None and sample.get("loss") is not None:
                        series.append(float(sample["step"]), float(sample["loss"]))
            elif event.kind == "warning":
                self.statusBar().showMessage(f"warning: {event.data.get('message')}", 10000)
        selected = self.selected_roles()
        for role, text in output.items():
            buffer = self.role_text.setdefault(role, collections.deque())
            buffer.append(text)
            while sum(len(t) for t in buffer) > ROLE_TEXT_CHARS and len(buffer) > 1:
                buffer.popleft()
            if selected[:1] == [role]:
                self._append_log(text)
        if any(e.kind == "metrics" for e in events):
            self._redraw_plot()
        self._refresh_table()
        if self._closing and (self.controller is None or self.controller.done):
            self._closing = False
            self.close()

    def _append_log(self, text: str) -> None:
        if not text:
            return
        lines = [line.rsplit("\r", 1)[-1] for line in text.rstrip("\n").split("\n")]
        self.log_view.appendPlainText("\n".join(lines))
        bar = self.log_view.verticalScrollBar()
        bar.setValue(bar.maximum())  # follow the newest output

    def _redraw_plot(self) -> None:
        palette = [pg.intColor(i, hues=8) for i in range(8)]
        for i, (role, series) in enumerate(sorted(self.loss_series.items())):
            x, mean, _, _ = series.points(max_points=2000)
            curve = self.curves.get(role)
            if curve is None:
                curve = self.plot.plot(pen=pg.mkPen(palette[i % 8], width=2), name=role)
                curve.setDownsampling(auto=True, method="peak")
                curve.setClipToView(True)
                self.curves[role] = curve
            curve.setData(x, mean)

    def _refresh_table(self) -> None:
        if self.controller is None:
            tasks = self.spec.tasks()
            self.table.setRowCount(len(tasks))
            for r, task in enumerate(tasks):
                self._set_row(
                    r, [task.role_id, task.host, "", "not launched", "", "", "", "", "", "", "", "", ""], None
                )
            return
        status = self.controller.status()
        phase = f"cluster {status.phase}"
        if status.result:
            phase += f": {status.result} ({status.reason})"
        self.phase_label.setText(phase)
        self.action_launch.setEnabled(status.phase in (ClusterPhase.IDLE, ClusterPhase.DONE))
        self.table.setRowCount(len(status.roles))
        now = QtCore.QDateTime.currentSecsSinceEpoch()
        for r, role in enumerate(status.roles):
            uptime = f"{now - role.started_at:.0f} s" if role.started_at and role.state == RoleState.RUNNING else ""
            cells = [
                role.role,
                role.host,
                str(role.pid or ""),
                str(role.state) + (" (straggler)" if role.straggler else ""),
                uptime,
                str(role.restarts),
                role.exit_text,
                "" if role.step is None else str(role.step),
                "" if role.loss is None else f"{role.loss:.4f}",
                "" if role.step_time_s is None else f"{role.step_time_s * 1000:.1f} ms",
                "" if role.cpu_percent is None else f"{role.cpu_percent:.0f}%",
                _fmt_bytes(role.rss_bytes),
                ",".join(str(g) for g in role.gpus) or "-",
            ]
            self._set_row(r, cells, role)

    def _set_row(self, row: int, cells: list[str], role: RoleStatus | None) -> None:
        for column, text in enumerate(cells):
            item = self.table.item(row, column)
            if item is None:
                item = QtWidgets.QTableWidgetItem()
                self.table.setItem(row, column, item)
            if item.text() != text:
                item.setText(text)
            if column == 3 and role is not None:
                item.setForeground(QtGui.QColor(STATE_COLOURS[role.state]))
                if role.state == RoleState.FAILED:
                    item.setToolTip(role.detail)

    def _on_selection_changed(self) -> None:
        roles = self.selected_roles()
        self.log_view.clear()
        if not roles:
            self.log_title.setText("Select a role to see its output")
            return
        self.log_title.setText(f"Output of {roles[0]}")
        self._append_log("".join(self.role_text.get(roles[0], ())))

    # ------------------------------------------------------------------ closing

    def closeEvent(self, event: QtGui.QCloseEvent) -> None:
        if self.controller is not None and not self.controller.done:
            # Stop the roles first; the frame timer closes the window once they are all down.
            self._closing = True
            self.controller.stop_all()
            self.statusBar().showMessage("stopping every role before closing...")
            event.ignore()
            return
        self.timer.stop()
        event.accept()
