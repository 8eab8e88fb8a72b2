"""The main window: the roles table above tabs for training, GPUs, placement and logs.

A view over one :class:`core.controller.session.RunSource`: a live :class:`core.controller.controller.Controller` launched
(or attached) from this window through a :class:`core.controller.session.LaunchSession`, or a
:class:`core.run.reader.RunReader` following a run directory (a past run, or one another TowerDeck
process runs). The GUI thread never waits on a process, pipe, socket or file: the source runs on
its own thread, its events land in an :class:`EventInbox`, and a QTimer drains them and redraws at
most ``FRAME_HZ`` times a second, only the tab that is on screen (:mod:`gui.window.frame`); a
launch, an attach and a close run off the GUI thread (:mod:`gui.window.run_wiring`), the status
bar saying so meanwhile.

:class:`MainWindow` builds the widgets and its parts, and passes between them; each part keeps its
own state: :class:`~gui.window.actions.WindowActions` (menus, toolbar), :class:`~gui.window.run_wiring.RunBinding`
(which run is shown), :class:`~gui.window.frame.FramePump` (each frame), :class:`~gui.window.host_check.HostCheck`
(pre-flight), and the add-ons (export, notifications, TensorBoard, profile, why, the Runs page).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

from PySide6 import QtCore, QtGui, QtWidgets

from core.cluster.problems import ERROR
from core.cluster.spec import ClusterSpec
from core.controller.controller import Controller
from core.controller.session import LaunchSession, RunSource, needs_preflight
from core.run.reader import RunDirError
from core.run.status import ClusterPhase, ClusterStatus
from gui.editor import ClusterEditor
from gui.offthread import Relay, run_off_thread
from gui.run.overview import ClusterOverview
from gui.run.recovery_banner import RecoveryBanner
from gui.run.roles import RolesView
from gui.run.tabs.gpus import GpuPanel
from gui.run.tabs.logs import LogPanel
from gui.run.tabs.placement import PlacementPanel
from gui.run.tabs.training import TrainingPanel
from gui.window import collector, dialogs, runs_install, settings
from gui.window.about import AboutDialog, app_icon
from gui.window.actions import TABS, WindowActions
from gui.window.desktop_notify import DesktopNotifier
from gui.window.exporting import Exporter
from gui.window.frame import FramePump, RunViews
from gui.window.host_check import HostCheck
from gui.window.profile_action import ProfileAction
from gui.window.run_wiring import RunBinding
from gui.window.tensorboard_action import TensorBoardAction
from gui.window.why_action import WhyAction

# The most of the Run page's height the overview and the roles table take before they scroll: the
# plots keep at least 60 % of a 1600x1000 window with a few roles, and past tens of roles over
# half of the Run page for the spread views.
OVERVIEW_MAX_SHARE = 0.2
TABLE_MAX_SHARE = 0.25


class MainWindow(QtWidgets.QMainWindow):
    """TowerDeck's window for one cluster, or one run directory: its layout, selection and closing;
    the rest is its parts'."""

    def __init__(
        self, spec: ClusterSpec | None, runs_root: Path | None = None, cluster_path: Path | None = None
    ) -> None:
        super().__init__()
        # Python's collector runs on this thread only while the window exists (gui/window/collector.py).
        self._gc_hold = collector.hold()
        self.destroyed.connect(self._gc_hold.release)
        # "stop" or "leave" answers the closing question ahead (scripts, --screenshot, tests).
        self._close_choice: str | None = os.environ.get("TOWERDECK_CLOSE_CHOICE") or None
        self._closing = False  # the cluster is being stopped (or left): the window closes once it is done
        self._close_when_landed = False  # closed while a launch or attach was under way
        self._relay = Relay(self)
        self.about_dialog: AboutDialog | None = None
        self.setWindowIcon(app_icon())
        self.resize(1280, 800)
        self.binding = RunBinding(self, runs_root=runs_root, say=self._say)
        self.binding.sig_progress_changed.connect(self._on_progress)
        self.binding.set_form_spec(spec)
        self.controls = WindowActions(self, self)
        self._build()
        self.frame = FramePump(
            self,
            binding=self.binding,
            views=RunViews(
                self.roles,
                self.overview,
                self.tabs,
                self.training,
                self.gpus,
                self.placement,
                self.logs,
                self.controls.phase_label,
                self.warning_label,
            ),
            desktop_notifier=self.desktop_notifier,
            on_status=self._update_actions,
            after_frame=self._after_frame,
        )
        self.host_check = HostCheck(self, say=self._say, launch=self.launch)
        # Launch follows the form's errors as they come and go, not only on the next frame.
        self.editor.sig_validity_changed.connect(lambda _valid: self._update_actions(self.frame.last_status))
        self._build_add_ons()
        self._set_title()
        self.frame.start()
        # Splitters the user moved stay where they were left; the others fit their content.
        self.splits_moved: set[str] = settings.restore_layout(self, self.tabs)
        for splitter in settings.named_splitters(self):
            splitter.splitterMoved.connect(functools.partial(self._on_splitter_moved, splitter.objectName()))
        if cluster_path is not None:
            self.editor.open_file(cluster_path)  # keeps job-level settings as the file writes them
        elif spec is not None:
            self.editor.set_spec(spec)
        else:
            self.editor.new_cluster()
        self.binding.set_form_spec(spec if spec is not None else self.editor.current_spec())
        self.pages.setCurrentWidget(self.monitor if spec is not None else self.editor)
        self.frame.refresh_table()

    # ------------------------------------------------------------------ what the parts hold

    @property
    def source(self) -> RunSource | None:
        """The run shown (:attr:`RunBinding.source`)."""
        return self.binding.source

    @property
    def session(self) -> LaunchSession | None:
        """The launch session when this window runs the cluster."""
        return self.binding.session

    @property
    def controller(self) -> Controller | None:
        """The live controller when this window launched the cluster (None otherwise)."""
        return self.binding.controller

    @property
    def spec(self) -> ClusterSpec | None:
        """The cluster shown: the run's, else the form's."""
        return self.binding.spec

    @property
    def runs_root(self) -> Path | None:
        return self.binding.runs_root

    # ------------------------------------------------------------------ layout

    def _build(self) -> None:
        self.roles: RolesView = RolesView(lambda role, n: self.logs.last_lines(role, n))
        self.banner, self.table = self.roles.banner, self.roles.table
        for action in self.controls.role_actions():
            self.table.addAction(action)
        self.roles.sig_selection_changed.connect(self._on_selection_changed)
        self.roles.banner.sig_show_log.connect(self.show_error_log)
        self.table.doubleClicked.connect(lambda _index: self.show_log())

        self.training: TrainingPanel = TrainingPanel()
        self.gpus: GpuPanel = GpuPanel()
        self.placement: PlacementPanel = PlacementPanel()
        self.logs: LogPanel = LogPanel()
        self.placement.sig_role_changed.connect(lambda _role: self.frame.refresh_placement())
        self.tabs: QtWidgets.QTabWidget = QtWidgets.QTabWidget()
        for panel, name in zip((self.training, self.gpus, self.placement, self.logs), TABS, strict=True):
            self.tabs.addTab(panel, name)
        self.tabs.currentChanged.connect(lambda _i: self.frame.refresh_visible(force=True))

        self.editor: ClusterEditor = ClusterEditor(settings=settings.store())
        self.editor.sig_spec_changed.connect(self._on_editor_spec_changed)
        self.editor.sig_path_changed.connect(self._on_editor_path_changed)

        self.split: QtWidgets.QSplitter = QtWidgets.QSplitter(QtCore.Qt.Orientation.Vertical)
        self.split.setObjectName("main-split")
        # The cluster at a glance above the table: hosts as boxes, roles as tiles by state; a click
        # selects the role everywhere (table, logs, placement).
        self.overview: ClusterOverview = ClusterOverview()
        self.overview.sig_role_selected.connect(self.select_role)
        self.overview_scroll: QtWidgets.QScrollArea = QtWidgets.QScrollArea()
        self.overview_scroll.setWidgetResizable(True)
        self.overview_scroll.setWidget(self.overview)
        self.split.addWidget(self.overview_scroll)
        self.split.addWidget(self.roles)
        self.split.addWidget(self.tabs)
        # The plots get what the overview and the table do not need (fit_split); a bigger
        # window grows the plots only.
        for index, stretch in enumerate((0, 0, 1)):
            self.split.setStretchFactor(index, stretch)
        self.split.setSizes([120, 160, 600])
        self._split_fitted: list[int] | None = None
        # The run page: a recovery under way (or how the last ended) above the split, in one line.
        self.recovery_banner: RecoveryBanner = RecoveryBanner()
        self.monitor: QtWidgets.QWidget = QtWidgets.QWidget()
        monitor_layout = QtWidgets.QVBoxLayout(self.monitor)
        monitor_layout.setContentsMargins(0, 0, 0, 0)
        monitor_layout.setSpacing(0)
        monitor_layout.addWidget(self.recovery_banner)
        monitor_layout.addWidget(self.split, 1)
        # Two pages: the cluster as a form, and the run (roles above, telemetry tabs below).
        self.pages: QtWidgets.QTabWidget = QtWidgets.QTabWidget()
        self.pages.setDocumentMode(True)
        self.pages.addTab(self.editor, "Cluster")
        self.pages.addTab(self.monitor, "Run")
        self.setCentralWidget(self.pages)
        # What runs off the GUI thread now (a launch, an attach, a close): said until it is over.
        self.progress_label: QtWidgets.QLabel = QtWidgets.QLabel("")
        self.statusBar().addPermanentWidget(self.progress_label)
        # Warnings (disk full, a lost host, a refused action) stay countable after the status
        # bar message has gone: the label lists the latest in its tooltip.
        self.warning_label: QtWidgets.QLabel = QtWidgets.QLabel("")
        self.warning_label.setStyleSheet("QLabel { color: #b45309; font-weight: bold; }")
        self.statusBar().addPermanentWidget(self.warning_label)
        self.controls.add_page_actions(self.editor, self.pages, self.monitor)
        self.desktop_notifier: DesktopNotifier = DesktopNotifier(self)

    def _build_add_ons(self) -> None:
        self.exporter = Exporter(self)  # File > Export plot / run figures as CSV
        self.tensorboard = TensorBoardAction(self)  # File > Open in TensorBoard
        self.profiler = ProfileAction(self)  # Role > Profile and the Profile tab
        self.why = WhyAction(self)  # Role > Why is this worker slow? (uses the Profile tab)
        # The same two on the workers the Training tab's spread view names.
        spread = self.training.slowest_menu
        spread.sig_profile_requested.connect(lambda role: self.act_on_role(role, self.profiler.profile_selected))
        spread.sig_why_requested.connect(lambda role: self.act_on_role(role, self.why.ask))
        self.runs = runs_install.install(self)  # the Runs page and compare views
        self.runs_page = self.runs.page
        self.runs_page.sig_runs_tensorboard.connect(self.tensorboard.open_runs)

    def _on_editor_spec_changed(self, spec: ClusterSpec | None) -> None:
        """The form changed: it is what the next launch uses (a running cluster keeps its own)."""
        self.binding.set_form_spec(spec)
        if self.source is None:
            self._set_title()
            self.frame.refresh_table()

    def _on_editor_path_changed(self, path: Path | None) -> None:
        if path is not None:
            settings.remember_cluster(path)

    def _set_title(self) -> None:
        source = self.source
        if source is not None and not source.controls_here:
            self.setWindowTitle(f"TowerDeck - run {source.path.name}")
        else:
            spec = self.spec
            self.setWindowTitle(f"TowerDeck - {spec.name if spec else 'new cluster'}")

    def _say(self, message: str) -> None:
        self.statusBar().showMessage(message)

    def _on_progress(self, text: str) -> None:
        """What runs off the GUI thread changed: said in the status bar; the actions follow at once."""
        self.progress_label.setText(text)
        self._update_actions(self.frame.last_status)

    def _update_actions(self, status: ClusterStatus | None) -> None:
        # A status that says done is over too: the controller publishes DONE a moment before its
        # ``done`` is set, and no event may follow to refresh the actions (Launch stayed disabled).
        over = status is not None and status.phase in (ClusterPhase.DONE, ClusterPhase.DETACHED)
        self.recovery_banner.show_status(status)
        source = self.source
        self.controls.enable(
            live=source is not None and not source.done and not over,
            # Errors listed under the form (the file's and this machine's) keep Launch off; warnings do not.
            launchable=self.editor.is_valid,
            # An opened run whose launcher is gone, but which did not end: its roles may run on.
            attachable=source is not None and source.attachable,
            checking=self.host_check.running,
            switching=self.binding.pending is not None,
        )

    def _on_splitter_moved(self, name: str, *_args: object) -> None:
        self.splits_moved.add(name)

    def fit_split(self) -> None:
        """The overview and the roles table as tall as their content, up to a share of the Run
        page each (then the tiles shrink and the table scrolls); the tabs get the rest. Left alone
        once the user has moved the splitter."""
        if self.split.objectName() in self.splits_moved:
            return
        total = sum(self.split.sizes())
        if total <= 0:
            return
        frame = 2 * self.overview_scroll.frameWidth()
        overview = self.overview.content_height(self.overview_scroll.viewport().width()) + frame
        overview = min(overview, int(OVERVIEW_MAX_SHARE * total))
        table_cap = int(TABLE_MAX_SHARE * total)
        table = min(self.roles.content_height(cap=table_cap), table_cap)
        wanted = [overview, table, total - overview - table]
        if wanted != self._split_fitted:  # once per change: a relayout each frame would cost the frame
            self._split_fitted = wanted
            self.split.setSizes(wanted)

    def _after_frame(self) -> None:
        self.binding.after_frame()
        self.fit_split()
        source = self.source
        if self.editor.is_running and (source is None or source.done):
            self.editor.set_running(running=False)
        if self._closing and (source is None or source.done):
            self._closing = False
            self.close()

    # ------------------------------------------------------------------ which run is shown

    def launch(self) -> None:
        """Launch the cluster in the editor: a new run directory and a live controller, made off
        the GUI thread; the Run page says "launching..." until the run is there."""
        source = self.source
        if (source is not None and not source.done) or self.binding.pending is not None:
            return
        # The form as it is now, edits included, once a run was shown.
        spec = self.spec if source is None and self.spec is not None else self.editor.current_spec()
        blocking = [p for p in self.editor.problems() if p.severity == ERROR]
        if spec is None or blocking:
            self.pages.setCurrentWidget(self.editor)
            first = blocking[0].format() if blocking else "the form has errors"
            self._say(f"not launched: {first} (all problems are listed under the form)")
            return
        passed = self.host_check.take_pass()
        if needs_preflight(spec) and not passed:
            self.check_hosts(launch_after=True)  # remote hosts: the pre-flight first, off this thread
            return
        if self.binding.launch(spec, landed=functools.partial(self._on_launched, spec)):
            self.pages.setCurrentWidget(self.monitor)

    def _on_launched(self, spec: ClusterSpec, error: str | None) -> None:
        source = self.source  # this window's controller, or the launch process it follows
        if error is not None or source is None or not source.controls_here:
            self._say(f"not launched: {error}")
        else:
            self._show_new_run()
            self.editor.set_running(running=True)
            self._say(f"run directory: {source.path}")
            self._remember_run(source.path)
            workers = [r for r in spec.role_ids() if r.split(":")[0] in ("chief", "worker")]
            if workers and not self.selected_roles():
                self.select_role(workers[0])
        self._landed()

    def open_run(self, path: Path) -> bool:
        """Show a run directory: a past run, or one that another TowerDeck process runs."""
        source = self.source
        if source is not None and not source.done and source.controls_here:
            QtWidgets.QMessageBox.information(
                self, "TowerDeck", "Stop the running cluster before opening another run in this window."
            )
            return False
        if self.binding.pending is not None:
            self._say(f"not opened: {self.binding.pending} another run; open it once that is done")
            return False
        try:
            reader = self.binding.open(path)
        except RunDirError as exc:
            QtWidgets.QMessageBox.warning(self, "TowerDeck", str(exc))
            return False
        self._show_new_run()
        self.editor.set_spec(reader.spec)  # the cluster as launched; Save As keeps a copy
        self.editor.set_running(running=not reader.done)
        self.pages.setCurrentWidget(self.monitor)
        self._say(f"run directory: {path}")
        self._remember_run(path)
        return True

    def attach(self) -> bool:
        """Take over the opened run: reconnect to its agents (off the GUI thread) and control it
        from this window. False when there is nothing to attach to; a refusal is said once it comes."""
        source = self.source
        path = source.path if source is not None else None
        return self.binding.attach(landed=lambda error: self._on_attached(path, error))

    def _on_attached(self, path: Path | None, error: str | None) -> None:
        if error is not None:
            QtWidgets.QMessageBox.warning(self, "TowerDeck", error)
        else:
            self._show_new_run()
            self.editor.set_running(running=True)
            self._say(f"attached to {path}")
        self._landed()

    def _show_new_run(self) -> None:
        """Another run is bound: its TensorBoard goes with the one it showed, the views start empty."""
        self.tensorboard.stop()
        self.profiler.stop_tensorboard()  # the Profile tab's, on a capture of the run it showed
        self.frame.reset()
        self._set_title()
        self.frame.refresh_table()
        self.profiler.follow_run()

    def _landed(self) -> None:
        """A launch or attach is over: a close asked for meanwhile goes on now."""
        if self._close_when_landed:
            self._close_when_landed = False
            self.close()

    def _remember_run(self, path: Path) -> None:
        # The recent runs list is written to disk (QSettings.sync): off the GUI thread.
        run_off_thread(self._relay, lambda: settings.remember_run(path), lambda _r, _e: None, name="settings-write")

    def choose_run(self) -> None:
        start = str(self.runs_root) if self.runs_root else ""
        chosen = QtWidgets.QFileDialog.getExistingDirectory(self, "Open a run directory", start)
        if chosen:
            self.open_run(Path(chosen))

    def show_about(self) -> None:
        """Help > About, one dialog at a time (raised again if open)."""
        if self.about_dialog is None:
            self.about_dialog = AboutDialog(self)
        self.about_dialog.show()
        self.about_dialog.raise_()

    def check_hosts(self, *, launch_after: bool = False) -> None:
        """Pre-flight every host of the form's cluster off the GUI thread; show a table."""
        spec = self.editor.current_spec() or self.spec
        if spec is not None:
            self.host_check.check(spec, launch_after=launch_after)
            self._update_actions(self.frame.last_status)

    # ------------------------------------------------------------------ users' commands

    def stop_all(self) -> None:
        self.binding.act_on_source(lambda s: s.stop_all())

    def act_on_source(self, fn: Callable[[RunSource], Future[str]]) -> None:
        """Ask the live run for ``fn`` (stop all, restart all...); a refusal becomes a warning."""
        self.binding.act_on_source(fn)

    def act_on_selected_roles(self, command: Callable[[RunSource, str], Future[str]]) -> None:
        """``command`` (stop, restart, kill) on each selected role of the live run."""
        self.binding.act_on_roles(command, self.selected_roles())

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

    def show_last_error(self) -> None:
        """The shown log's role (on the Logs tab), else the selected role's, at its last error line."""
        roles = self.selected_roles()
        on_logs = self.pages.currentWidget() is self.monitor and self.tabs.currentWidget() is self.logs
        role = self.logs.current if on_logs and self.logs.current else roles[0] if roles else self.logs.current
        if role is None:
            self.statusBar().showMessage("Select a role to see its last error", 10000)
            return
        self.show_error_log(role)

    def show_error_log(self, role: str) -> None:
        """The Logs tab on ``role``, its cursor on the line that says why it failed (the error its
        status gives, else its last error line): the banner's *Show log*."""
        self.select_role(role)
        self.logs.show_role(role)
        self.pages.setCurrentWidget(self.monitor)
        self.tabs.setCurrentWidget(self.logs)
        status = self.frame.last_status
        error = next((r.last_error for r in status.roles if r.role == role), "") if status else ""
        if not self.logs.go_to_last_error(error):
            self.statusBar().showMessage(f"{role}: no error line in the output this window has", 10000)

    def _on_selection_changed(self) -> None:
        roles = self.selected_roles()
        self.overview.select_role(roles[0] if roles else None)
        if roles:
            self.logs.show_role(roles[0])
            self.placement.set_role(roles[0])

    # ------------------------------------------------------------------ closing

    def answer_close_question(self, choice: str | None) -> None:
        """Answer "stop or leave the running cluster?" ahead: ``stop``, ``leave``, or None to ask
        (scripts, ``--screenshot`` and tests close a window without a person to answer)."""
        self._close_choice = choice

    def closeEvent(self, event: QtGui.QCloseEvent) -> None:
        if self.binding.pending is not None:
            # A launch or attach is under way: once its run is here, closing asks about it.
            self._close_when_landed = True
            self._say(f"closing once {self.binding.pending} is over...")
            event.ignore()
            return
        controller = self.controller
        child = self.binding.child  # a launch run by a process of its own, which this window started
        if (controller is not None and not controller.done) or (child is not None and not child.done):
            choice = self._close_choice or dialogs.ask_close_choice(self)
            if choice == "cancel":
                event.ignore()
                return
            if choice == "leave" and child is not None:
                # The launch process supervises the run to its end; File > Open run shows it again.
                self._say("leaving the cluster running in its launch process; reopen it with File > Open run...")
            else:
                # The frame closes the window once every role is down (the launch process gone), or the agents are left.
                self._closing = True
                if choice == "leave" and controller is not None:
                    controller.detach()
                    self._say("leaving the cluster running; reattach with File > Open run...")
                else:
                    self.binding.act_on_source(lambda source: source.stop_all())
                    self._say("stopping every role before closing...")
                event.ignore()
                return
        settings.save_layout(self, self.tabs, moved=self.splits_moved)
        self.frame.stop()
        self.host_check.cancel()  # its probes and the ssh under them end now
        self.tensorboard.stop()
        self.profiler.stop_tensorboard()
        # The run is closed off the GUI thread (a reader's join, the control socket's); that
        # thread finishes it before the process exits.
        self.binding.let_go()
        self.binding.shutdown()
        self._gc_hold.release()
        event.accept()
