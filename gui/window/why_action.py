"""*Role > Why is this worker slow?* (also in the roles table's context menu and on a right-click of
a worker's tile in the overview): profile the selected worker, or the slowest one when none is
selected, beside the median worker, and show both in the Profile tab with the verdict and its
evidence above the table.

The work is :func:`core.profiling.why_run.why_slow` (the steps of ``ctl RUN why``) on a worker
thread. It shares the Profile action's guard (:meth:`ProfileAction.refusal`): one capture at a time,
none for a run that has ended (a live run this window only follows is asked through its launcher's
control socket, as ``ctl RUN why`` asks), every refusal one line in the status bar.
The tile's context menu also offers *Profile* (the Profile action, on the tile's role).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6 import QtCore, QtGui, QtWidgets

from core.profiling.env import ProfileError
from core.profiling.files import CaptureRecord
from core.profiling.why import straggler_and_median
from core.profiling.why_run import WhyAnswer, why_slow
from gui.offthread import Relay, run_off_thread
from gui.run.tabs.profile import CaptureSummary

if TYPE_CHECKING:
    from gui.window.main_window import MainWindow

SHORTCUT = "Ctrl+Shift+Y"
MESSAGE_MS = 30000


class WhyAction(QtCore.QObject):
    """The action, its place in the menus, and the answer shown in the Profile tab."""

    def __init__(self, window: MainWindow) -> None:
        super().__init__(window)
        self.window = window
        self.relay = Relay(self)
        self.last_message = ""
        self.answer: WhyAnswer | None = None  # the latest answer
        self.action = QtGui.QAction("Why is this worker slow?", window)
        self.action.setShortcut(QtGui.QKeySequence(SHORTCUT))
        self.action.setToolTip(
            "Profile the selected worker (else the slowest) beside the median worker and say what makes "
            f"it slower, with the evidence, in the Profile tab ({SHORTCUT})"
        )
        self.action.triggered.connect(lambda _c=False: self.ask())
        window.table.addAction(self.action)
        window.controls.role_menu.addAction(self.action)
        window.overview.sig_role_menu.connect(lambda _role, pos: self.tile_menu().exec(pos))

    def tile_menu(self) -> QtWidgets.QMenu:
        """The context menu of a tile (its role is selected by then): Profile, and Why."""
        menu = QtWidgets.QMenu(self.window)
        menu.addAction(self.window.profiler.action)
        menu.addAction(self.action)
        menu.aboutToHide.connect(menu.deleteLater)
        return menu

    def ask(self) -> None:
        """Profile the straggler and the median worker off the GUI thread; the verdict follows."""
        profiler = self.window.profiler
        source = self.window.source
        reason = profiler.refusal(needs_selection=False)
        if reason is not None or source is None:
            self._say(f"why: {reason}")
            return
        roles = source.status().roles
        chosen = self.window.selected_roles()
        try:
            slow, median = straggler_and_median(roles, chosen[0] if chosen else None)
        except ProfileError as exc:
            self._say(f"why: {exc}")
            return
        straggler, seconds, run_path = slow.role, profiler.seconds, source.path
        agent_hosts, control_socket = profiler.launcher()  # roles of SSH hosts and Slurm nodes
        profiler.busy = f"{straggler}, {median.role}"
        self._say(f"profiling {straggler} beside the median worker {median.role} for {seconds:g} s...")
        run_off_thread(
            self.relay,
            lambda: why_slow(
                roles,
                run_path,
                straggler,
                seconds=seconds,
                agent_hosts=agent_hosts,
                control_socket=control_socket,
                origin="window",
            ),
            self.show_answer,
            name="why-capture",
        )

    def show_answer(self, result: object, error: BaseException | None) -> None:
        """The outcome, on the GUI thread: the verdict in the status bar and the Profile tab."""
        self.window.profiler.busy = None
        if error is not None or not isinstance(result, WhyAnswer):
            self._say(f"why: {error}")  # ProfileError: one line already
            return
        self.answer = result
        if result.verdict is None:
            self._say(f"why: {result.refusal()}")
        else:
            self._say(f"why is {result.straggler} slow? {result.verdict.sentence}")
        folder = result.capture.path
        source = self.window.source
        if source is None or source.path != folder.parent.parent:
            return  # the window moved on to another run meanwhile
        panel = self.window.profiler.panel
        if result.profiles:
            # The capture's breakdown, as kept with it: the figures the verdict was given on.
            failures = [(r.role, r.error or "not captured") for r in result.capture.roles if not r.ok]
            xplanes = result.capture.xplanes()
            record = CaptureRecord(
                folder,
                xplanes,
                failures,
                asked=(result.straggler, result.median),
                seconds=result.capture.seconds,
                purpose="why",
                origin="window",
            )
            panel.cache[folder] = CaptureSummary(
                folder, result.profiles, tuple(failures), result.verdict, record=record
            )
        panel.set_run(source.path, show=folder)
        self.window.tabs.setCurrentWidget(panel)

    def _say(self, message: str) -> None:
        self.last_message = message
        self.window.statusBar().showMessage(message, MESSAGE_MS)
