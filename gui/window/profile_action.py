"""*Role > Profile* (and the roles table's context menu): capture TensorFlow's profile of the
selected roles of the live run this window shows (its own, or one it follows), off the GUI thread, then show it in the Profile tab.

The capture (:func:`core.profiling.capture.capture`) checks each role, traces them at once and gives
up at its own hard time limit; here it runs on a worker thread and its outcome comes back to the
GUI thread, where every failure is one line in the status bar. One capture at a time: a second
*Profile* while one runs is refused with a message. A role of an SSH host or a Slurm node is traced
there by its agent, asked through this window's own control socket as ``ctl RUN profile`` asks
(the controller fetches the files into the same ``RUN/profiles/<timestamp>/<job>-<task>/``).

The tab's *Open in TensorBoard* serves the chosen capture in the profiler environment's TensorBoard
(:func:`core.profiling.tensorboard.start_capture`), started on a worker thread and opened in the
browser; one at a time per window, stopped (its whole process group) when another capture is
opened, the window shows another run, or it closes.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6 import QtCore, QtGui

from core.profiling.capture import Capture, capture, select
from core.profiling.tensorboard import profile_url, start_capture
from core.run.tensorboard import TensorBoardServer
from gui.offthread import Relay, run_off_thread, start_thread
from gui.run.tabs.profile import ProfilePanel

if TYPE_CHECKING:
    from gui.window.main_window import MainWindow

PROFILE_SECONDS = 2.0  # what the CLI traces by default: a 2 s trace grows a role's memory by ~400 MB
SHORTCUT = "Ctrl+Shift+F"
MESSAGE_MS = 20000


class ProfileAction(QtCore.QObject):
    """The Profile tab and the action that fills it, for one window."""

    def __init__(self, window: MainWindow) -> None:
        super().__init__(window)
        self.window = window
        self.relay = Relay(self)
        self.busy: str | None = None  # the roles being captured now
        self.seconds = PROFILE_SECONDS
        self.last_message = ""
        self.panel = ProfilePanel()
        self.panel.sig_open_tensorboard.connect(self.open_tensorboard)
        self.tensorboard: TensorBoardServer | None = None  # serving ``tensorboard_for``
        self.tensorboard_for: Path | None = None  # the capture asked for last (None: none wanted now)
        self.tensorboard_error: str | None = None
        self.open_browser = True  # tests turn it off
        window.tabs.addTab(self.panel, "Profile")
        window.tabs.currentChanged.connect(lambda _i: self._on_tab())
        self.action = QtGui.QAction("Profile", window)
        self.action.setShortcut(QtGui.QKeySequence(SHORTCUT))
        self.action.setToolTip(
            f"Capture {PROFILE_SECONDS:g} s of TensorFlow's profiler on the selected roles and show them "
            f"side by side in the Profile tab ({SHORTCUT})"
        )
        self.action.triggered.connect(lambda _c=False: self.profile_selected())
        window.table.addAction(self.action)  # the roles table's context menu
        window.controls.role_menu.addAction(self.action)

    def _on_tab(self) -> None:
        if self.window.tabs.currentWidget() is self.panel:
            source = self.window.source
            self.panel.set_run(source.path if source is not None else None)

    def follow_run(self) -> None:
        """The window shows another run: the tab lists its captures now when it is in view (the
        window may open on it, as the last session left it), else when it is next shown."""
        if self.window.tabs.currentWidget() is self.panel:
            self._on_tab()
        else:
            self.panel.set_run(None)  # nothing of the run shown before is left to see

    def refusal(self, *, needs_selection: bool = True) -> str | None:
        """Why the selected roles cannot be profiled now, in one line; None when they can. A second
        capture is refused while one runs, whichever action asked for it (*Profile* or *Why*)."""
        if self.busy is not None:
            return f"a profile of {self.busy} is being captured; wait for it before asking another"
        source = self.window.source
        if source is None:
            return "nothing to profile: launch the cluster first"
        if source.done:
            if self.window.controller is None:
                return "this run is read back from its directory and not running: only a running role can be profiled"
            return "the run is not running: only a running role can be profiled"
        if needs_selection and not self.window.selected_roles():
            return "select the roles to profile in the roles table first"
        return None

    def profile_selected(self) -> None:
        """Capture the selected roles off the GUI thread; show the outcome in the Profile tab."""
        reason = self.refusal()
        source = self.window.source
        if reason is not None or source is None:
            self._say(f"profile: {reason}")
            return
        chosen = self.window.selected_roles()
        agent_hosts, control_socket = self.launcher()
        roles = [r for r in source.status().roles if r.role in chosen]
        targets = select(roles, [r.role for r in roles], workers=False, every=False, agent_hosts=agent_hosts)
        if not targets:
            self._say("profile: the selected roles are not in this run's status yet; try again in a moment")
            return
        self.busy = ", ".join(t.role for t in targets)
        run_path, seconds = source.path, self.seconds
        self._say(f"profiling {self.busy} for {seconds:g} s...")
        run_off_thread(
            self.relay,
            lambda: capture(
                run_path, targets, seconds=seconds, control_socket=control_socket, purpose="profile", origin="window"
            ),
            self._on_captured,
            name="profile-capture",
        )

    def launcher(self) -> tuple[set[str], Path | None]:
        """The hosts whose roles the run's launcher traces by their agent, and the control socket
        to ask it through: this window's own when it runs the cluster, else that of the launch it
        follows (a run started by ``launch`` or another window), as ``ctl RUN profile`` asks."""
        session, controller = self.window.session, self.window.controller
        if session is not None and controller is not None:
            return set(controller.agent_hosts()), session.server.path
        source = self.window.source
        if source is None:
            return set(), None
        return set(source.agent_hosts()), source.control_socket()

    def _on_captured(self, result: object, error: BaseException | None) -> None:
        self.busy = None
        if error is not None or not isinstance(result, Capture):
            self._say(f"profile: {error}")  # ProfileError: one line already; anything else as its text
            return
        failed = [r.error for r in result.roles if not r.ok and r.error]
        captured = [r.role for r in result.roles if r.ok]
        if captured:
            done = f"profiled {', '.join(captured)} into {result.path.name}"
            done += f"; not captured: {'; '.join(failed)}" if failed else ""
            self._say(done + (f"; {result.problem}" if result.problem else ""))
        else:
            self._say(f"profile: {'; '.join(failed) or 'no role was captured'}")
        source = self.window.source
        if source is not None and source.path == result.path.parent.parent:
            self.panel.cache.pop(result.path, None)  # shown while it was being taken: read it again
            self.panel.set_run(source.path, show=result.path)
            self.window.tabs.setCurrentWidget(self.panel)

    def _say(self, message: str) -> None:
        self.last_message = message
        self.window.statusBar().showMessage(message, MESSAGE_MS)

    # ------------------------------------------------------------------ TensorBoard on a capture

    def open_tensorboard(self, folder: Path) -> None:
        """Serve ``folder`` (a capture) in TensorBoard's Profile tab, off the GUI thread, and open it."""
        server = self.tensorboard
        if server is not None and self.tensorboard_for == folder and server.alive():
            self._show_tensorboard(server)
            return
        self.stop_tensorboard()
        self.tensorboard_for = folder
        self.tensorboard_error = None
        self.panel.set_tensorboard_note(f"starting TensorBoard on {folder.name}...", busy=True)
        run_off_thread(
            self.relay,
            lambda: start_capture(folder),
            lambda done, error: self._on_tensorboard(folder, done, error),
            name="profile-tensorboard-start",
        )

    def _on_tensorboard(self, folder: Path, server: object, error: BaseException | None) -> None:
        if not isinstance(server, TensorBoardServer):
            if self.tensorboard_for == folder:
                self.tensorboard_error = f"TensorBoard: {error}"
                self.panel.set_tensorboard_note("")
                self._say(self.tensorboard_error)
            return
        if self.tensorboard_for != folder:  # another capture, another run, or the window closed meanwhile
            _stop_off_thread(server)
            return
        self.tensorboard = server
        self._show_tensorboard(server)

    def _show_tensorboard(self, server: TensorBoardServer) -> None:
        url = profile_url(server)
        self.panel.set_tensorboard_note(f"TensorBoard: {url}")
        self._say(f"TensorBoard's Profile tab on {url}")
        if self.open_browser:
            QtGui.QDesktopServices.openUrl(QtCore.QUrl(url))

    def stop_tensorboard(self) -> None:
        """Stop the capture's TensorBoard, if any (one starting is stopped when it is up)."""
        server, self.tensorboard, self.tensorboard_for = self.tensorboard, None, None
        self.panel.set_tensorboard_note("")
        if server is not None:
            _stop_off_thread(server)


def _stop_off_thread(server: TensorBoardServer) -> None:
    """SIGTERM now; the wait, and SIGKILL past the grace, off the GUI thread."""
    server.terminate()
    start_thread(threading.Thread(target=server.stop, name="profile-tensorboard-stop", daemon=True))
