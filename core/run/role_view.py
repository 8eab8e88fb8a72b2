"""One role-status builder for the live controller and the replay.

A :class:`RoleView` holds what is known of one role; the controller changes it as things happen,
the replay (:class:`core.run.reader.RunReader`) and a reattaching controller change it from the
journal's records and the telemetry files, through the same methods. :meth:`RoleView.status` and
:func:`cluster_status` turn views into the immutable :class:`~core.run.status.RoleStatus` /
:class:`~core.run.status.ClusterStatus` the CLI, the control socket and the window show, so a reopened
run shows the table it showed live.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from core.cluster.render import role_dir
from core.cluster.spec import Task
from core.run.status import ALIVE, TERMINAL, ClusterPhase, ClusterStatus, RoleState, RoleStatus
from core.telemetry.loss_tags import is_loss_tag
from core.telemetry.metrics import MetricSample
from core.telemetry.worker_stats import WorkerStats, stragglers


class RoleView:
    """What is known of one role; owned by one thread (the controller's or the reader's)."""

    def __init__(self, task: Task, run_path: Path, since: float = 0.0) -> None:
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
        self.waiting: dict[str, Any] | None = None  # the last role_waiting record, while it waits

    # ------------------------------------------------------------------ changes

    def enter_state(self, state: RoleState, t: float, detail: str) -> None:
        """The one place a state is entered; the times and the log follow from it."""
        self.state = state
        self.state_since = round(t, 3)
        self.detail = detail
        if state == RoleState.STARTING:
            self.started_at, self.ended_at = self.state_since, None
            self.log_path = role_dir(self.run_path, self.task) / f"attempt-{self.attempt}.log"
        elif state in TERMINAL or state == RoleState.BACKOFF:
            self.ended_at = self.state_since

    def apply_record(self, record: dict[str, Any]) -> None:
        """Take one journal record about this role (``role_state``, ``role_pid``, ``role_stalled``)."""
        kind = record.get("kind")
        t = float(record.get("t") or 0.0)
        if kind == "role_state":
            try:
                state = RoleState(str(record.get("state")))
            except ValueError:
                return
            self.pid = record.get("pid") if isinstance(record.get("pid"), int) else None
            self.attempt = int(record.get("attempt") or self.attempt)
            self.restarts = int(record.get("restarts") or 0)
            self.returncode = record.get("returncode")
            self.signal = record.get("signal")
            self.enter_state(state, t, str(record.get("detail", "")))
        elif kind == "role_pid":
            self.pid = record.get("pid") if isinstance(record.get("pid"), int) else None
        elif kind == "role_stalled":
            self.stalled = bool(record.get("stalled"))
            self.stalled_since = t - float(record.get("stalled_for_s") or 0.0) if self.stalled else None
        elif kind == "role_waiting":  # diagnosis (issue 13)
            self.waiting = dict(record) if record.get("waiting") else None

    def add_metrics(self, samples: Iterable[dict[str, Any]]) -> None:
        """Take parsed output metrics (records of metrics.jsonl); one without a sample's fields is skipped."""
        self.stats.add_records(samples)

    def add_scalars(self, points: Iterable[dict[str, Any]]) -> None:
        """Take TensorBoard scalars ({tag, step, wall_time, value}): the step and any loss tag."""
        for p in points:
            tag, step, value = p.get("tag"), p.get("step"), p.get("value")
            if not isinstance(tag, str) or not isinstance(step, int) or not isinstance(value, (int, float)):
                continue
            self.scalar_tags.add(tag)
            t = float(p.get("wall_time") or 0.0)
            loss = float(value) if is_loss_tag(tag) else None
            extra = {} if loss is not None else {tag: float(value)}
            self.tb_stats.add(MetricSample(t, step, loss, None, None, extra, "tensorboard"))

    # ------------------------------------------------------------------ the view

    def status(self, straggler: bool, now: float) -> RoleStatus:
        """The immutable status; figures of the process only while it lives."""
        t = self.task
        alive = self.state in ALIVE
        stats, source = self.stats, "output" if self.stats.step is not None or self.stats.loss is not None else None
        if source is None and (self.tb_stats.step is not None or self.tb_stats.loss is not None):
            stats, source = self.tb_stats, "tb"
        loss = stats.loss
        if loss is None and self.tb_stats.loss is not None:
            loss, source = self.tb_stats.loss, "tb"  # steps from the output, the loss from TensorBoard
        return RoleStatus(
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
            straggler=straggler,
            stalled=self.stalled and self.state == RoleState.RUNNING,
            stalled_for_s=(
                round(now - self.stalled_since, 1)
                if self.stalled and self.state == RoleState.RUNNING and self.stalled_since is not None
                else None
            ),
            loss_source=source,
            waiting_for=self.waiting.get("waiting_for") if self.waiting else None,
            waiting_message=str(self.waiting.get("message") or "") if self.waiting else "",
            waiting_fix=str(self.waiting.get("fix") or "") if self.waiting else "",
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
    phase: ClusterPhase, result: str | None, reason: str, views: Iterable[RoleView], now: float
) -> ClusterStatus:
    """The cluster's status; a running role whose step time is far above the others' is a straggler
    (only running roles count: a finished one's last step time says nothing now)."""
    views = list(views)
    times: dict[str, float] = {}
    for v in views:
        shown = v.status(False, now)
        if v.state == RoleState.RUNNING and shown.step_time_s is not None:
            times[v.task.role_id] = shown.step_time_s
    slow = stragglers(times)
    roles = tuple(v.status(v.task.role_id in slow, now) for v in views)
    return ClusterStatus(phase, result, reason, roles)
