"""The main window: the roles table above tabs for training, GPUs, placement and logs.

A view over one :class:`core.controller.session.RunSource`: a live :class:`core.controller.controller.Controller` launched
(or attached) from this window through a :class:`core.controller.session.LaunchSession`, or a
:class:`core.run.reader.RunReader` following a run directory (a past run, or one another TowerDeck
process runs). The GUI thread never waits on a process, pipe, socket or file: the source runs on
its own thread, its events land in an :class:`EventInbox`, and a QTimer drains them and redraws at
most ``FRAME_HZ`` times a second, only the tab that is on screen (:mod:`gui.window.frame`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from PySide6 import QtCore, QtGui, QtWidgets

from core.cluster.spec import ClusterSpec
from core.controller.controller import Controller
from core.controller.session import LaunchSession, RunSource
from core.preflight.runner import PreflightRun
from core.run.inbox import EventInbox
from core.run.status import ClusterStatus
from gui.editor import ClusterEditor
from gui.run.overview import ClusterOverview
from gui.run.roles import RolesView
from gui.run.tabs.gpus import GpuPanel
from gui.run.tabs.logs import LogPanel
from gui.run.tabs.placement import PlacementPanel
from gui.run.tabs.training import TrainingPanel
from gui.window import actions as window_actions
from gui.window import collector, dialogs, runs_install, settings
from gui.window.actions import TABS
from gui.window.desktop_notify import DesktopNotifier
from gui.window.exporting import Exporter
from gui.window.frame import FRAME_HZ, WindowFrame
from gui.window.profile_action import ProfileAction
from gui.window.run_wiring import RunWiring
from gui.window.tensorboard_action import TensorBoardAction
from gui.window.why_action import WhyAction


class MainWindow(WindowFrame, RunWiring):
    """TowerDeck's window for one cluster, or one run directory: its layout, selection and closing
    here; which run it shows in :class:`RunWiring`; each frame's redraw in :class:`WindowFrame`."""

    # Built by gui.window.actions.build_actions / add_editor_actions (the run's own actions and the
    # phase label are declared by WindowFrame, the recent runs menu by RunWiring).
    action_open_run: QtGui.QAction
    action_quit: QtGui.QAction
    action_show_editor: QtGui.QAction
    action_show_log: QtGui.QAction
    action_show_run: QtGui.QAction
    tab_actions: list[QtGui.QAction]
    file_menu: QtWidgets.QMenu
    role_menu: QtWidgets.QMenu
    view_menu: QtWidgets.QMenu
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
        self.source: RunSource | None = None
        self.session: LaunchSession | None = None  # when this window runs the cluster
        self.inbox = EventInbox()
        self._closing = False
        self._backlog_after_frame = False
        self._frame_ended = 0.0
        self._reader_to_start = None
        self._last_slow_refresh = 0.0
        self._last_status: ClusterStatus | None = None
        self._figures_shown: tuple[Any, float] | None = None
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
        self.catch_up_timer = QtCore.QTimer(self)  # more of a backlog between frames (frame.py)
        self.catch_up_timer.setSingleShot(True)
        self.catch_up_timer.setInterval(0)
        self.catch_up_timer.timeout.connect(self._on_catch_up)
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
        self.profiler = ProfileAction(self)  # issue 22: Role > Profile and the Profile tab
        self.why = WhyAction(self)  # issue 22: Role > Why is this worker slow? (uses the Profile tab)
        # issue 22: the same two on the workers the Training tab's spread view names.
        spread = self.training.slowest_menu
        spread.sig_profile_requested.connect(lambda role: self.act_on_role(role, self.profiler.profile_selected))
        spread.sig_why_requested.connect(lambda role: self.act_on_role(role, self.why.ask))
        self.runs_page = runs_install.install(self)  # issue 23: the Runs page and compare views

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

    # ------------------------------------------------------------------ selection and tabs

    def select_role(self, role: str) -> None:
        self.roles.select_role(role)

    def selected_roles(self) -> list[str]:
        return self.roles.selected_roles()

    def act_on_role(self, role: str, act: Callable[[], None]) -> None:
        """Select ``role`` alone, then ``act`` (the Role menu's actions work on the selection)."""
        self.select_role(role)
        if self.selected_roles() != [role]:
            self.statusBar().showMessage(f"{role} is not in this run's roles table", 10000)
            return
        act()

    def show_tab(self, index: int) -> None:
        self.tabs.setCurrentIndex(index)

    def show_log(self) -> None:
        roles = self.selected_roles()
        if roles:
            self.logs.show_role(roles[0])
        self.tabs.setCurrentWidget(self.logs)

    def _on_selection_changed(self) -> None:
        roles = self.selected_roles()
        self.overview.select_role(roles[0] if roles else None)
        if roles:
            self.logs.show_role(roles[0])
            self.placement.set_role(roles[0])

    # ------------------------------------------------------------------ closing

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
        self.catch_up_timer.stop()
        self._close_source()
        self._preflight_run.cancel()  # Python joins the pool's thread at exit: never wait on an ssh
        self._background.shutdown(wait=False, cancel_futures=True)
        self._gc_hold.release()
        event.accept()
