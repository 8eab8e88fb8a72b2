"""The events every run source publishes, typed: one :class:`EventKind` and one frozen payload class
per kind, so the type checker catches a wrong kind or a wrong field where an event is made or read.

An :class:`Event` is ``(t, role, payload)``; its kind is its payload's. The live
:class:`~core.controller.controller.Controller` and the replay (:class:`~core.run.reader.RunReader`)
publish the same events. Views branch on the payload's class (``isinstance`` or ``match``), never on
a kind's string.

On disk each payload is one JSON record, ``{"t", "kind", "role", **fields}``: the state kinds go to
the journal (``events.jsonl``, :mod:`core.run.journal`), the telemetry kinds to their own files.
:meth:`to_record <RoleStateChanged.to_record>` writes the fields, :func:`payload_from_record` reads
them back, tolerant of what older TowerDecks wrote (a missing field takes its default, a damaged
record is skipped, never raised).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from core.run.status import ClusterPhase, RoleState
from core.telemetry.checkpoints import Checkpoint


class EventKind(enum.StrEnum):
    """What happened; each kind has one payload class below."""

    ROLE_STATE = "role_state"
    ROLE_PID = "role_pid"
    ROLE_OUTPUT = "role_output"
    ROLE_STALLED = "role_stalled"
    ROLE_WAITING = "role_waiting"
    ROLE_CRASH_LOOP = "role_crash_loop"
    ROLE_STRAGGLER = "role_straggler"
    CLUSTER_STATE = "cluster_state"
    RECOVERY = "recovery"
    CHECKPOINTS = "checkpoints"
    HOST_STATE = "host_state"
    GPU_STATUS = "gpu_status"
    SLURM = "slurm"
    WARNING = "warning"
    METRICS = "metrics"
    SCALARS = "scalars"
    SAMPLE = "sample"

    def __str__(self) -> str:
        return self.value


# Published but never journalled: each has its own file (or, for output, the role's log).
TELEMETRY_KINDS = frozenset({EventKind.METRICS, EventKind.SAMPLE, EventKind.SCALARS, EventKind.ROLE_OUTPUT})
STATE_KINDS = frozenset(EventKind) - TELEMETRY_KINDS


class JournalKind(enum.StrEnum):
    """Records the journal keeps that are not published as events: what users asked for and what
    the ``[notify]`` command was told. They explain the states that follow."""

    COMMAND = "command"
    NOTIFY = "notify"

    def __str__(self) -> str:
        return self.value


# ------------------------------------------------------------------------------------------ payloads


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _opt_str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


class _Payload:
    """What every payload has: its kind, and its fields as a JSON record."""

    KIND: ClassVar[EventKind]

    def to_record(self) -> dict[str, Any]:
        """The payload's fields as JSON values, in declaration order (the journal's format)."""
        return {f.name: _json_value(getattr(self, f.name)) for f in fields(self)}  # type: ignore[arg-type]


def _json_value(value: object) -> object:
    if isinstance(value, enum.Enum):
        return str(value)
    if isinstance(value, tuple):
        return list(value)
    return value


@dataclass(frozen=True)
class RoleStateChanged(_Payload):
    """A role entered ``state`` (from ``old``): the one event of a role's life, with its process
    figures at that moment (``pid``, ``attempt``, ``restarts``, and how it ended). ``error``: the
    line that says why an attempt that failed died (:func:`core.telemetry.errors.error_line`)."""

    KIND: ClassVar[EventKind] = EventKind.ROLE_STATE
    old: RoleState | None
    state: RoleState
    detail: str = ""
    pid: int | None = None
    attempt: int = 0
    restarts: int = 0
    returncode: int | None = None
    signal: int | None = None
    error: str = ""

    @classmethod
    def from_record(cls, r: Mapping[str, Any]) -> RoleStateChanged | None:
        try:
            state = RoleState(str(r.get("state")))
        except ValueError:
            return None
        try:
            old: RoleState | None = RoleState(str(r.get("old")))
        except ValueError:
            old = None
        return cls(
            old=old,
            state=state,
            detail=_str(r.get("detail")),
            pid=_int(r.get("pid")),
            attempt=_int(r.get("attempt")) or 0,
            restarts=_int(r.get("restarts")) or 0,
            returncode=_int(r.get("returncode")),
            signal=_int(r.get("signal")),
            error=_str(r.get("error")),
        )

    def to_record(self) -> dict[str, Any]:
        record = super().to_record()
        if not self.error:  # as journals have it: only an attempt that failed says why
            del record["error"]
        return record


@dataclass(frozen=True)
class RoleCrashLoop(_Payload):
    """A role whose attempts keep failing (``looping``: Kubernetes' CrashLoopBackOff), or that left
    that state (``looping`` false: an attempt ran healthily, the restart policy gave up, or it was
    stopped; ``detail`` says which). While looping: the attempt to come and how many the restart
    policy allows in all, how the last one ended (``exit``) and why (``error``), and when the next
    one starts."""

    KIND: ClassVar[EventKind] = EventKind.ROLE_CRASH_LOOP
    looping: bool
    attempt: int = 0
    attempts: int | None = None
    exit: str = ""
    error: str = ""
    next_attempt_at: float | None = None
    detail: str = ""

    @classmethod
    def from_record(cls, r: Mapping[str, Any]) -> RoleCrashLoop:
        return cls(
            looping=r.get("looping") is True,
            attempt=_int(r.get("attempt")) or 0,
            attempts=_int(r.get("attempts")),
            exit=_str(r.get("exit")),
            error=_str(r.get("error")),
            next_attempt_at=_float(r.get("next_attempt_at")),
            detail=_str(r.get("detail")),
        )


@dataclass(frozen=True)
class RolePid(_Payload):
    """The agent started a role's attempt: its process id and its log file; ``pid_started``, the
    process's start time, for a role on the launcher's machine (a reused pid is told apart by it)."""

    KIND: ClassVar[EventKind] = EventKind.ROLE_PID
    pid: int | None
    attempt: int = 0
    log: str = ""
    pid_started: float | None = None

    @classmethod
    def from_record(cls, r: Mapping[str, Any]) -> RolePid:
        return cls(
            pid=_int(r.get("pid")),
            attempt=_int(r.get("attempt")) or 0,
            log=_str(r.get("log")),
            pid_started=_float(r.get("pid_started")),
        )

    def to_record(self) -> dict[str, Any]:
        record: dict[str, Any] = {"pid": self.pid, "attempt": self.attempt, "log": self.log}
        if self.pid_started is not None:  # as journals have it: only for a role on the launcher's machine
            record["pid_started"] = self.pid_started
        return record


@dataclass(frozen=True)
class RoleOutput(_Payload):
    """Text a role printed (decoded, as the terminal shows it); ``offset`` is where it starts in the
    attempt's log, when known."""

    KIND: ClassVar[EventKind] = EventKind.ROLE_OUTPUT
    text: str
    attempt: int | None = None
    offset: int | None = None

    @classmethod
    def from_record(cls, r: Mapping[str, Any]) -> RoleOutput:
        return cls(text=_str(r.get("text")), attempt=_int(r.get("attempt")), offset=_int(r.get("offset")))


@dataclass(frozen=True)
class RoleStalled(_Payload):
    """A running role made no new step for ``stall_after_s`` (``stalled``), or made one again.
    ``stalled_for_s``: how long without a step, so far or in all; ``step``: the last one seen."""

    KIND: ClassVar[EventKind] = EventKind.ROLE_STALLED
    stalled: bool
    stalled_for_s: float | None = None
    step: int | None = None
    stall_after_s: float | None = None
    attempt: int = 0
    detail: str = ""

    @classmethod
    def from_record(cls, r: Mapping[str, Any]) -> RoleStalled:
        return cls(
            stalled=r.get("stalled") is True,
            stalled_for_s=_float(r.get("stalled_for_s")),
            step=_int(r.get("step")),
            stall_after_s=_float(r.get("stall_after_s")),
            attempt=_int(r.get("attempt")) or 0,
            detail=_str(r.get("detail")),
        )


@dataclass(frozen=True)
class RoleStraggler(_Payload):
    """The straggler judge (:mod:`core.telemetry.stragglers`) flagged a worker (``straggler``), or
    cleared its flag: its median step time over the window, its peers', their ratio, how long that
    held; ``detail`` says it in words."""

    KIND: ClassVar[EventKind] = EventKind.ROLE_STRAGGLER
    straggler: bool
    step_time_s: float | None = None
    peers_step_time_s: float | None = None
    ratio: float | None = None
    held_s: float = 0.0
    detail: str = ""

    @classmethod
    def from_record(cls, r: Mapping[str, Any]) -> RoleStraggler:
        return cls(
            straggler=r.get("straggler") is True,
            step_time_s=_float(r.get("step_time_s")),
            peers_step_time_s=_float(r.get("peers_step_time_s")),
            ratio=_float(r.get("ratio")),
            held_s=_float(r.get("held_s")) or 0.0,
            detail=_str(r.get("detail")),
        )


@dataclass(frozen=True)
class RoleWaiting(_Payload):
    """What a role waits for (``waiting``), or that it no longer waits; see
    :class:`core.diagnosis.rules.Diagnosis`. ``certain``: the wait can never end by itself."""

    KIND: ClassVar[EventKind] = EventKind.ROLE_WAITING
    waiting: bool
    waiting_for: str | None = None
    cause: str = ""
    certain: bool = False
    message: str = ""
    fix: str = ""
    line: str = ""
    since: float | None = None

    @classmethod
    def from_record(cls, r: Mapping[str, Any]) -> RoleWaiting:
        return cls(
            waiting=r.get("waiting") is True,
            waiting_for=_opt_str(r.get("waiting_for")),
            cause=_str(r.get("cause")),
            certain=r.get("certain") is True,
            message=_str(r.get("message")),
            fix=_str(r.get("fix")),
            line=_str(r.get("line")),
            since=_float(r.get("since")),
        )


@dataclass(frozen=True)
class ClusterStateChanged(_Payload):
    """The cluster entered ``phase``; ``result`` (succeeded, failed, stopped) once decided, and why."""

    KIND: ClassVar[EventKind] = EventKind.CLUSTER_STATE
    phase: ClusterPhase
    result: str | None = None
    reason: str = ""

    @classmethod
    def from_record(cls, r: Mapping[str, Any]) -> ClusterStateChanged | None:
        try:
            phase = ClusterPhase(str(r.get("phase")))
        except ValueError:
            return None
        return cls(phase=phase, result=_opt_str(r.get("result")), reason=_str(r.get("reason")))


@dataclass(frozen=True)
class RecoveryChanged(_Payload):
    """A recovery of the cluster (core/controller/recovery.py): ``phase`` ``started`` (``cause``:
    which role ended how; ``action``: what is restarted, ``roles``), ``recovered`` (the roles run
    and training moved on: from ``resumed_step``, ``lost_steps`` behind the step before the
    failure; ``checkpoint``, the checkpoint it restored when known) or ``failed`` (the budget of
    ``of`` recoveries in a row is spent, or a role could not be restarted; ``detail`` says why).
    ``number`` counts the recoveries in a row."""

    KIND: ClassVar[EventKind] = EventKind.RECOVERY
    phase: str
    number: int = 0
    of: int = 0
    cause: str = ""
    action: str = ""
    roles: tuple[str, ...] = ()
    step_before: int | None = None
    resumed_step: int | None = None
    lost_steps: int | None = None
    checkpoint: str | None = None
    detail: str = ""

    @classmethod
    def from_record(cls, r: Mapping[str, Any]) -> RecoveryChanged:
        return cls(
            phase=_str(r.get("phase")),
            number=_int(r.get("number")) or 0,
            of=_int(r.get("of")) or 0,
            cause=_str(r.get("cause")),
            action=_str(r.get("action")),
            roles=tuple(str(n) for n in _list(r.get("roles"))),
            step_before=_int(r.get("step_before")),
            resumed_step=_int(r.get("resumed_step")),
            lost_steps=_int(r.get("lost_steps")),
            checkpoint=_opt_str(r.get("checkpoint")),
            detail=_str(r.get("detail")),
        )

    def text(self) -> str:
        """The one line a person reads: ``recovering: ps:0 killed by SIGKILL; restarting ps:0 and
        chief:0 (recovery 1 of 3)``, ``recovered: resumed at step 1,240 from ckpt-62; lost 60
        steps``..."""
        if self.phase == "started":
            return f"recovering: {self.cause}; {self.action} (recovery {self.number} of {self.of})"
        if self.phase == "recovered":
            at = f"resumed at step {self.resumed_step:,}" if self.resumed_step is not None else "training goes on"
            source = f" from {self.checkpoint}" if self.checkpoint else ""
            lost = f"; lost {self.lost_steps:,} step{'s' if self.lost_steps != 1 else ''}" if self.lost_steps else ""
            return f"recovered: {at}{source}{lost}"
        return f"recovery failed: {self.detail}"


@dataclass(frozen=True)
class CheckpointsChanged(_Payload):
    """The run's checkpoint directory changed (core/controller/checkpoints.py): the checkpoints that
    appeared in it since the last event (``added``, oldest first), the names no longer listed
    (``removed``: TensorFlow keeps the newest few), the one it would restore now (``latest``), and
    ``problem``, one line when its state file could not be read (empty once it can). ``directory``
    and ``found_from`` say where the checkpoints are and how that was found. Only the changes are
    journalled: a week of checkpoints is a line each."""

    KIND: ClassVar[EventKind] = EventKind.CHECKPOINTS
    directory: str
    found_from: str = ""
    added: tuple[Checkpoint, ...] = ()
    removed: tuple[str, ...] = ()
    latest: str | None = None
    problem: str = ""

    @classmethod
    def from_record(cls, r: Mapping[str, Any]) -> CheckpointsChanged:
        return cls(
            directory=_str(r.get("directory")),
            found_from=_str(r.get("found_from")),
            added=tuple(c for item in _list(r.get("added")) if (c := Checkpoint.from_json(item)) is not None),
            removed=tuple(str(n) for n in _list(r.get("removed")) if isinstance(n, str)),
            latest=_opt_str(r.get("latest")),
            problem=_str(r.get("problem")),
        )

    def to_record(self) -> dict[str, Any]:
        return {
            "directory": self.directory,
            "found_from": self.found_from,
            "added": [c.to_json() for c in self.added],
            "removed": list(self.removed),
            "latest": self.latest,
            "problem": self.problem,
        }


@dataclass(frozen=True)
class HostStateChanged(_Payload):
    """How TowerDeck's link to a host's agent is doing: ``connecting``, ``connected``,
    ``reconnecting`` (``attempt``, ``retry_in_s``), ``disconnected`` or ``lost``, and why."""

    KIND: ClassVar[EventKind] = EventKind.HOST_STATE
    host: str
    state: str
    reason: str = ""
    attempt: int | None = None
    retry_in_s: float | None = None

    @classmethod
    def from_record(cls, r: Mapping[str, Any]) -> HostStateChanged:
        return cls(
            host=_str(r.get("host")),
            state=_str(r.get("state")),
            reason=_str(r.get("reason")),
            attempt=_int(r.get("attempt")),
            retry_in_s=_float(r.get("retry_in_s")),
        )

    def to_record(self) -> dict[str, Any]:
        record = super().to_record()
        return {k: v for k, v in record.items() if v is not None or k not in ("attempt", "retry_in_s")}


@dataclass(frozen=True)
class GpuStatus(_Payload):
    """Whether a host's GPUs can be read (``status``: ok, or why not) and how many there are."""

    KIND: ClassVar[EventKind] = EventKind.GPU_STATUS
    host: str
    status: str | None = None
    count: int | None = None

    @classmethod
    def from_record(cls, r: Mapping[str, Any]) -> GpuStatus:
        return cls(host=_str(r.get("host")), status=_opt_str(r.get("status")), count=_int(r.get("count")))


@dataclass(frozen=True)
class SlurmChanged(_Payload):
    """The run's Slurm allocation (see :mod:`core.controller.slurm`): its ``state`` (submitting,
    pending, running, ended, failed, cancelled), job id, why, nodes and each host's node and step."""

    KIND: ClassVar[EventKind] = EventKind.SLURM
    state: str
    job_id: str | None = None
    reason: str = ""
    partition: str | None = None
    nodelist: str = ""
    nodes: tuple[str, ...] = ()
    hosts: Mapping[str, str] = field(default_factory=dict)
    steps: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_record(cls, r: Mapping[str, Any]) -> SlurmChanged:
        job_id = r.get("job_id")
        return cls(
            state=_str(r.get("state")),
            job_id=str(job_id) if isinstance(job_id, (str, int)) and not isinstance(job_id, bool) else None,
            reason=_str(r.get("reason")),
            partition=_opt_str(r.get("partition")),
            nodelist=_str(r.get("nodelist")),
            nodes=tuple(str(n) for n in _list(r.get("nodes"))),
            hosts={str(k): str(v) for k, v in _dict(r.get("hosts")).items()},
            steps={str(k): str(v) for k, v in _dict(r.get("steps")).items()},
        )

    def to_record(self) -> dict[str, Any]:
        record = super().to_record()
        record["hosts"], record["steps"] = dict(self.hosts), dict(self.steps)
        return record


@dataclass(frozen=True)
class WarningMessage(_Payload):
    """Something a person should read: one line naming what and the fix. ``path`` and
    ``lost_bytes`` when a role's output could not be written."""

    KIND: ClassVar[EventKind] = EventKind.WARNING
    message: str
    path: str | None = None
    lost_bytes: int | None = None

    @classmethod
    def from_record(cls, r: Mapping[str, Any]) -> WarningMessage:
        return cls(message=_str(r.get("message")), path=_opt_str(r.get("path")), lost_bytes=_int(r.get("lost_bytes")))

    def to_record(self) -> dict[str, Any]:
        record: dict[str, Any] = {"message": self.message}
        if self.path is not None:
            record["path"] = self.path
        if self.lost_bytes is not None:
            record["lost_bytes"] = self.lost_bytes
        return record


@dataclass(frozen=True)
class Metrics(_Payload):
    """A batch of a role's parsed output figures: records of ``metrics.jsonl``
    (:func:`core.telemetry.live.sample_dict`), kept as dicts: a day's run holds millions."""

    KIND: ClassVar[EventKind] = EventKind.METRICS
    samples: list[dict[str, Any]]

    @classmethod
    def from_record(cls, r: Mapping[str, Any]) -> Metrics:
        return cls(samples=[s for s in _list(r.get("samples")) if isinstance(s, dict)])


@dataclass(frozen=True)
class Scalars(_Payload):
    """A batch of a role's TensorBoard scalars: ``points`` [{tag, step, wall_time, value}]."""

    KIND: ClassVar[EventKind] = EventKind.SCALARS
    points: list[dict[str, Any]]
    attempt: int | None = None

    @classmethod
    def from_record(cls, r: Mapping[str, Any]) -> Scalars:
        return cls(points=[p for p in _list(r.get("points")) if isinstance(p, dict)], attempt=_int(r.get("attempt")))


@dataclass(frozen=True)
class Sample(_Payload):
    """One host's sample (a record of ``telemetry/samples-<host>.jsonl``; its time is the event's):
    ``figures`` (host CPU, memory, load), ``roles`` (per role: alive, pids, cpu_percent, rss_bytes,
    threads) and ``gpus`` (per GPU: NVML figures and the processes on it, each mapped to a role)."""

    KIND: ClassVar[EventKind] = EventKind.SAMPLE
    host: str
    figures: dict[str, Any] | None = None
    roles: dict[str, Any] = field(default_factory=dict)
    gpus: list[Any] = field(default_factory=list)

    @classmethod
    def from_record(cls, r: Mapping[str, Any]) -> Sample:
        figures = r.get("figures")
        return cls(
            host=str(r.get("host")),
            figures=figures if isinstance(figures, dict) else None,
            roles=_dict(r.get("roles")),
            gpus=_list(r.get("gpus")),
        )

    def to_record(self) -> dict[str, Any]:
        # Spelled out: a reopened run's views take thousands of samples as records.
        return {"host": self.host, "figures": self.figures, "roles": self.roles, "gpus": self.gpus}


Payload = (
    RoleStateChanged
    | RolePid
    | RoleOutput
    | RoleStalled
    | RoleWaiting
    | RoleCrashLoop
    | RoleStraggler
    | ClusterStateChanged
    | RecoveryChanged
    | CheckpointsChanged
    | HostStateChanged
    | GpuStatus
    | SlurmChanged
    | WarningMessage
    | Metrics
    | Scalars
    | Sample
)

_DECODERS: dict[str, Callable[[Mapping[str, Any]], Payload | None]] = {
    str(cls.KIND): cls.from_record
    for cls in (
        RoleStateChanged,
        RolePid,
        RoleOutput,
        RoleStalled,
        RoleWaiting,
        RoleCrashLoop,
        RoleStraggler,
        ClusterStateChanged,
        RecoveryChanged,
        CheckpointsChanged,
        HostStateChanged,
        GpuStatus,
        SlurmChanged,
        WarningMessage,
        Metrics,
        Scalars,
        Sample,
    )
}
assert set(_DECODERS) == {str(k) for k in EventKind}, "every kind has a payload class"


def payload_from_record(record: Mapping[str, Any]) -> Payload | None:
    """The payload of a JSON record (a journal line, or a telemetry file's ``sample``); None for a
    kind that is not an event (a user's command, a notification) or a record too damaged to show."""
    decode = _DECODERS.get(str(record.get("kind")))
    return decode(record) if decode is not None else None


@dataclass(frozen=True)
class Event:
    """Something that happened at ``t``, to ``role`` (or to the cluster or a host: None)."""

    t: float
    role: str | None
    payload: Payload

    @property
    def kind(self) -> EventKind:
        return self.payload.KIND

    def to_record(self) -> dict[str, Any]:
        """The event as the journal keeps it: ``{"t", "kind", "role", **fields}``."""
        return {"t": self.t, "kind": str(self.kind), "role": self.role, **self.payload.to_record()}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Event | None:
        """The event a journal record holds; None when it is not one (see :func:`payload_from_record`)."""
        payload = payload_from_record(record)
        if payload is None:
            return None
        role = record.get("role")
        return cls(_float(record.get("t")) or 0.0, role if isinstance(role, str) else None, payload)


def warning(message: str, t: float, role: str | None = None) -> Event:
    """A :class:`WarningMessage` event: the one line a person reads."""
    return Event(t, role, WarningMessage(message))
