"""One role-status builder for the live controller and the replay.

A :class:`RoleView` holds what is known of one role; the controller changes it as things happen,
the replay (:class:`core.run.reader.RunReader`) and a reattaching controller change it from the
journal's records and the telemetry files, through the same methods. :meth:`RoleView.status` and
:func:`cluster_status` turn views into the immutable :class:`~core.run.status.RoleStatus` /
:class:`~core.run.status.ClusterStatus` the CLI, the control socket and the window show, so a reopened
run shows the table it showed live.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from core.cluster.render import role_dir
from core.cluster.spec import Task
from core.run.events import (
    Payload,
    RoleCrashLoop,
    RolePid,
    RoleStalled,
    RoleStateChanged,
    RoleStraggler,
    RoleWaiting,
)
from core.run.status import (
    ALIVE,
    TERMINAL,
    ClusterPhase,
    ClusterStatus,
    RoleState,
    RoleStatus,
    exit_text,
    role_status,
)
from core.telemetry.loss_tags import is_loss_tag
from core.telemetry.step_window import window_key
from core.telemetry.worker_stats import WorkerStats


class RoleView:
    """What is known of one role; owned by one thread (the controller's or the reader's)."""

    def __init__(self, task: Task, run_path: Path, since: float = 0.0) -> None:
        # The last status built, with what it was built from (see :meth:`status`).
        self._kept: tuple[tuple[int, int, int | None], RoleStatus] | None = None
        self.task = task
        self.run_path = run_path
        self.state = RoleState.PENDING
        self.state_since = since
        self.detail = ""
        self.pid: int | None = None
        self.pid_started: float | None = None  # core.run.pids.start_time(pid) when it was learned
        self.attempt = 0
        self.restarts = 0
        self.returncode: int | None = None
        self.signal: int | None = None
        self.started_at: float | None = None
        self.ended_at: float | None = None
        self.log_path: Path | None = None
        self.cpu_percent: float | None = None
        self.rss_bytes: int | None = None
        self.threads: int | None = None
        self.gpus: tuple[int, ...] = ()
        self.gpu_utilization_percent: float | None = None
        self.stats = WorkerStats()  # from the role's output (metrics.jsonl)
        self.tb_stats = WorkerStats()  # from its TensorBoard scalars (scalars.jsonl)
        self.scalar_tags: set[str] = set()
        self.stalled = False
        self.stalled_since: float | None = None  # the last progress, while stalled
        self.waiting: RoleWaiting | None = None  # what it waits for, while it waits
        self.crash: RoleCrashLoop | None = None  # while its attempts keep failing
        self.straggler: RoleStraggler | None = None  # while the straggler judge flags it
        self.last_exit = ""  # how its last failed attempt ended, and why (kept once it runs again)
        self.last_error = ""

    def __setattr__(self, name: str, value: Any) -> None:
        # Any field set drops the kept status: the controller's modules set a role's fields
        # directly in many places, and a status kept past one of them would show a stale table.
        object.__setattr__(self, name, value)
        self.__dict__["_kept"] = None

    # ------------------------------------------------------------------ changes

    def enter_state(self, state: RoleState, t: float, detail: str) -> None:
        """Record that the role is in ``state`` since ``t``, with the times and the log that follow
        from it. Whether the move is allowed is the owner's to check: the controller's role machine
        (:mod:`core.controller.roles`) live, the journal's order when read back."""
        self.state = state
        self.state_since = round(t, 3)
        self.detail = detail
        if state == RoleState.STARTING:
            self.started_at, self.ended_at = self.state_since, None
            self.log_path = role_dir(self.run_path, self.task) / f"attempt-{self.attempt}.log"
        elif state in TERMINAL or state == RoleState.BACKOFF:
            self.ended_at = self.state_since

    def apply(self, t: float, payload: Payload) -> None:
        """Take one event about this role (a state, its pid, a stall, a wait), live or read back
        from the journal; other payloads say nothing of the role's state."""
        match payload:
            case RoleStateChanged():
                self.pid = payload.pid
                self.attempt = payload.attempt or self.attempt
                self.restarts = payload.restarts
                self.returncode = payload.returncode
                self.signal = payload.signal
                self.enter_state(payload.state, t, payload.detail)
                if payload.state in (RoleState.BACKOFF, RoleState.FAILED):
                    self.last_exit = exit_text(payload.returncode, payload.signal) or self.last_exit
                    self.last_error = payload.error
            case RolePid():
                self.pid = payload.pid
            case RoleStalled():
                self.stalled = payload.stalled
                self.stalled_since = t - (payload.stalled_for_s or 0.0) if payload.stalled else None
            case RoleWaiting():
                self.waiting = payload if payload.waiting else None
            case RoleCrashLoop():
                self.crash = payload if payload.looping else None
            case RoleStraggler():
                self.straggler = payload if payload.straggler else None

    def add_metrics(self, samples: Iterable[dict[str, Any]], *, windows_from: int = 0) -> None:
        """Take parsed output metrics (records of metrics.jsonl); one without a sample's fields is
        skipped. ``windows_from``: the first records not taken into the rate window and the straggler
        readings (:meth:`WorkerStats.add_records`)."""
        self.stats.add_records(samples, windows_from=windows_from)

    def add_scalars(self, points: Iterable[dict[str, Any]], *, windows_from: int = 0) -> None:
        """Take TensorBoard scalars ({tag, step, wall_time, value}): the step and any loss tag;
        ``windows_from`` as for :meth:`add_metrics`."""
        for i, p in enumerate(points):
            tag, step, value = p.get("tag"), p.get("step"), p.get("value")
            if not isinstance(tag, str) or not isinstance(step, int) or not isinstance(value, (int, float)):
                continue
            self.scalar_tags.add(tag)
            t = float(p.get("wall_time") or 0.0)
            loss = float(value) if is_loss_tag(tag) else None
            extra = {} if loss is not None else {tag: float(value)}
            self.tb_stats.take(
                t, step, loss=loss, step_time_s=None, steps_per_sec=None, extra=extra, windows=i >= windows_from
            )

    # ------------------------------------------------------------------ the view

    def _shown_stats(self) -> tuple[WorkerStats, str | None]:
        """The figures shown: from the output, else from TensorBoard scalars; and which."""
        if self.stats.step is not None or self.stats.loss is not None:
            return self.stats, "output"
        if self.tb_stats.step is not None or self.tb_stats.loss is not None:
            return self.tb_stats, "tb"
        return self.stats, None

    def shown_stats(self) -> WorkerStats:
        """The figures :meth:`status` shows: from the output, else from TensorBoard scalars."""
        return self._shown_stats()[0]

    def status(self, *, now: float, window_end: float | None = None) -> RoleStatus:
        """The immutable status; figures of the process only while it lives. ``window_end``: where
        the run's rate window ends (its newest training record, :func:`rate_window_end`).

        The last status is returned again while nothing it was built from changed: no field of
        the view set, no record taken by its figures, the window ending in the same bucket, and
        it not stalled (its ``stalled_for_s`` counts from ``now``). A refresh of 257 roles of which
        one changed builds one status, not 257."""
        key = (self.stats.samples, self.tb_stats.samples, None if window_end is None else window_key(window_end))
        kept = self._kept
        if kept is not None and kept[0] == key:
            return kept[1]
        status = self._build(now=now, window_end=window_end)
        if status.stalled_for_s is None:
            self.__dict__["_kept"] = (key, status)  # not through __setattr__, which drops it
        return status

    def _build(self, *, now: float, window_end: float | None) -> RoleStatus:
        t = self.task
        alive = self.state in ALIVE
        stats, source = self._shown_stats()
        straggler = self.straggler if self.state == RoleState.RUNNING else None
        loss = stats.loss
        if loss is None and self.tb_stats.loss is not None:
            loss, source = self.tb_stats.loss, "tb"  # steps from the output, the loss from TensorBoard
        # role_status(): the status without the dataclass's __init__ (every field named here).
        return role_status(
            dict(
                role=t.role_id,
                job=t.job,
                index=t.index,
                host=t.host,
                address=t.address,
                state=self.state,
                state_since=self.state_since,
                pid=self.pid if alive else None,
                attempt=self.attempt,
                restarts=self.restarts,
                returncode=self.returncode,
                signal=self.signal,
                started_at=self.started_at,
                ended_at=self.ended_at,
                detail=self.detail,
                log_path=self.log_path,
                cpu_percent=self.cpu_percent if alive else None,
                rss_bytes=self.rss_bytes if alive else None,
                threads=self.threads if alive else None,
                gpus=self.gpus if alive else (),
                gpu_utilization_percent=self.gpu_utilization_percent if alive else None,
                step=stats.step,
                loss=loss,
                step_time_s=stats.step_time_s,
                steps_per_sec=stats.steps_per_sec,
                straggler=straggler is not None,
                straggler_detail=straggler.detail if straggler is not None else "",
                window=stats.window.sums(window_end)
                if window_end is not None and stats.window.last_t is not None
                else None,
                stalled=self.stalled and self.state == RoleState.RUNNING,
                stalled_for_s=(
                    round(now - self.stalled_since, 1)
                    if self.stalled and self.state == RoleState.RUNNING and self.stalled_since is not None
                    else None
                ),
                loss_source=source,
                waiting_for=self.waiting.waiting_for if self.waiting else None,
                waiting_message=self.waiting.message if self.waiting else "",
                waiting_fix=self.waiting.fix if self.waiting else "",
                crash_looping=self.crash is not None,
                last_exit=self.last_exit,
                last_error=self.last_error,
                attempts=self.crash.attempts if self.crash is not None else None,
                next_attempt_at=self.crash.next_attempt_at if self.crash is not None else None,
            )
        )


