"""The main window's run wiring: launching the form's cluster, opening a run directory, attaching
to a run whose launcher is gone, the hosts' pre-flight, and the users' commands to the run's roles.

A mixin of :class:`gui.window.main_window.MainWindow`. The GUI thread never waits here: a launch,
an attach and a reader start their own threads, the pre-flight runs on the window's background
pool (polled each frame), and a refused command comes back through the event inbox.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6 import QtCore, QtWidgets

from core.cluster.problems import ERROR
from core.cluster.spec import ClusterSpec
from core.controller.session import LaunchSession, RunSource, SessionError, needs_preflight
from core.preflight.runner import PreflightRun
from core.run.inbox import EventInbox
from core.run.reader import RunDirError, RunReader
from core.run.status import ClusterStatus, Event
from gui.editor import ClusterEditor
from gui.run.tabs.gpus import GpuPanel
from gui.run.tabs.logs import LogPanel
from gui.run.tabs.training import TrainingPanel
from gui.window import settings
from gui.window.preflight import PreflightDialog
from gui.window.tensorboard_action import TensorBoardAction


class RunWiring(QtWidgets.QMainWindow):
    """Which run the window shows, and what users ask of it."""

    # What the window provides (see gui.window.main_window.MainWindow).
    spec: ClusterSpec | None
    runs_root: Path | None
    source: RunSource | None
    session: LaunchSession | None
    inbox: EventInbox
    editor: ClusterEditor
    pages: QtWidgets.QTabWidget
    monitor: QtWidgets.QSplitter
    recent_runs_menu: QtWidgets.QMenu
    training: TrainingPanel
    gpus: GpuPanel
    logs: LogPanel
    tensorboard: TensorBoardAction
    warnings: list[str]
    warning_label: QtWidgets.QLabel
    slurm_text: str
    preflight_results: list[Any]
    _last_status: ClusterStatus | None
    _figures_shown: tuple[Any, float] | None
    _background: ThreadPoolExecutor
    _reader_to_start: RunReader | None  # started by the next frame (gui.window.frame)
    _preflight_job: Future[list[Any]] | None
    _preflight_run: PreflightRun
    _preflight_passed: bool
    _launch_after_preflight: bool

    if TYPE_CHECKING:  # provided by the window; no stubs at run time to shadow the real ones

        def _set_title(self) -> None: ...

        def _refresh_table(self) -> None: ...

        def select_role(self, role: str) -> None: ...

        def selected_roles(self) -> list[str]: ...

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
        # Started at the end of the next frame, once the run's roles are on screen: its thread
        # took half the GIL while the window drew them the first time (issue 25).
        self._reader_to_start = reader
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

    def fill_recent_runs(self) -> None:
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
        self._figures_shown = None

    def stop_all(self) -> None:
        self.act_on_source(lambda s: s.stop_all())

    def act_on_source(self, fn: Callable[[RunSource], Future[str]]) -> None:
        """Ask the live run for ``fn`` (stop all, restart all...); a refusal becomes a warning."""
        if self.source is not None and not self.source.done:
            fn(self.source).add_done_callback(functools.partial(_report_refusal, self.inbox))

    def act_on_selected_roles(self, action: str) -> None:
        """``stop``, ``restart`` or ``kill`` each selected role of the live run."""
        if self.source is None or self.source.done:
            return
        for role in self.selected_roles():
            future: Future[str] = getattr(self.source, f"{action}_role")(role)
            future.add_done_callback(functools.partial(_report_refusal, self.inbox))

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


def _report_refusal(inbox: EventInbox, future: Future[str]) -> None:
    """A refused action, on the source's thread: to the GUI thread through the inbox. It holds the
    inbox only, never the window, so the future's last reference never releases a Qt object there."""
    exc = future.exception()
    if exc is not None:
        inbox.put(Event("warning", time.time(), None, {"message": str(exc)}))
