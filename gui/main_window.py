"""The main window: the roles table above tabs for training, GPUs, placement and logs.

A view over one *source*: a live :class:`core.controller.Controller` launched from this window, or
a :class:`core.replay.RunReader` following a run directory (a past run, or one another TowerDeck
process runs). The GUI thread never waits on a process, pipe, socket or file: the source runs on
its own thread, its events land in an :class:`EventInbox`, and a QTimer drains them and redraws at
most ``FRAME_HZ`` times a second, only the tab that is on screen.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from PySide6 import QtCore, QtGui, QtWidgets

from core import control
from core.controller import ClusterStatus, Controller, Event, RoleState, RoleStatus
from core.problems import ERROR
from core.replay import RunDirError, RunReader
from core.rundir import RunDir
from core.spec import ClusterSpec
from gui import settings
from gui.bridge import EventInbox
from gui.editor import ClusterEditor
from gui.panels.gpus import GpuPanel, normalize_bus_id
from gui.panels.logs import LogPanel
from gui.panels.placement import PlacementPanel
from gui.panels.training import TrainingPanel
from gui.preflight import PreflightDialog

FRAME_HZ = 10
SLOW_REFRESH_S = 1.0  # placement tables and TF devices: they change slowly and cost more

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
FAILED_ROW = QtGui.QColor("#fde2e2")
STALLED_COLOUR = "#b45309"
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
TABS = ("Training", "GPUs", "Placement", "Logs")

Source = Controller | RunReader


def _fmt_bytes(n: int | None) -> str:
    return "" if n is None else f"{n / 2**20:.0f} MiB"


def _fmt_uptime(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 3600:
        return f"{seconds // 60}:{seconds % 60:02d}"
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


class MainWindow(QtWidgets.QMainWindow):
    """TowerDeck's window for one cluster, or one run directory."""

    def __init__(
        self, spec: ClusterSpec | None, runs_root: Path | None = None, cluster_path: Path | None = None
    ) -> None:
        super().__init__()
        self.spec = spec
        self.runs_root = runs_root
        self.source: Source | None = None
        self.control_server: control.ControlServer | None = None
        self.inbox = EventInbox()
        self._closing = False
        self._last_slow_refresh = 0.0
        self._last_status: ClusterStatus | None = None
        self.warnings: list[str] = []
        # Slow reads of the source (placement summaries) run here, never on the GUI thread.
        self._background = ThreadPoolExecutor(max_workers=1, thread_name_prefix="window-reads")
        self._placement_job: tuple[Future[dict[str, Any]], str, bool] | None = None
        self._devices_job: Future[dict[str, list[str]]] | None = None
        self._next_spec: ClusterSpec | None = None
        self.host_states: dict[str, dict[str, Any]] = {}  # latest host_state per host (SSH links)
        # "stop" or "leave" answers the closing question ahead (scripts, --screenshot, tests).
        self.close_choice: str | None = os.environ.get("TOWERDECK_CLOSE_CHOICE") or None
        self._preflight_job: Future[list[Any]] | None = None
        self._preflight_passed = False
        self._launch_after_preflight = False
        self.preflight_results: list[Any] = []
        self.resize(1280, 800)
        self._build()
        self._set_title()
        self.timer = QtCore.QTimer(self)
        self.timer.setInterval(1000 // FRAME_HZ)
        self.timer.timeout.connect(self._on_frame)
        self.timer.start()
        self._restore_layout()
        if cluster_path is not None:
            self.editor.open_file(cluster_path)  # keeps job-level settings as the file writes them
        elif spec is not None:
            self.editor.set_spec(spec)
        else:
            self.editor.new_cluster()
        self.spec = spec if spec is not None else self.editor.current_spec()
        self.pages.setCurrentWidget(self.monitor if spec is not None else self.editor)
        self._refresh_table()

    @property
    def controller(self) -> Controller | None:
        """The live controller when this window launched the cluster (None otherwise)."""
        return self.source if isinstance(self.source, Controller) else None

    # ------------------------------------------------------------------ layout

    def _build(self) -> None:
        self._build_actions()
        self.banner = QtWidgets.QLabel()
        self.banner.setWordWrap(True)
        self.banner.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        self.banner.setStyleSheet("QLabel { background: #fde2e2; color: #7f1d1d; padding: 6px; }")
        self.banner.hide()

        self.table = QtWidgets.QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.setContextMenuPolicy(QtCore.Qt.ContextMenuPolicy.ActionsContextMenu)
        for action in (self.action_stop, self.action_restart, self.action_kill, self.action_show_log):
            self.table.addAction(action)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QtWidgets.QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        self.table.itemSelectionChanged.connect(self._on_selection_changed)
        self.table.doubleClicked.connect(lambda _index: self.show_log())

        self.training = TrainingPanel()
        self.gpus = GpuPanel()
        self.placement = PlacementPanel()
        self.logs = LogPanel()
        self.placement.sig_role_changed.connect(lambda _role: self._refresh_placement())
        self.tabs = QtWidgets.QTabWidget()
        for panel, name in zip((self.training, self.gpus, self.placement, self.logs), TABS, strict=True):
            self.tabs.addTab(panel, name)
        self.tabs.currentChanged.connect(lambda _i: self._refresh_visible(force=True))

        self.editor = ClusterEditor(settings=settings.store())
        self.editor.sig_spec_changed.connect(self._on_editor_spec_changed)
        self.editor.sig_path_changed.connect(self._on_editor_path_changed)

        top = QtWidgets.QWidget()
        top_layout = QtWidgets.QVBoxLayout(top)
        top_layout.setContentsMargins(0, 0, 0, 0)
        top_layout.addWidget(self.banner)
        top_layout.addWidget(self.table)
        self.split = QtWidgets.QSplitter(QtCore.Qt.Orientation.Vertical)
        self.split.setObjectName("main-split")
        self.split.addWidget(top)
        self.split.addWidget(self.tabs)
        self.split.setSizes([230, 570])
        self.monitor = self.split
        # Two pages: the cluster as a form, and the run (roles above, telemetry tabs below).
        self.pages = QtWidgets.QTabWidget()
        self.pages.setDocumentMode(True)
        self.pages.addTab(self.editor, "Cluster")
        self.pages.addTab(self.monitor, "Run")
        self.setCentralWidget(self.pages)
        # Warnings (disk full, a lost host, a refused action) stay countable after the status
        # bar message has gone: the label lists the latest in its tooltip.
        self.warning_label = QtWidgets.QLabel("")
        self.warning_label.setStyleSheet("QLabel { color: #b45309; font-weight: bold; }")
        self.statusBar().addPermanentWidget(self.warning_label)
        self._add_editor_actions()

    def _build_actions(self) -> None:
        def action(text: str, slot: Callable[[], Any], shortcut: str = "", tip: str = "") -> QtGui.QAction:
            a = QtGui.QAction(text, self)
            a.triggered.connect(lambda _checked=False: slot())
            if shortcut:
                a.setShortcut(QtGui.QKeySequence(shortcut))
                a.setToolTip(f"{tip or text} ({shortcut})")
            elif tip:
                a.setToolTip(tip)
            return a

        self.action_launch = action("Launch", self.launch, "Ctrl+L", "Launch every role of the cluster")
        self.action_stop_all = action("Stop all", self.stop_all, "Ctrl+Shift+S", "Stop every role")
        self.action_restart_all = action("Restart all", lambda: self._act(lambda s: s.restart_all()), "Ctrl+Shift+R")
        self.action_kill_all = action("Kill all", lambda: self._act(lambda s: s.kill_all()), "Ctrl+Shift+K")
        self.action_stop = action(
            "Stop role", lambda: self._on_role_action("stop"), "Ctrl+T", "Stop the selected roles"
        )
        self.action_restart = action("Restart role", lambda: self._on_role_action("restart"), "Ctrl+R")
        self.action_kill = action(
            "Kill role", lambda: self._on_role_action("kill"), "Ctrl+K", "SIGKILL the selected roles"
        )
        self.action_show_log = action("Show log", self.show_log, "Ctrl+G", "Show the selected role's output")
        self.action_open_run = action("Open run directory...", self.choose_run, "Ctrl+Shift+O")
        self.action_attach = action(
            "Attach to this run",
            self.attach,
            "Ctrl+Shift+A",
            "Take over a run whose launcher is gone while its roles still run (they were left running)",
        )
        self.action_preflight = action(
            "Check hosts",
            self.check_hosts,
            "Ctrl+Shift+P",
            "Pre-flight every host: SSH, python, TensorFlow, paths, ports",
        )
        self.action_quit = action("Quit", self.close, "Ctrl+Q")
        self.tab_actions: list[QtGui.QAction] = []
        for i, name in enumerate(TABS):
            self.tab_actions.append(action(name, functools.partial(self._show_tab, i), f"Ctrl+{i + 1}"))

        menu = self.menuBar()
        self.file_menu = menu.addMenu("&File")
        self.file_menu.addAction(self.action_open_run)
        self.file_menu.addAction(self.action_attach)
        self.recent_runs_menu = self.file_menu.addMenu("Recent runs")
        self.recent_runs_menu.aboutToShow.connect(self._fill_recent_runs)
        self.file_menu.addSeparator()
        self.file_menu.addAction(self.action_quit)
        cluster = menu.addMenu("&Cluster")
        for a in (self.action_launch, self.action_stop_all, self.action_restart_all, self.action_kill_all):
            cluster.addAction(a)
        cluster.addSeparator()
        cluster.addAction(self.action_preflight)
        role = menu.addMenu("&Role")
        for a in (self.action_stop, self.action_restart, self.action_kill, self.action_show_log):
            role.addAction(a)
        view = menu.addMenu("&View")
        for a in self.tab_actions:
            view.addAction(a)
        self.view_menu = view

        bar = self.addToolBar("Cluster")
        bar.setObjectName("cluster-toolbar")
        bar.setToolButtonStyle(QtCore.Qt.ToolButtonStyle.ToolButtonTextOnly)
        for a in (self.action_launch, self.action_stop_all, self.action_restart_all):
            bar.addAction(a)
        bar.addSeparator()
        for a in (self.action_stop, self.action_restart, self.action_kill, self.action_show_log):
            bar.addAction(a)
        bar.addSeparator()
        self.phase_label = QtWidgets.QLabel("not launched")
        self.phase_label.setContentsMargins(12, 0, 12, 0)
        bar.addWidget(self.phase_label)

    def _add_editor_actions(self) -> None:
        editor = self.editor
        first = self.file_menu.actions()[0]
        for a in (editor.action_new, editor.action_open, editor.action_save, editor.action_save_as):
            self.file_menu.insertAction(first, a)
        self.file_menu.insertMenu(first, editor.recent_menu).setText("Recent cluster files")
        self.file_menu.insertAction(first, editor.action_paste)
        self.file_menu.insertSeparator(first)
        self.action_show_editor = QtGui.QAction("Cluster (edit)", self)
        self.action_show_editor.setShortcut(QtGui.QKeySequence("Ctrl+E"))
        self.action_show_editor.triggered.connect(lambda _c=False: self.pages.setCurrentWidget(self.editor))
        self.action_show_run = QtGui.QAction("Run (roles and telemetry)", self)
        self.action_show_run.setShortcut(QtGui.QKeySequence("Ctrl+M"))
        self.action_show_run.triggered.connect(lambda _c=False: self.pages.setCurrentWidget(self.monitor))
        first_view = self.view_menu.actions()[0]
        self.view_menu.insertAction(first_view, self.action_show_editor)
        self.view_menu.insertAction(first_view, self.action_show_run)
        self.view_menu.insertSeparator(first_view)

    def _on_editor_spec_changed(self, spec: ClusterSpec | None) -> None:
        """The form changed: it is what the next launch uses (a running cluster keeps its own)."""
        if self.source is None:
            self.spec = spec
            self._set_title()
            self._refresh_table()
        else:
            self._next_spec = spec

    def _on_editor_path_changed(self, path: Path | None) -> None:
        if path is not None:
            settings.remember_cluster(path)

    def _set_title(self) -> None:
        if isinstance(self.source, RunReader):
            self.setWindowTitle(f"TowerDeck - run {self.source.path.name}")
        else:
            self.setWindowTitle(f"TowerDeck - {self.spec.name if self.spec else 'new cluster'}")

    # ------------------------------------------------------------------ sources

    def launch(self) -> None:
        """Launch the cluster in the editor: a new run directory and a live controller."""
        if self.source is not None and not self.source.done:
            return
        if self.source is not None or self.spec is None:
            self.spec = self.editor.current_spec()  # the form as it is now, edits included
        blocking = [p for p in self.editor.problems() if p.severity == ERROR]
        if self.spec is None or blocking:
            self.pages.setCurrentWidget(self.editor)
            first = blocking[0].format() if blocking else "the form has errors"
            self.statusBar().showMessage(f"not launched: {first} (all problems are listed under the form)")
            return
        if any(self.spec.host_config(t.host).remote for t in self.spec.tasks()) and not self._preflight_passed:
            self.check_hosts(launch_after=True)  # remote hosts: the pre-flight first, off this thread
            return
        self._preflight_passed = False
        self._close_source()
        run = RunDir.create(self.spec, root=self.runs_root)
        self._reset_panels()
        controller = Controller(self.spec, run)
        controller.subscribe(self.inbox.put)
        # `python main.py ctl` and another window can act on this run, through an owner-only socket.
        self.control_server = control.ControlServer(controller, run.path)
        run.update(control_socket=str(self.control_server.start()))
        self.source = controller
        controller.start()
        self.editor.set_running(True)
        self.pages.setCurrentWidget(self.monitor)
        self._set_title()
        self.statusBar().showMessage(f"run directory: {run.path}")
        settings.remember_run(run.path)
        self._refresh_table()
        workers = [t.role_id for t in self.spec.tasks() if t.job in ("chief", "worker")]
        if workers and not self.selected_roles():
            self.select_role(workers[0])

    def open_run(self, path: Path) -> bool:
        """Show a run directory: a past run, or one that another TowerDeck process runs."""
        if self.source is not None and not self.source.done and isinstance(self.source, Controller):
            QtWidgets.QMessageBox.information(
                self, "TowerDeck", "Stop the running cluster before opening another run in this window."
            )
            return False
        try:
            reader = RunReader(path)
        except RunDirError as exc:
            QtWidgets.QMessageBox.warning(self, "TowerDeck", str(exc))
            return False
        self._close_source()
        self._reset_panels()
        self.spec = reader.spec
        reader.subscribe(self.inbox.put)
        self.source = reader
        reader.start()
        self.editor.set_spec(reader.spec)  # the cluster as launched; Save As keeps a copy
        self.editor.set_running(not reader.done)
        self.pages.setCurrentWidget(self.monitor)
        self._set_title()
        self.statusBar().showMessage(f"run directory: {path}")
        settings.remember_run(path)
        self._refresh_table()
        return True

    def choose_run(self) -> None:
        start = str(self.runs_root) if self.runs_root else ""
        chosen = QtWidgets.QFileDialog.getExistingDirectory(self, "Open a run directory", start)
        if chosen:
            self.open_run(Path(chosen))

    def _fill_recent_runs(self) -> None:
        self.recent_runs_menu.clear()
        runs = settings.recent_runs()
        for path in runs:
            self.recent_runs_menu.addAction(path.name, functools.partial(self.open_run, path))
        if not runs:
            self.recent_runs_menu.addAction("(none yet)").setEnabled(False)

    def _close_source(self) -> None:
        if self.control_server is not None:
            self.control_server.close()
            self.control_server = None
        if isinstance(self.source, RunReader):
            self.source.close()
        self.source = None

    def _reset_panels(self) -> None:
        self.inbox.drain()
        self.training.clear()
        self.gpus.clear()
        self.logs.clear()
        self.warnings.clear()
        self.warning_label.setText("")
        self._last_status = None

    # ------------------------------------------------------------------ actions

    def select_role(self, role: str) -> None:
        for row in range(self.table.rowCount()):
            item = self.table.item(row, 0)
            if item is not None and item.text() == role:
                self.table.selectRow(row)
                return

    def selected_roles(self) -> list[str]:
        rows = sorted({index.row() for index in self.table.selectedIndexes()})
        items = [self.table.item(row, 0) for row in rows]
        return [item.text() for item in items if item is not None]

    def stop_all(self) -> None:
        self._act(lambda s: s.stop_all())

    def _show_tab(self, index: int) -> None:
        self.tabs.setCurrentIndex(index)

    def show_log(self) -> None:
        roles = self.selected_roles()
        if roles:
            self.logs.show_role(roles[0])
        self.tabs.setCurrentWidget(self.logs)

    def _act(self, fn: Callable[[Source], Future[str]]) -> None:
        if self.source is not None and not self.source.done:
            fn(self.source).add_done_callback(self._on_action_done)

    def _on_role_action(self, action: str) -> None:
        if self.source is None or self.source.done:
            return
        for role in self.selected_roles():
            future: Future[str] = getattr(self.source, f"{action}_role")(role)
            future.add_done_callback(self._on_action_done)

    def _on_action_done(self, future: Future[str]) -> None:
        # Runs on the source's thread: hand a refusal to the GUI thread through the inbox.
        exc = future.exception()
        if exc is not None:
            self.inbox.put(Event("warning", time.time(), None, {"message": str(exc)}))

    # ------------------------------------------------------------------ frame

    def _on_frame(self) -> None:
        events, output = self.inbox.drain()
        for event in events:
            self._dispatch(event)
        for role, text in output.items():
            self.logs.add_output(role, text)
        self._refresh_table()
        self._refresh_visible()
        self._poll_preflight()
        if self.editor.is_running and (self.source is None or self.source.done):
            self.editor.set_running(False)
        if self._closing and (self.source is None or self.source.done):
            self._closing = False
            self.close()

    def _dispatch(self, event: Event) -> None:
        kind, data = event.kind, event.data
        if kind == "metrics" and event.role:
            self.training.add_samples(event.role, data.get("samples") or [])
        elif kind == "sample":
            self.gpus.add_sample(data)
        elif kind == "gpu_status":
            self.gpus.set_gpu_status(str(data.get("host")), str(data.get("status")))
        elif kind == "host_state":
            host = str(data.get("host"))
            self.host_states[host] = dict(data)
            state = str(data.get("state"))
            self.gpus.set_link_state(host, state, str(data.get("reason") or ""))
            if state not in ("connected", "connecting"):
                self.statusBar().showMessage(f"host {host}: {state} {data.get('reason') or ''}", 15000)
        elif kind == "warning":
            message = str(data.get("message"))
            self.warnings.append(message)
            del self.warnings[:-100]
            self.warning_label.setText(f"{len(self.warnings)} warning{'s' if len(self.warnings) != 1 else ''}")
            self.warning_label.setToolTip("\n".join(self.warnings[-10:]))
            self.statusBar().showMessage(f"warning: {message}", 15000)

    def _refresh_visible(self, force: bool = False) -> None:
        current = self.tabs.currentWidget()
        if current is self.training:
            self.training.refresh(force=force)
        now = time.monotonic()
        slow_due = force or now - self._last_slow_refresh >= SLOW_REFRESH_S
        if current is self.gpus:
            if slow_due:
                self._refresh_tf_devices()
            self.gpus.refresh()
        if current is self.placement and (slow_due or self._placement_job is not None):
            self._refresh_placement()
        if slow_due:
            self._last_slow_refresh = now

    def _refresh_placement(self) -> None:
        """Ask for the shown role's placement summary off the GUI thread; show the last answer.

        A summary of a large graph sorts up to 100k ops under the controller's lock: that work
        runs on a background thread and the panel takes the result on a later frame.
        """
        job = self._placement_job
        if job is not None and job[0].done():
            self._placement_job = None
            future, role, has_gpu = job
            if future.exception() is None and role == self.placement.role():
                self.placement.show_summary(role, future.result(), has_gpu)
            job = None
        role = self.placement.role()
        if job is not None or self.source is None or not role:
            return
        status = self._last_status
        role_status = next((r for r in status.roles if r.role == role), None) if status else None
        task = self.spec.task(role) if self.spec and role in self.spec.role_ids() else None
        has_gpu = bool((role_status and role_status.gpus) or (task and task.gpus))
        self._placement_job = (self._background.submit(self.source.placement, role), role, has_gpu)

    def _refresh_tf_devices(self) -> None:
        job = self._devices_job
        if job is not None and job.done():
            self._devices_job = None
            if job.exception() is None:
                self.gpus.set_tf_devices(job.result())
        elif job is None and self.source is not None and self._last_status is not None:
            source, roles = self.source, [r.role for r in self._last_status.roles if r.gpus]
            if roles:
                self._devices_job = self._background.submit(_tf_devices, source, roles)

    def _refresh_table(self) -> None:
        if self.source is None:
            self.phase_label.setText("not launched")
            tasks = self.spec.tasks() if self.spec else []
            self.table.setRowCount(len(tasks))
            for r, task in enumerate(tasks):
                self._set_row(r, [task.role_id, task.host, "", "not launched", *[""] * 8, "-"], None)
            self._update_actions(None)
            self._sync_role_lists([t.role_id for t in tasks])
            return
        status = self.source.status()
        self._last_status = status
        phase = f"cluster {status.phase}"
        if status.result:
            phase += f": {status.result} ({status.reason})"
        if isinstance(self.source, RunReader):
            phase = ("live run: " if not self.source.done else "past run: ") + phase
        self.phase_label.setText(phase)
        self._update_actions(status)
        self.table.setRowCount(len(status.roles))
        now = time.time()
        for r, role in enumerate(status.roles):
            alive = role.state in (RoleState.RUNNING, RoleState.STARTING, RoleState.STOPPING)
            uptime = _fmt_uptime(now - role.started_at) if role.started_at and alive else ""
            link = self.host_states.get(role.host, {}).get("state")
            cells = [
                role.role,
                role.host if link in (None, "connected") else f"{role.host} ({link})",
                str(role.pid or ""),
                _state_text(role),
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
        self.training.set_status(status.roles)
        self._sync_role_lists([r.role for r in status.roles])
        self._update_banner(status)

    def _sync_role_lists(self, roles: list[str]) -> None:
        self.logs.set_roles(roles)
        self.placement.set_roles(roles)

    def _update_actions(self, status: ClusterStatus | None) -> None:
        live = self.source is not None and not self.source.done
        # A finished run (launched here or opened) can be launched again from the form.
        self.action_launch.setEnabled(
            not live and self.editor.current_spec() is not None and self._preflight_job is None
        )
        self.action_attach.setEnabled(self._attachable())
        self.action_preflight.setEnabled(self._preflight_job is None)
        for a in (
            self.action_stop_all,
            self.action_restart_all,
            self.action_kill_all,
            self.action_stop,
            self.action_restart,
            self.action_kill,
        ):
            a.setEnabled(live)

    def _update_banner(self, status: ClusterStatus) -> None:
        failed = [r for r in status.roles if r.state == RoleState.FAILED]
        stalled = [r for r in status.roles if r.stalled and r.state == RoleState.RUNNING]
        if not failed and not stalled:
            self.banner.hide()
            return
        parts = [
            f"<b>{r.role} is stalled</b>: no new training step for {_fmt_uptime(r.stalled_for_s or 0)} "
            f"(last step {r.step}). Hung? Select it and kill (Ctrl+K) or restart (Ctrl+R)."
            for r in stalled
        ]
        for role in failed:
            lines = self.logs.last_lines(role.role, 3)
            text = f"<b>{role.role} failed</b>: {_html(role.detail or role.exit_text)}"
            if lines:
                text += "<br><tt>" + "<br>".join(_html(line) for line in lines) + "</tt>"
            parts.append(text)
        self.banner.setText("<br>".join(parts))
        self.banner.show()

    def _set_row(self, row: int, cells: list[str], role: RoleStatus | None) -> None:
        failed = role is not None and role.state == RoleState.FAILED
        for column, text in enumerate(cells):
            item = self.table.item(row, column)
            if item is None:
                item = QtWidgets.QTableWidgetItem()
                self.table.setItem(row, column, item)
            if item.text() != text:
                item.setText(text)
            background = FAILED_ROW if failed else QtGui.QColor(0, 0, 0, 0)
            if item.background().color() != background:
                item.setBackground(background)
            if column == 3 and role is not None:
                stalled = role.stalled and role.state == RoleState.RUNNING
                item.setForeground(QtGui.QColor(STALLED_COLOUR if stalled else STATE_COLOURS[role.state]))
                font = item.font()
                if font.bold() != (failed or stalled):
                    font.setBold(failed or stalled)
                    item.setFont(font)
                item.setToolTip(
                    f"no new step for {_fmt_uptime(role.stalled_for_s or 0)}: hung? Kill it (Ctrl+K) or restart it"
                    if stalled
                    else role.detail
                )

    def _on_selection_changed(self) -> None:
        roles = self.selected_roles()
        if roles:
            self.logs.show_role(roles[0])
            self.placement.set_role(roles[0])

    # ------------------------------------------------------------------ settings and closing

    def _ask_close_choice(self) -> str:
        box = QtWidgets.QMessageBox(self)
        box.setIcon(QtWidgets.QMessageBox.Icon.Question)
        box.setWindowTitle("TowerDeck")
        box.setText("The cluster is still running.")
        box.setInformativeText(
            "Stop every role, or leave the cluster running? A cluster left running keeps writing its "
            "run directory; open it later (File > Open run directory, then Attach) to take it over."
        )
        stop = box.addButton("Stop the cluster", QtWidgets.QMessageBox.ButtonRole.DestructiveRole)
        leave = box.addButton("Leave it running", QtWidgets.QMessageBox.ButtonRole.AcceptRole)
        box.addButton(QtWidgets.QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(stop)
        box.exec()
        clicked = box.clickedButton()
        return "stop" if clicked is stop else "leave" if clicked is leave else "cancel"

    # ------------------------------------------------------------------ attach and pre-flight

    def _attachable(self) -> bool:
        """An opened run whose launcher is gone, but which did not end: its roles may run on."""
        source = self.source
        return isinstance(source, RunReader) and source.done and source.info.get("state") not in (None, "done")

    def attach(self) -> bool:
        """Take over the opened run: reconnect to its agents and control it from this window."""
        if not self._attachable():
            return False
        assert isinstance(self.source, RunReader)
        path, spec = self.source.path, self.source.spec
        try:
            run = RunDir.open(path)
        except (OSError, ValueError) as exc:
            QtWidgets.QMessageBox.warning(self, "TowerDeck", f"cannot attach to {path}: {exc}")
            return False
        self._close_source()
        self._reset_panels()
        self.spec = spec
        controller = Controller(spec, run, attach=True)
        controller.subscribe(self.inbox.put)
        self.control_server = control.ControlServer(controller, run.path)
        run.update(control_socket=str(self.control_server.start()), pid=os.getpid())
        self.source = controller
        controller.start()
        self.editor.set_running(True)
        self._set_title()
        self.statusBar().showMessage(f"attached to {path}")
        return True

    def check_hosts(self, launch_after: bool = False) -> None:
        """Pre-flight every host of the form's cluster on a background thread; show a table."""
        spec = self.editor.current_spec() or self.spec
        if spec is None or self._preflight_job is not None:
            return
        from core.preflight import preflight

        self._launch_after_preflight = launch_after
        self._preflight_job = self._background.submit(preflight, spec, 60.0, True)
        self.statusBar().showMessage("checking hosts (SSH, python, TensorFlow, paths, ports)...")

    def _poll_preflight(self) -> None:
        job = self._preflight_job
        if job is None or not job.done():
            return
        self._preflight_job = None
        exc = job.exception()
        if exc is not None:
            self.statusBar().showMessage(f"the host check failed: {exc}")
            return
        self.preflight_results = job.result()
        ready = all(r.ok for r in self.preflight_results)
        if ready and self._launch_after_preflight:
            self._preflight_passed = True
            self.statusBar().showMessage("every host is ready; launching")
            self.launch()
            return
        PreflightDialog(self, self.preflight_results).open()

    def _restore_layout(self) -> None:
        store = settings.store()
        geometry = store.value("window/geometry")
        if isinstance(geometry, QtCore.QByteArray):
            self.restoreGeometry(geometry)
        state = store.value("window/state")
        if isinstance(state, QtCore.QByteArray):
            self.restoreState(state)
        split = store.value("window/split")
        if isinstance(split, QtCore.QByteArray):
            self.split.restoreState(split)
        tab = store.value("window/tab")
        if tab is not None:
            self.tabs.setCurrentIndex(int(tab))

    def _save_layout(self) -> None:
        store = settings.store()
        store.setValue("window/geometry", self.saveGeometry())
        store.setValue("window/state", self.saveState())
        store.setValue("window/split", self.split.saveState())
        store.setValue("window/tab", self.tabs.currentIndex())
        store.sync()

    def closeEvent(self, event: QtGui.QCloseEvent) -> None:
        if self.controller is not None and not self.controller.done:
            choice = self.close_choice or self._ask_close_choice()
            if choice == "cancel":
                event.ignore()
                return
            # The frame timer closes the window once every role is down, or the agents are left.
            self._closing = True
            if choice == "leave":
                self.controller.detach()
                self.statusBar().showMessage("leaving the cluster running; reattach with File > Open run...")
            else:
                self.controller.stop_all()
                self.statusBar().showMessage("stopping every role before closing...")
            event.ignore()
            return
        self._save_layout()
        self.timer.stop()
        self._close_source()
        self._background.shutdown(wait=False, cancel_futures=True)
        event.accept()


def _state_text(role: RoleStatus) -> str:
    text = str(role.state)
    if role.stalled and role.state == RoleState.RUNNING:
        text += f" (stalled {_fmt_uptime(role.stalled_for_s or 0)})"
    elif role.straggler:
        text += " (straggler)"
    return text


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _tf_devices(source: Source, roles: list[str]) -> dict[str, list[str]]:
    """TensorFlow devices per GPU (by PCI bus id) of ``roles``; runs on a background thread."""
    out: dict[str, list[str]] = {}
    for role in roles:
        for device in source.placement(role).get("devices") or []:
            bus = normalize_bus_id(device.get("pci_bus_id"))
            if bus:
                out.setdefault(bus, []).append(f"{role} {device.get('device', '')}")
    return out
