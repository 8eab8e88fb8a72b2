"""The main window: the roles table above tabs for training, GPUs, placement and logs.

A view over one :class:`core.controller.session.RunSource`: a live :class:`core.controller.controller.Controller` launched
(or attached) from this window through a :class:`core.controller.session.LaunchSession`, or a
:class:`core.run.reader.RunReader` following a run directory (a past run, or one another TowerDeck
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

from core.cluster.problems import ERROR
from core.cluster.spec import ClusterSpec
from core.controller.controller import Controller
from core.controller.session import LaunchSession, RunSource, SessionError, needs_preflight
from core.preflight.runner import PreflightRun
from core.run.inbox import EventInbox
from core.run.reader import RunDirError, RunReader
from core.run.status import ClusterStatus, Event
from core.telemetry.pci import tf_devices_by_bus
from core.views.overview import PlannedRole
from core.views.slurm_text import slurm_banner
from gui.editor import ClusterEditor
from gui.run.overview import ClusterOverview
from gui.run.roles import RolesView
from gui.run.tabs.gpus import GpuPanel
from gui.run.tabs.logs import LogPanel
from gui.run.tabs.placement import PlacementPanel
from gui.run.tabs.training import TrainingPanel
from gui.runs import runs_page
from gui.runs.exporting import Exporter
from gui.window import actions as window_actions
from gui.window import collector, dialogs, settings
from gui.window.actions import TABS
from gui.window.desktop_notify import DesktopNotifier
from gui.window.preflight import PreflightDialog
from gui.window.tensorboard_action import TensorBoardAction

FRAME_HZ = 10
# A reopened run's backlog of telemetry goes into the views in batches of this many points, for at
# most FRAME_TELEMETRY_S a frame, so no frame stalls the window; a live run sends far fewer.
FRAME_TELEMETRY_POINTS: int | None = 2_000
FRAME_TELEMETRY_S = 0.04
SLOW_REFRESH_S = 1.0  # placement tables and TF devices: they change slowly and cost more

Source = RunSource


class MainWindow(QtWidgets.QMainWindow):
    """TowerDeck's window for one cluster, or one run directory."""

    # Built by gui.window.actions.build_actions / add_editor_actions.
    action_attach: QtGui.QAction
    action_kill: QtGui.QAction
    action_kill_all: QtGui.QAction
    action_launch: QtGui.QAction
    action_open_run: QtGui.QAction
    action_preflight: QtGui.QAction
    action_quit: QtGui.QAction
    action_restart: QtGui.QAction
    action_restart_all: QtGui.QAction
    action_show_editor: QtGui.QAction
    action_show_log: QtGui.QAction
    action_show_run: QtGui.QAction
    action_stop: QtGui.QAction
    action_stop_all: QtGui.QAction
    tab_actions: list[QtGui.QAction]
    file_menu: QtWidgets.QMenu
    recent_runs_menu: QtWidgets.QMenu
    view_menu: QtWidgets.QMenu
    phase_label: QtWidgets.QLabel
    compare_views: list[QtWidgets.QWidget]

    def __init__(
        self, spec: ClusterSpec | None, runs_root: Path | None = None, cluster_path: Path | None = None
    ) -> None:
        super().__init__()
        # Python's collector runs on this thread only while the window exists (gui/window/collector.py).
        self._gc_hold = collector.hold()
        self.destroyed.connect(self._gc_hold.release)
        self.spec = spec
        self.runs_root = runs_root
        self.source: Source | None = None
        self.session: LaunchSession | None = None  # when this window runs the cluster
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
        self.slurm_text = ""  # "Slurm job J on NODES" for a run on Slurm (issue 12)
        # "stop" or "leave" answers the closing question ahead (scripts, --screenshot, tests).
        self.close_choice: str | None = os.environ.get("TOWERDECK_CLOSE_CHOICE") or None
        self._preflight_job: Future[list[Any]] | None = None
        self._preflight_run = PreflightRun()  # cancelled on close: the probes (and ssh) are killed
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
        settings.restore_layout(self, self.split, self.tabs)
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
        session = self.session
        return session.controller if session is not None and self.source is session.controller else None

    # ------------------------------------------------------------------ layout

    def _build(self) -> None:
        window_actions.build_actions(self)
        self.roles = RolesView(lambda role, n: self.logs.last_lines(role, n))
        self.banner, self.table = self.roles.banner, self.roles.table
        for action in (self.action_stop, self.action_restart, self.action_kill, self.action_show_log):
            self.table.addAction(action)
        self.roles.sig_selection_changed.connect(self._on_selection_changed)
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

        self.split = QtWidgets.QSplitter(QtCore.Qt.Orientation.Vertical)
        self.split.setObjectName("main-split")
        # The cluster at a glance above the table: hosts as boxes, roles as tiles by state; a click
        # selects the role everywhere (table, logs, placement).
        self.overview = ClusterOverview()
        self.overview.sig_role_selected.connect(self.select_role)
        overview_scroll = QtWidgets.QScrollArea()
        overview_scroll.setWidgetResizable(True)
        overview_scroll.setWidget(self.overview)
        self.split.addWidget(overview_scroll)
        self.split.addWidget(self.roles)
        self.split.addWidget(self.tabs)
        self.split.setSizes([150, 200, 450])
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
        window_actions.add_editor_actions(self)
        self.exporter = Exporter(self)  # issue 23: File > Export plot / run figures as CSV
        self.desktop_notifier = DesktopNotifier(self)
        self.tensorboard = TensorBoardAction(self)  # File > Open in TensorBoard
        self.runs_page = runs_page.install(self)  # issue 23: the Runs page and compare views

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
        if self.source is not None and not self.source.controls_here:
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
        if needs_preflight(self.spec) and not self._preflight_passed:
            self.check_hosts(launch_after=True)  # remote hosts: the pre-flight first, off this thread
            return
        self._preflight_passed = False
        self._close_source()
        # `python main.py ctl` and another window can act on this run, through an owner-only socket.
        session = LaunchSession.launch(self.spec, root=self.runs_root, who="window")
        run = session.run
        self._reset_panels()
        session.subscribe(self.inbox.put)  # the controller's events and the [notify] reports
        self.session, self.source = session, session.controller
        session.start()
        self.editor.set_running(True)
        self.pages.setCurrentWidget(self.monitor)
        self._set_title()
        self.statusBar().showMessage(f"run directory: {run.path}")
        settings.remember_run(run.path)
        self._refresh_table()
        workers = [r for r in self.spec.role_ids() if r.split(":")[0] in ("chief", "worker")]
        if workers and not self.selected_roles():
            self.select_role(workers[0])

    def open_run(self, path: Path) -> bool:
        """Show a run directory: a past run, or one that another TowerDeck process runs."""
        if self.source is not None and not self.source.done and self.source.controls_here:
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
        self.tensorboard.stop()  # issue 23: its TensorBoard goes with the run it showed
        if self.session is not None:
            self.session.close(notify_wait_s=0)  # its notifier thread finishes on its own
            self.session = None
        if self.source is not None:
            self.source.release()
        self.source = None

    def _reset_panels(self) -> None:
        self.inbox.drain()
        self.training.clear()
        self.gpus.clear()
        self.logs.clear()
        self.warnings.clear()
        self.warning_label.setText("")
        self.slurm_text = ""
        self._last_status = None

    # ------------------------------------------------------------------ actions

    def select_role(self, role: str) -> None:
        self.roles.select_role(role)

    def selected_roles(self) -> list[str]:
        return self.roles.selected_roles()

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
            fn(self.source).add_done_callback(functools.partial(_report_refusal, self.inbox))

    def _on_role_action(self, action: str) -> None:
        if self.source is None or self.source.done:
            return
        for role in self.selected_roles():
            future: Future[str] = getattr(self.source, f"{action}_role")(role)
            future.add_done_callback(functools.partial(_report_refusal, self.inbox))

    # ------------------------------------------------------------------ frame

    def _on_frame(self) -> None:
        deadline = time.monotonic() + FRAME_TELEMETRY_S
        while True:
            events, output = self.inbox.drain(FRAME_TELEMETRY_POINTS)
            for event in events:
                self._dispatch(event)
            for role, text in output.items():
                self.logs.add_output(role, text)
            if not events or time.monotonic() >= deadline:
                break
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
        self.desktop_notifier.on_event(event)  # issue 23: the system tray, when not the active window
        if kind == "metrics" and event.role:
            self.training.add_samples(event.role, data.get("samples") or [])
        elif kind == "scalars" and event.role:
            self.training.add_scalars(event.role, data.get("points") or [])
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
        elif kind == "slurm":
            self.slurm_text = slurm_banner(data)
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
        known = self.spec is not None and not self.spec.has_counted() and role in self.spec.role_ids()
        task = self.spec.task(role) if self.spec is not None and known else None
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
                self._devices_job = self._background.submit(tf_devices_by_bus, source.placement, roles)

    def _refresh_table(self) -> None:
        if self.source is None:
            self.phase_label.setText("not launched")
            # explicit_tasks: a counted job (tasks = N on Slurm) has no host before its launch
            tasks = self.spec.explicit_tasks() if self.spec else []
            self.roles.show_tasks(tasks)
            # A counted job's roles (no host until the allocation places them) under "Slurm".
            planned = self.spec.planned_tasks() if self.spec else []
            self.overview.set_roles([PlannedRole(t.role_id, t.job, t.host or "Slurm") for t in planned])
            self._update_actions(None)
            self._sync_role_lists([t.role_id for t in tasks])
            return
        status = self.source.status()
        self._last_status = status
        phase = f"cluster {status.phase}"
        if status.result:
            phase += f": {status.result} ({status.reason})"
        if not self.source.controls_here:
            phase = ("live run: " if not self.source.done else "past run: ") + phase
        if self.slurm_text:
            phase += f"  |  {self.slurm_text}"
        self.phase_label.setText(phase)
        self._update_actions(status)
        self.roles.show_status(status, self.host_states)
        self.overview.set_roles(status.roles)
        self.training.set_status(status.roles)
        self._sync_role_lists([r.role for r in status.roles])

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

    def _on_selection_changed(self) -> None:
        roles = self.selected_roles()
        self.overview.select_role(roles[0] if roles else None)
        if roles:
            self.logs.show_role(roles[0])
            self.placement.set_role(roles[0])

    # ------------------------------------------------------------------ settings and closing

    # ------------------------------------------------------------------ attach and pre-flight

    def _attachable(self) -> bool:
        """An opened run whose launcher is gone, but which did not end: its roles may run on."""
        return self.source is not None and self.source.attachable

    def attach(self) -> bool:
        """Take over the opened run: reconnect to its agents and control it from this window."""
        if not self._attachable():
            return False
        assert self.source is not None
        path, spec = self.source.path, self.source.spec
        try:
            session = LaunchSession.attach(path, spec, who="window")
        except SessionError as exc:
            QtWidgets.QMessageBox.warning(self, "TowerDeck", str(exc))
            return False
        self._close_source()
        self._reset_panels()
        self.spec = spec
        session.subscribe(self.inbox.put)  # the controller's events and the [notify] reports
        self.session, self.source = session, session.controller
        session.start()
        self.editor.set_running(True)
        self._set_title()
        self.statusBar().showMessage(f"attached to {path}")
        return True

    def check_hosts(self, launch_after: bool = False) -> None:
        """Pre-flight every host of the form's cluster on a background thread; show a table."""
        spec = self.editor.current_spec() or self.spec
        if spec is None or self._preflight_job is not None:
            return
        from core.preflight.runner import preflight

        self._launch_after_preflight = launch_after
        self._preflight_job = self._background.submit(preflight, spec, 60.0, True, run=self._preflight_run)
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
            warnings = [f"{r.host}: {c.detail}" for r in self.preflight_results for c in r.warnings]
            self.statusBar().showMessage(
                "every host is ready; launching" + (f" (warning: {'; '.join(warnings)})" if warnings else "")
            )
            self.launch()
            return
        dialog = PreflightDialog(self, self.preflight_results)
        dialog.setAttribute(QtCore.Qt.WidgetAttribute.WA_DeleteOnClose)  # one per check, not kept
        dialog.open()

    def closeEvent(self, event: QtGui.QCloseEvent) -> None:
        if self.controller is not None and not self.controller.done:
            choice = self.close_choice or dialogs.ask_close_choice(self)
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
        settings.save_layout(self, self.split, self.tabs)
        self.timer.stop()
        self._close_source()
        self._preflight_run.cancel()  # Python joins the pool's thread at exit: never wait on an ssh
        self._background.shutdown(wait=False, cancel_futures=True)
        self._gc_hold.release()
        event.accept()


def _report_refusal(inbox: EventInbox, future: Future[str]) -> None:
    """A refused action, on the source's thread: to the GUI thread through the inbox. It holds the
    inbox only, never the window, so the future's last reference never releases a Qt object there."""
    exc = future.exception()
    if exc is not None:
        inbox.put(Event("warning", time.time(), None, {"message": str(exc)}))