def apply_sample(views: Mapping[str, RoleView], record: dict[str, Any]) -> None:
    """Take one host sample ({roles: {name: figures}, gpus: [...]}) into the views of its roles.

    A role's GPUs are those on which NVML sees one of its processes; its utilisation the mean of
    theirs. Figures of a role the agent reports dead are left as they were.
    """
    roles: dict[str, Any] = record["roles"] if isinstance(record.get("roles"), dict) else {}
    gpus: list[Any] = record["gpus"] if isinstance(record.get("gpus"), list) else []
    on_gpu: dict[str, set[int]] = {}
    utilization: dict[int, float] = {}
    for gpu in gpus:
        if not isinstance(gpu, dict):
            continue
        index = int(gpu.get("index", -1))
        util = gpu.get("utilization_gpu_percent")
        if isinstance(util, (int, float)):
            utilization[index] = float(util)
        for proc in gpu.get("processes") or []:
            if isinstance(proc, dict) and isinstance(proc.get("role"), str):
                on_gpu.setdefault(proc["role"], set()).add(index)
    for name, figures in roles.items():
        view = views.get(name)
        if view is None or not isinstance(figures, dict) or not figures.get("alive", True):
            continue
        view.cpu_percent = figures.get("cpu_percent")
        view.rss_bytes = figures.get("rss_bytes")
        view.threads = figures.get("threads")
        view.gpus = tuple(sorted(on_gpu.get(name, ())))
        values = [utilization[g] for g in view.gpus if g in utilization]
        view.gpu_utilization_percent = sum(values) / len(values) if values else None


