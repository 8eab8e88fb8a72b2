"""The main window's frame: each tick of its timer drains the event inbox (the run's events and
role output, in batches so a reopened run's backlog never stalls a frame), then redraws the roles
table, the overview and only the tab that is on screen. A backlog bigger than a frame's slice goes
on between frames, a slice per turn of the event loop (the catch-up timer), so a reopened run's
telemetry goes in as fast as the GUI thread can take it and the frames only redraw meanwhile.

A mixin of :class:`gui.window.main_window.MainWindow`. Slow reads of the run (a role's placement
summary, the TF devices) are asked of the window's background pool and taken on a later frame.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from PySide6 import QtCore, QtGui, QtWidgets

from core.cluster.spec import ClusterSpec
from core.controller.session import RunSource
from core.run.inbox import EventInbox
from core.run.reader import RunReader
from core.run.status import ClusterPhase, ClusterStatus, Event
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
from gui.window.desktop_notify import DesktopNotifier

FRAME_HZ = 10
# A reopened run's backlog of telemetry goes into the views in batches of this many points, for at
# most FRAME_TELEMETRY_S a turn of the event loop, so no turn stalls the window; a live run sends far
# fewer.
FRAME_TELEMETRY_POINTS: int | None = 2_000
FRAME_TELEMETRY_S = 0.03
FRAME_OWN_TELEMETRY_S = 0.01  # what a frame takes itself before it redraws; the rest between frames
CATCH_UP_AFTER_FRAME_MS = 5  # a backlog's next slice after a frame
CATCH_UP_FRAME_MARGIN_S = 0.005  # a slice between frames ends this long before the next frame is due
CATCH_UP_MIN_S = 0.005  # ... and has at least this, else the frame starts the next one
SLOW_REFRESH_S = 1.0  # placement tables and TF devices: they change slowly and cost more
# Past FIGURES_SCALE_ROLES roles, the roles table's and the overview's figures (step, loss, CPU,
# uptime) are redrawn once every FIGURES_EVERY_S; a change of any role's state, of the set of roles
# or of a host's link, at once. Issue 19: at 65 roles, redrawing both ten times a second (every
# step count changes every frame) was most of the GUI thread under load (py-spy --native: 30-40 %
# in QTreeView's paint, 15-20 % in the overview's), and a monitor's figures are read at 1 Hz.
FIGURES_SCALE_ROLES = 16
FIGURES_EVERY_S = 1.0


class WindowFrame(QtWidgets.QMainWindow):
    """What the window does each frame, from the latest state of its run."""

    # What the window provides (see gui.window.main_window.MainWindow).
    spec: ClusterSpec | None
    source: RunSource | None
    inbox: EventInbox
    timer: QtCore.QTimer  # the frame's
    catch_up_timer: QtCore.QTimer
    editor: ClusterEditor
    roles: RolesView
    overview: ClusterOverview
    tabs: QtWidgets.QTabWidget
    training: TrainingPanel
    gpus: GpuPanel
    placement: PlacementPanel
    logs: LogPanel
    desktop_notifier: DesktopNotifier
    phase_label: QtWidgets.QLabel
    action_attach: QtGui.QAction
    action_kill: QtGui.QAction
    action_kill_all: QtGui.QAction
    action_launch: QtGui.QAction
    action_preflight: QtGui.QAction
    action_restart: QtGui.QAction
    action_restart_all: QtGui.QAction
    action_stop: QtGui.QAction
    action_stop_all: QtGui.QAction
    warnings: list[str]
    warning_label: QtWidgets.QLabel
    host_states: dict[str, dict[str, Any]]
    slurm_text: str
    _closing: bool
    _backlog_after_frame: bool  # a slice of a backlog stopped for the next frame (_on_catch_up)
    _frame_ended: float  # time.monotonic() at the end of the last frame
    _reader_to_start: RunReader | None  # the reader of a run just opened, started after its first frame
    _last_slow_refresh: float
    _last_status: ClusterStatus | None
    _figures_shown: tuple[Any, float] | None  # (what the table last showed of states, when)
    _background: ThreadPoolExecutor
    _placement_job: tuple[Future[dict[str, Any]], str, bool] | None
    _devices_job: Future[dict[str, list[str]]] | None
    _preflight_job: Future[list[Any]] | None

    if TYPE_CHECKING:  # provided by the window; no stubs at run time to shadow the real ones

        def _poll_preflight(self) -> None: ...

        def _attachable(self) -> bool: ...

    def _on_frame(self) -> None:
        # A frame takes a short slice of telemetry itself (a live run's is far less) and leaves a
        # backlog to the catch-up timer, whose slices run on their own turns of the event loop.
        # A backlog's slice that stopped for this frame left the rest to after it.
        backlog, self._backlog_after_frame = self._backlog_after_frame, False
        if not backlog and not self.catch_up_timer.isActive():
            backlog = self._take_telemetry(FRAME_OWN_TELEMETRY_S)
        self._refresh_table()
        self._refresh_visible()
        self._poll_preflight()
        if backlog and not self.catch_up_timer.isActive():
            # Started here, at the end, and not at once: a timer due while Qt fires the due ones
            # runs in the same turn, and this frame's paint and the user's input come first.
            self.catch_up_timer.start(CATCH_UP_AFTER_FRAME_MS)
        if self._reader_to_start is not None:  # a run just opened (run_wiring.open_run)
            if self._reader_to_start is self.source:
                self._reader_to_start.start()
            self._reader_to_start = None
        self._frame_ended = time.monotonic()
        if self.editor.is_running and (self.source is None or self.source.done):
            self.editor.set_running(False)
        if self._closing and (self.source is None or self.source.done):
            self._closing = False
            self.close()

    def _on_catch_up(self) -> None:
        """Another slice of a backlog between two frames, once the event loop has turned: a
        reopened run's telemetry goes in as fast as the GUI thread can take it, not one slice a
        frame (issue 25: the window idled 60 ms of every 100 while the backlog waited).

        A slice ends before the next frame is due, and then leaves the next slice to that frame:
        Qt fires the timers that are due together, so a slice that ran into the frame's time, or
        one due when the frame was, ran back to back with the frame and its paint, and the window
        answered nothing for 100-160 ms opening a day-long run (issue 25)."""
        if time.monotonic() - self._frame_ended < CATCH_UP_AFTER_FRAME_MS / 1000:
            # Due with the frame, it would run in the same turn right after it: after its paint.
            self.catch_up_timer.start(CATCH_UP_AFTER_FRAME_MS)
            return
        until_frame_s = self.timer.remainingTime() / 1000 if self.timer.isActive() else 1.0
        budget_s = until_frame_s - CATCH_UP_FRAME_MARGIN_S
        if budget_s < CATCH_UP_MIN_S:
            # The frame is due, or nearly: on a loaded machine the loop wakes late with both timers
            # overdue, and a slice here would run into the frame. The frame starts the next slice.
            self._backlog_after_frame = True
            return
        if not self._take_telemetry(min(FRAME_TELEMETRY_S, budget_s)):
            return
        if budget_s > FRAME_TELEMETRY_S or not self.timer.isActive():
            self.catch_up_timer.start(0)
        else:
            self._backlog_after_frame = True

    def _take_telemetry(self, budget_s: float = FRAME_TELEMETRY_S) -> bool:
        """Hand the inbox's events and output to the views for at most ``budget_s``; whether that
        time ran out with events still coming (a backlog)."""
        deadline = time.monotonic() + budget_s
        while True:
            events, output = self.inbox.drain(FRAME_TELEMETRY_POINTS)
            samples: list[dict[str, Any]] = []  # consecutive host samples go to the GPUs in one batch
            for event in events:
                if event.kind == "sample":
                    self.desktop_notifier.on_event(event)
                    samples.append(event.data)
                    continue
                if samples:
                    self.gpus.add_samples(samples)
                    samples = []
                self._dispatch(event)
            if samples:
                self.gpus.add_samples(samples)
            for role, text in output.items():
                self.logs.add_output(role, text)
            if not events or time.monotonic() >= deadline:
                break
        return bool(events)

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
        if not self._figures_due(status):
            return
        self.roles.show_status(status, self.host_states)
        self.overview.set_roles(status.roles)
        self.training.set_status(status.roles)
        self._sync_role_lists([r.role for r in status.roles])

    def _figures_due(self, status: ClusterStatus) -> bool:
        """Whether the table, the overview and the role lists should show ``status`` this frame:
        always up to FIGURES_SCALE_ROLES roles, else when a state changed or once a second."""
        now = time.monotonic()
        states = (
            status.phase,
            tuple((r.role, r.host, r.state, r.attempt, r.stalled, r.straggler, r.waiting_for) for r in status.roles),
            tuple((host, h.get("state")) for host, h in self.host_states.items()),
        )
        shown = self._figures_shown
        if (
            len(status.roles) > FIGURES_SCALE_ROLES
            and shown is not None
            and shown[0] == states
            and now - shown[1] < FIGURES_EVERY_S
        ):
            return False
        self._figures_shown = (states, now)
        return True

    def _sync_role_lists(self, roles: list[str]) -> None:
        self.logs.set_roles(roles)
        self.placement.set_roles(roles)

    def _update_actions(self, status: ClusterStatus | None) -> None:
        # A status that says done is over too: the controller publishes DONE a moment before its
        # ``done`` is set, and no event may follow to refresh the actions (Launch stayed disabled).
        over = status is not None and status.phase in (ClusterPhase.DONE, ClusterPhase.DETACHED)
        live = self.source is not None and not self.source.done and not over
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
