"""Role and cluster states, the immutable status views, and the events every source publishes.

Shared by the live :class:`~core.controller.controller.Controller` and the replay
(:class:`~core.run.reader.RunReader`), so both speak the same vocabulary.
"""

from __future__ import annotations

import enum
import signal as signal_module
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from core.telemetry.step_window import StepSums


class RoleState(enum.StrEnum):
    """Where one role is in its life (supervisord's states, Kubeflow's outcomes)."""

    PENDING = "pending"
    STARTING = "starting"
    RUNNING = "running"
    BACKOFF = "backoff"
    STOPPING = "stopping"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    STOPPED = "stopped"

    def __str__(self) -> str:
        return self.value


TERMINAL = frozenset({RoleState.SUCCEEDED, RoleState.FAILED, RoleState.STOPPED})
ALIVE = frozenset({RoleState.STARTING, RoleState.RUNNING, RoleState.STOPPING})
# The transitions a role may take; anything else is refused with a warning.
ALLOWED = {
    RoleState.PENDING: {RoleState.STARTING, RoleState.STOPPED},
    RoleState.STARTING: {
        RoleState.RUNNING,
        RoleState.STOPPING,
        RoleState.BACKOFF,
        RoleState.SUCCEEDED,
        RoleState.FAILED,
        RoleState.STOPPED,
    },
    RoleState.RUNNING: {
        RoleState.STOPPING,
        RoleState.BACKOFF,
        RoleState.SUCCEEDED,
        RoleState.FAILED,
        RoleState.STOPPED,
    },
    RoleState.BACKOFF: {RoleState.STARTING, RoleState.STOPPED, RoleState.FAILED},
    RoleState.STOPPING: {RoleState.STOPPED, RoleState.STARTING, RoleState.FAILED},
    RoleState.SUCCEEDED: {RoleState.STARTING, RoleState.BACKOFF},
    RoleState.FAILED: {RoleState.STARTING},
    RoleState.STOPPED: {RoleState.STARTING},
}