def cluster_status(
    phase: ClusterPhase, result: str | None, reason: str, *, views: Iterable[RoleView], now: float
) -> ClusterStatus:
    """The cluster's status, built whole."""
    views = list(views)
    end = rate_window_end(views)
    return ClusterStatus(phase, result, reason, tuple(v.status(now=now, window_end=end) for v in views))


def rate_window_end(views: Iterable[RoleView]) -> float | None:
    """Where the run's rate window ends: at the newest training record of any role."""
    ends = [v.shown_stats().window.last_t for v in views]
    known = [t for t in ends if t is not None]
    return max(known) if known else None


class StatusBoard:
    """The latest :class:`ClusterStatus` of a set of role views, built by the thread that owns them
    and swapped in whole, so any other thread (the window's, once a frame) reads :attr:`current`
    without a lock and never waits for the owner.

    A role's change rebuilds that role's status only (:meth:`role_changed`, before its event is
    published); :meth:`refresh` rebuilds every role's figures and the run's rate window, which the
    owner calls as telemetry arrives, a few times a second at most."""

    def __init__(self, views: Mapping[str, RoleView], now: float) -> None:
        self._views = views
        self._phase = ClusterPhase.IDLE
        self._result: str | None = None
        self._reason = ""
        self._recovery, self._recovering = "", False
        self._window_end: float | None = None
        self._roles: dict[str, RoleStatus] = {}
        self.current = ClusterStatus(ClusterPhase.IDLE, None, "", ())
        self.refresh(now)

    def set_phase(self, phase: ClusterPhase, result: str | None, reason: str) -> None:
        """A new phase; once DONE, every role's figures are rebuilt, so the last status holds the
        whole run's window (what the runs list's summary then gives)."""
        self._phase, self._result, self._reason = phase, result, reason
        if phase == ClusterPhase.DONE:
            self.refresh(time.time())
        else:
            self._swap()

    def set_recovery(self, text: str, *, recovering: bool) -> None:
        self._recovery, self._recovering = text, recovering
        self._swap()

    def role_changed(self, name: str, now: float) -> None:
        view = self._views.get(name)
        if view is not None:
            self._roles[name] = view.status(now=now, window_end=self._window_end)
            self._swap()

    def refresh(self, now: float) -> None:
        views = self._views.values()
        self._window_end = rate_window_end(views)
        self._roles = {v.task.role_id: v.status(now=now, window_end=self._window_end) for v in views}
        self._swap()

    def _swap(self) -> None:
        roles = tuple(self._roles[name] for name in self._views if name in self._roles)
        # One reference swapped: a reader never sees half a status.
        self.current = ClusterStatus(self._phase, self._result, self._reason, roles, self._recovery, self._recovering)
