"""The main window's frame: each tick of its timer drains the event inbox (the run's events and
role output, in batches so a reopened run's backlog never stalls a frame), then redraws the roles
table, the overview and only the tab that is on screen. A backlog bigger than a frame's slice goes
on between frames, a slice per turn of the event loop (the catch-up timer), so a reopened run's
telemetry goes in as fast as the GUI thread can take it and the frames only redraw meanwhile.

:class:`FramePump` is the window's part that does this, over the run its
:class:`~gui.window.run_wiring.RunBinding` holds and the views it is given (:class:`RunViews`).
Slow reads of the run (a role's placement summary, the TF devices) are asked of its own
``window-reads`` thread and taken on a later frame.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from PySide6 import QtCore, QtWidgets

from core.cluster.spec import ClusterSpec
from core.controller.session import RunSource
from core.run.events import (
    CheckpointsChanged,
    Event,
    GpuStatus,
    HostStateChanged,
    Metrics,
    RecoveryChanged,
    RoleStateChanged,
    Sample,
    Scalars,
    SlurmChanged,
    WarningMessage,
)
from core.run.inbox import EventInbox
from core.run.status import ClusterStatus
from core.telemetry.pci import tf_devices_by_bus
from core.views.overview import PlannedRole
from core.views.rates import StepRates, status_rates
from core.views.slurm_text import slurm_banner
from gui.offthread import JobThread
from gui.run.overview import ClusterOverview
from gui.run.roles import RolesView
from gui.run.tabs.gpus import GpuPanel
from gui.run.tabs.logs import LogPanel
from gui.run.tabs.placement import PlacementPanel
from gui.run.tabs.training import TrainingPanel
from gui.window.desktop_notify import DesktopNotifier
from gui.window.run_wiring import RunBinding

FRAME_HZ = 10
# A reopened run's backlog of telemetry goes into the views in batches of this many points, for at
# most FRAME_TELEMETRY_S a turn of the event loop, so no turn stalls the window; a live run sends far
# fewer.
FRAME_TELEMETRY_POINTS: int | None = 2_000
FRAME_TELEMETRY_S = 0.03
# What a frame takes itself after it redraws; the rest goes in the slices between frames, each on
# its own turn of the event loop. At 10 ms (before its redraw), a window following 256 simulated
# workers spent it whole in every frame that a second of lines reached (every fifth frame), with
# the table's and the plots' redraw on top: those were the frames over 16 ms (docs/benchmarks.md,
# item 16).
FRAME_OWN_TELEMETRY_S = 0.002
# ... in batches of this many points, so its time is checked often enough to hold: a window
# following 256 simulated workers is handed a second of every worker's lines at once (2,560
# points), and the frame's one batch of FRAME_TELEMETRY_POINTS took 60-120 ms of a frame's CPU.
FRAME_OWN_TELEMETRY_POINTS = 64
# ... and none once the frame's redraw has taken this much of the GUI thread's CPU: a heavy
# redraw (a second's samples of 32 hosts on the GPUs tab, a spread view) paints heavily too.
FRAME_CPU_BUDGET_S = 0.006
CATCH_UP_AFTER_FRAME_MS = 5  # a backlog's next slice after a frame
CATCH_UP_FRAME_MARGIN_S = 0.005  # a slice between frames ends this long before the next frame is due
CATCH_UP_MIN_S = 0.005  # ... and has at least this, else the frame starts the next one
SLOW_REFRESH_S = 1.0  # placement tables and TF devices: they change slowly and cost more
# Past FIGURES_SCALE_ROLES roles, the roles table's and the overview's figures (step, loss, CPU,
# uptime) are redrawn once every FIGURES_EVERY_S; a change of any role's state, of the set of roles
# or of a host's link, at once. At 65 roles, redrawing both ten times a second (every
# step count changes every frame) was most of the GUI thread under load (py-spy --native: 30-40 %
# in QTreeView's paint, 15-20 % in the overview's), and a monitor's figures are read at 1 Hz.
FIGURES_SCALE_ROLES = 16
FIGURES_EVERY_S = 1.0
# ... and the roles table's rows a share each frame (RolesView.show_status): all 257 rows of a
# 256-worker run in one frame were its 20-40 ms p95 frame (py-spy: role_row, the font
# measurements, a dataChanged a row, then the paint of every visible row at once). The frame that
# redraws the overview takes no share (only the rows whose state changed): with a share, that
# frame, a tenth of all, was a large run's p95 (14.5 ms of GUI-thread CPU on the GPUs tab, 7 of
# it the share and its paint). So the other frames of a second share the rows.
TABLE_PARTS = round(FIGURES_EVERY_S * FRAME_HZ) - 1


@dataclass(frozen=True)
class RunViews:
    """The widgets that show a run, which the frame redraws."""

    roles: RolesView
    overview: ClusterOverview
    tabs: QtWidgets.QTabWidget
    training: TrainingPanel
    gpus: GpuPanel
    placement: PlacementPanel
    logs: LogPanel
    phase_label: QtWidgets.QLabel  # the run's phase, at the toolbar's end
    warning_label: QtWidgets.QLabel  # in the status bar: how many warnings, the latest in its tooltip


class FramePump(QtCore.QObject):
    """What the window does each frame, from the latest state of its run: the frame's timer and
    the catch-up timer between frames, the inbox's events dispatched to the views, the views
    redrawn; what the run's events said (warnings, hosts' links, the Slurm job) kept for them."""

    def __init__(
        self,
        window: QtWidgets.QMainWindow,
        *,
        binding: RunBinding,
        views: RunViews,
        desktop_notifier: DesktopNotifier,
        on_status: Callable[[ClusterStatus | None], None],
        after_frame: Callable[[], None],
    ) -> None:
        super().__init__(window)
        self._window = window
        self._binding = binding
        self.roles, self.overview, self.tabs = views.roles, views.overview, views.tabs
        self.training, self.gpus, self.placement, self.logs = views.training, views.gpus, views.placement, views.logs
        self.phase_label, self.warning_label = views.phase_label, views.warning_label
        self.desktop_notifier = desktop_notifier
        self._on_status = on_status  # the window enables its actions from each frame's status
        self._after_frame = after_frame
        self.warnings: list[str] = []
        self.host_states: dict[str, dict[str, Any]] = {}  # latest host_state per host (SSH links)
        self.slurm_text = ""  # "Slurm job J on NODES" for a run on Slurm
        self._backlog_after_frame = False  # a slice of a backlog stopped for the next frame (_on_catch_up)
        self._frame_ended = 0.0  # time.monotonic() at the end of the last frame
        self._last_slow_refresh = 0.0
        self._last_status: ClusterStatus | None = None
        self._figures_shown: tuple[Any, float] | None = None  # (what the table last showed of states, when)
        self._rates: StepRates | None = None  # the run's, as the last figures shown
        self._table_part = 0  # a large run's share of the table's rows this frame
        self._stopped = False  # stop() was called: no timer is started again
        self._lists_due = False  # the tabs' status and role lists, a frame after the overview
        self._live = False  # the bound run is live (its source not done), as the last frame read it
        # Slow reads of the source (placement summaries, TF devices) run here, never on the GUI thread.
        self._background = JobThread("window-reads")
        self._placement_job: tuple[Future[dict[str, Any]], str, bool] | None = None
        self._devices_job: Future[dict[str, list[str]]] | None = None
        self.timer = QtCore.QTimer(self)  # the frame's
        self.timer.setInterval(1000 // FRAME_HZ)
        self.timer.timeout.connect(self._on_frame)
        self.catch_up_timer = QtCore.QTimer(self)  # more of a backlog between frames
        self.catch_up_timer.setSingleShot(True)
        self.catch_up_timer.setInterval(0)
        self.catch_up_timer.timeout.connect(self._on_catch_up)

    @property
    def source(self) -> RunSource | None:
        return self._binding.source

    @property
    def spec(self) -> ClusterSpec | None:
        return self._binding.spec

    @property
    def inbox(self) -> EventInbox:
        """The bound source's inbox (each source has its own)."""
        return self._binding.inbox

    @property
    def last_status(self) -> ClusterStatus | None:
        """The run's status as the last frame read it."""
        return self._last_status

    def statusBar(self) -> QtWidgets.QStatusBar:  # the window's, named as Qt names it
        return self._window.statusBar()

    def start(self) -> None:
        self._stopped = False
        self.timer.start()

    def stop(self) -> None:
        """No more frames (the window is closing); slow reads not begun are dropped."""
        self._stopped = True
        self.timer.stop()
        self.catch_up_timer.stop()
        self._background.shutdown(cancel_pending=True)

    def reset(self) -> None:
        """Another run is bound: the views and what the last run's events said start empty."""
        self.training.clear()
        self.gpus.clear()
        self.logs.clear()
        self.warnings.clear()
        self.warning_label.setText("")
        self.slurm_text = ""
        self._last_status = None
        self._figures_shown = None
        self._rates = None
        self._lists_due = False
        self.roles.forget_shown()

    def refresh_table(self) -> None:
        """The roles table, the overview and the phase now, not at the next frame."""
        self._refresh_table()  # (whether it drew the figures: for the frame only)

    def refresh_visible(self, *, force: bool = False) -> None:
        """The tab on screen now (``force``: its slow parts too), not at the next frame."""
        self._refresh_visible(force=force)

    def refresh_placement(self) -> None:
        """Ask for the placement of the role the Placement tab shows now."""
        self._refresh_placement()

    def _on_frame(self) -> None:
        # A frame redraws first, then takes a short slice of telemetry with what is left of its
        # CPU budget (FRAME_CPU_BUDGET_S; drawn by the next frame) and leaves the rest to the
        # catch-up timer, whose slices run on their own turns of the event loop. A backlog's
        # slice that stopped for this frame left the rest to after it.
        # A frame that redraws a large run's once-a-second figures (the overview and its paint,
        # 4-6 ms at 257 roles) leaves the visible tab's redraw to the next frame, and all of
        # its telemetry to the slices after it.
        started = time.thread_time()
        backlog, self._backlog_after_frame = self._backlog_after_frame, False
        figures = self._refresh_table()
        if not figures:
            self._refresh_visible()
        if not backlog and not self.catch_up_timer.isActive():
            budget_s = 0.0 if figures else FRAME_CPU_BUDGET_S - (time.thread_time() - started)
            own = budget_s > 0
            backlog = (
                self._take_telemetry(min(FRAME_OWN_TELEMETRY_S, budget_s), own=True)
                if own
                else self.inbox.pending() > 0
            )
        self._after_frame()  # the window's: the reader of a run just opened starts, a close goes on
        if backlog and not self._stopped and not self.catch_up_timer.isActive():
            # Started here, at the very end (after the window's part, which can take longer than
            # the timer's interval on a loaded machine, and may have stopped the frames: a close),
            # and not at once: a timer due while Qt fires the due ones runs in the same turn, and
            # this frame's paint and the user's input come first.
            self.catch_up_timer.start(CATCH_UP_AFTER_FRAME_MS)
        self._frame_ended = time.monotonic()

    def _on_catch_up(self) -> None:
        """Another slice of a backlog between two frames, once the event loop has turned: a
        reopened run's telemetry goes in as fast as the GUI thread can take it, not one slice a
        frame (the window idled 60 ms of every 100 while a day-long run's backlog waited).

        A slice ends before the next frame is due, and then leaves the next slice to that frame:
        Qt fires the timers that are due together, so a slice that ran into the frame's time, or
        one due when the frame was, ran back to back with the frame and its paint, and the window
        answered nothing for 100-160 ms opening a day-long run."""
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

    def _take_telemetry(self, budget_s: float = FRAME_TELEMETRY_S, *, own: bool = False) -> bool:
        """Hand the inbox's events and output to the views for at most ``budget_s``; whether that
        time ran out with events still coming (a backlog). ``own``: the frame's own slice, in
        smaller batches (FRAME_OWN_TELEMETRY_POINTS)."""
        deadline = time.monotonic() + budget_s
        # Read here, not bound as a default: benchmarks/bench_open_run.py sets them for its baseline.
        points = FRAME_TELEMETRY_POINTS
        if own and points is not None:
            points = min(points, FRAME_OWN_TELEMETRY_POINTS)
        while True:
            events, output = self.inbox.drain(points)
            samples: list[dict[str, Any]] = []  # consecutive host samples go to the GPUs in one batch
            for event in events:
                if isinstance(event.payload, Sample):
                    self.desktop_notifier.on_event(event)
                    samples.append(event.to_record())
                    continue
                if samples:
                    self.gpus.add_samples(samples)
                    samples = []
                self._dispatch(event)
            if samples:
                self.gpus.add_samples(samples)
            for role, pieces in output.items():
                for piece in pieces:
                    self.logs.add_output(role, piece.text, attempt=piece.attempt)
            if not events or time.monotonic() >= deadline:
                break
        return bool(events)

    def _dispatch(self, event: Event) -> None:
        self.desktop_notifier.on_event(event)  # the system tray, when not the active window
        p = event.payload
        match p:
            case Metrics() if event.role:
                self.training.add_samples(event.role, p.samples)
            case RoleStateChanged() if event.role:
                self.logs.note_role_state(event.role, event.t, p)  # the Logs tab's attempt dividers
            case Scalars() if event.role:
                self.training.add_scalars(event.role, p.points)
            case CheckpointsChanged() | RecoveryChanged():
                self.training.add_checkpoints(p)
            case Sample():
                self.gpus.add_sample(event.to_record())
            case GpuStatus():
                self.gpus.set_gpu_status(p.host, str(p.status))
            case HostStateChanged():
                self.host_states[p.host] = p.to_record()
                self.gpus.set_link_state(p.host, p.state, p.reason)
                if p.state not in ("connected", "connecting"):
                    self.statusBar().showMessage(f"host {p.host}: {p.state} {p.reason}", 15000)
            case SlurmChanged():
                self.slurm_text = slurm_banner(p.to_record())
            case WarningMessage():
                self.warnings.append(p.message)
                del self.warnings[:-100]
                self.warning_label.setText(f"{len(self.warnings)} warning{'s' if len(self.warnings) != 1 else ''}")
                self.warning_label.setToolTip("\n".join(self.warnings[-10:]))
                self.statusBar().showMessage(f"warning: {p.message}", 15000)

    def _refresh_visible(self, *, force: bool = False) -> None:
        self.training.set_live(live=self._live)  # a finished run's plots keep no room ahead of their data
        self.gpus.set_live(live=self._live)
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
                self.placement.show_summary(role, future.result(), role_has_gpu=has_gpu)
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

    def _refresh_table(self) -> bool:
        """The roles table, the overview and the phase; whether it redrew a large run's
        once-a-second figures (the overview) this frame."""
        if self.source is None:
            self.phase_label.setText("not launched")
            self._live = False
            # explicit_tasks: a counted job (tasks = N on Slurm) has no host before its launch
            tasks = self.spec.explicit_tasks() if self.spec else []
            self.roles.show_tasks(tasks)
            # A counted job's roles (no host until the allocation places them) under "Slurm".
            planned = self.spec.planned_tasks() if self.spec else []
            self.overview.set_roles([PlannedRole(t.role_id, t.job, t.host or "Slurm") for t in planned])
            self.training.set_status(None)
            self._on_status(None)
            self._sync_role_lists([t.role_id for t in tasks])
            return False
        status = self.source.status()
        self._last_status = status
        phase = f"cluster {status.phase}"
        if status.result:
            phase += f": {status.result} ({status.reason})"
        self._live = not self.source.done  # (read once a frame: a reader's looks at its launcher)
        if not self.source.controls_here:
            phase = ("live run: " if self._live else "past run: ") + phase
        if self.slurm_text:
            phase += f"  |  {self.slurm_text}"
        self.phase_label.setText(phase)
        self._on_status(status)
        due = self._figures_due(status)
        if due or self._rates is None:
            self._rates = status_rates(status.roles, self.spec)  # one set of figures for every view (core.views.rates)
        rates = self._rates
        large = len(status.roles) > FIGURES_SCALE_ROLES
        if large and due:  # the overview's frame: only the rows whose state changed
            self.roles.show_status(status, self.host_states, rates, part=-1, parts=TABLE_PARTS)
        elif large:  # a share of the rows each other frame, a new state at once
            self.roles.show_status(status, self.host_states, rates, part=self._table_part, parts=TABLE_PARTS)
            self._table_part = (self._table_part + 1) % TABLE_PARTS
        elif due:
            self.roles.show_status(status, self.host_states, rates)
        if due:
            self.overview.set_roles(status.roles, rates)
            if large and not self._lists_due:
                # The Training and Logs tabs' status and the role lists on the next frame: with
                # the overview's rebuild and paint, they made the once-a-second frame at 256
                # workers 25-30 ms. A second due frame in a row (states changing) does them.
                self._lists_due = True
                return True
        elif not self._lists_due:
            return False
        self._lists_due = False
        self.training.set_status(status.roles, rates=rates)
        self.logs.set_status(status.roles, time.time())
        self._sync_role_lists([r.role for r in status.roles])
        return due and large

    def _figures_due(self, status: ClusterStatus) -> bool:
        """Whether the table, the overview and the role lists should show ``status`` this frame:
        always up to FIGURES_SCALE_ROLES roles, else when a state changed or once a second."""
        now = time.monotonic()
        states = (
            status.phase,
            tuple(
                (r.role, r.host, r.state, r.attempt, r.stalled, r.straggler, r.waiting_for, r.crash_looping)
                for r in status.roles
            ),
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