class ClusterPhase(enum.StrEnum):
    """Where the whole cluster is."""

    IDLE = "idle"
    RUNNING = "running"
    COMPLETING = "completing"  # training done; stopping the servers
    FAILING = "failing"  # a role failed for good; stopping the rest
    STOPPING = "stopping"  # the user stopped the cluster
    DONE = "done"
    DETACHED = "detached"  # the controller left; the roles run on (reattach from the run directory)

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class RoleStatus:
    """An immutable view of one role, as the CLI and GUI show it."""

    role: str
    job: str
    index: int
    host: str
    address: str
    state: RoleState
    state_since: float
    pid: int | None
    attempt: int
    restarts: int
    returncode: int | None
    signal: int | None
    started_at: float | None
    ended_at: float | None
    detail: str
    log_path: Path | None
    cpu_percent: float | None = None
    rss_bytes: int | None = None
    threads: int | None = None
    gpus: tuple[int, ...] = ()  # GPUs on which NVML sees a process of this role
    gpu_utilization_percent: float | None = None  # mean over those GPUs
    step: int | None = None
    loss: float | None = None
    step_time_s: float | None = None
    steps_per_sec: float | None = None  # one over the latest step time (core.views.rates has the run's rates)
    # Flagged by the straggler judge (core.telemetry.stragglers): its step time over a window has
    # stayed well above its peers'; ``straggler_detail`` says by how much and for how long.
    straggler: bool = False
    straggler_detail: str = ""
    # What it did over the run's last 30 s of training: core.views.rates.step_rates makes the
    # run's global steps/s, its batches/s and examples/s of these.
    window: StepSums | None = None
    # No new training step for the cluster file's ``stall_after_s`` while running (hung, SIGSTOPped).
    stalled: bool = False
    stalled_for_s: float | None = None  # seconds since the last step, while stalled
    # Where step/loss come from: "output" (parsed lines) or "tb" (TensorBoard event files).
    loss_source: str | None = None
    # Why it waits, while it does: the role this one waits for, why and the fix (core/diagnosis/rules.py).
    waiting_for: str | None = None
    waiting_message: str = ""
    waiting_fix: str = ""
    # A crash loop (Kubernetes' CrashLoopBackOff): its attempts keep failing; it stays so until an
    # attempt runs healthily (a step, or reset_after_s). How the last failed attempt ended and why
    # (its traceback's exception line) stay once it runs again, until another attempt fails.
    crash_looping: bool = False
    last_exit: str = ""
    last_error: str = ""
    attempts: int | None = None  # the attempts its restart policy allows in all, while crash-looping
    next_attempt_at: float | None = None  # while crash-looping, between attempts

    @property
    def exit_text(self) -> str:
        return exit_text(self.returncode, self.signal)

    def to_json(self) -> dict[str, Any]:
        """This status as JSON values (the control socket's ``status`` reply, ``ctl status --json``)."""
        data = asdict(self)
        data["state"] = str(self.state)
        data["log_path"] = str(self.log_path) if self.log_path else None
        data["gpus"] = list(self.gpus)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RoleStatus:
        """The inverse of :meth:`to_json`. Keys it does not know (``last_lines``, or a newer
        TowerDeck's fields) are ignored; a missing or wrong field raises ``ValueError``."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        try:
            values["state"] = RoleState(values["state"])
            values["log_path"] = Path(values["log_path"]) if values.get("log_path") else None
            values["gpus"] = tuple(int(g) for g in values.get("gpus") or ())
            values["window"] = StepSums.from_json(values.get("window"))
            return cls(**values)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a role status ({exc}): {data.get('role')!r}") from exc


_ROLE_STATUS_FIELD_COUNT = len(fields(RoleStatus))


def role_status(values: dict[str, Any]) -> RoleStatus:
    """``RoleStatus(**values)``, the same object, made without the generated ``__init__`` when
    ``values`` holds one entry per field. A frozen dataclass's ``__init__`` sets each of the 39
    fields through ``object.__setattr__`` (~10x one dict update in a micro-benchmark), and the
    controller builds a status per role several times a second. Its one caller
    (:meth:`core.run.role_view.RoleView.status`) names every field, and tests compare the result
    with ``__init__``'s; any other count goes through ``__init__``, which says what is wrong."""
    if len(values) != _ROLE_STATUS_FIELD_COUNT:  # the count, not the names: ~1/3 of the saving
        return RoleStatus(**values)
    status = object.__new__(RoleStatus)
    status.__dict__.update(values)
    return status


@dataclass(frozen=True)
class ClusterStatus:
    """An immutable view of the cluster: its phase, its outcome once decided, and every role."""

    phase: ClusterPhase
    result: str | None  # "succeeded", "failed", "stopped" once decided
    reason: str
    roles: tuple[RoleStatus, ...]
    recovery: str = (
        ""  # the running recovery in words, or how the last one ended (core.run.events.RecoveryChanged.text)
    )
    recovering: bool = False  # a recovery is under way

    def role(self, name: str) -> RoleStatus:
        return next(r for r in self.roles if r.role == name)


def exit_text(returncode: int | None, signal: int | None) -> str:
    """How a process ended, in words: ``exit code 1``, ``killed by SIGKILL``."""
    if signal is not None:
        try:
            return f"killed by {signal_module.Signals(signal).name}"
        except ValueError:
            return f"killed by signal {signal}"
    if returncode is None:
        return ""
    return f"exit code {returncode}"


def agent_hosts(status_reply: dict[str, Any]) -> frozenset[str]:
    """The hosts whose roles a launcher reaches through their agent (SSH hosts, Slurm nodes), from
    its control socket's ``status`` reply; a launcher from before Slurm's were named gives its SSH
    hosts only."""
    hosts = status_reply.get("agent_hosts", status_reply.get("remote_hosts"))
    return frozenset(str(h) for h in hosts) if isinstance(hosts, list) else frozenset()
