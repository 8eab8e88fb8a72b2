"""Reading a run directory back: a past run, or one that another TowerDeck process still runs.

:class:`RunReader` tails ``events.jsonl`` and every role's ``attempt-<n>.log`` on its own thread
and publishes the same :class:`~core.controller.Event` kinds as a live
:class:`~core.controller.Controller` (``role_state``, ``role_output``, ``metrics``, ``sample``,
``gpu_status``, ``cluster_state``, ``warning``), so a view shows a reopened run exactly like a live
one. Role status is rebuilt from the events; while the launching process still runs, its control
socket answers ``status`` and takes ``stop``/``restart``/``kill`` (see :mod:`core.control`).
"""

from __future__ import annotations

import codecs
import contextlib
import json
import os
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core import control
from core.controller import ClusterPhase, ClusterStatus, Event, RoleState, RoleStatus
from core.render import role_dir
from core.spec import ClusterSpec, Task, load
from core.telemetry.metrics import MetricSample, WorkerStats, stragglers
from core.telemetry.placement import PlacementAggregator

POLL_S = 0.5
CHUNK_BYTES = 1 << 20  # read at most this much of one file per poll: the view stays fed evenly
CHUNKS_PER_POLL = 8
CATCH_UP_OUTPUT_BYTES = 512 * 1024  # of an attempt log read back, only the tail is published as output
_ATTEMPT = re.compile(r"attempt-(\d+)\.log$")


class RunDirError(Exception):
    """The directory is not a readable run directory; the message says why and what to do."""


@dataclass
class _RoleReplay:
    task: Task
    state: RoleState = RoleState.PENDING
    state_since: float = 0.0
    detail: str = ""
    pid: int | None = None
    attempt: int = 0
    restarts: int = 0
    returncode: int | None = None
    signal: int | None = None
    started_at: float | None = None
    ended_at: float | None = None
    log_path: Path | None = None
    figures: dict[str, Any] = field(default_factory=dict)
    stalled_at: float | None = None  # when the run said the role stalled (None: it is not)
    stalled_for_s: float = 0.0
    waiting: dict[str, Any] = field(default_factory=dict)  # the last role_waiting event (issue 13)
    gpus: tuple[int, ...] = ()
    stats: WorkerStats = field(default_factory=WorkerStats)
    placement: PlacementAggregator = field(default_factory=PlacementAggregator)
    read_attempt: int = 1
    read_offset: int = 0
    decoder: Any = field(default_factory=lambda: codecs.getincrementaldecoder("utf-8")("replace"))


class RunReader:
    """Follows a run directory; thread-safe; :meth:`close` stops the thread."""

    def __init__(self, path: Path) -> None:
        if not (path / "run.json").is_file():
            raise RunDirError(
                f"{path} is not a run directory (it has no run.json); pick a directory under the runs root"
            )
        spec, problems = load(path / "cluster.toml")
        if spec is None:
            first = problems[0].format() if problems else "unreadable"
            raise RunDirError(f"{path / 'cluster.toml'} cannot be read back: {first}")
        self.path = path
        self.spec: ClusterSpec = spec
        self._roles = {t.role_id: _RoleReplay(t) for t in spec.tasks()}
        self._lock = threading.RLock()
        self._subscribers: list[Callable[[Event], None]] = []
        self._phase = ClusterPhase.IDLE
        self._result: str | None = None
        self._reason = ""
        self._events_offset = 0
        self._events_partial = b""
        self._live_status: ClusterStatus | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.info: dict[str, Any] = {}

    # ------------------------------------------------------------------ the Controller-like surface

    def subscribe(self, callback: Callable[[Event], None]) -> None:
        self._subscribers.append(callback)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"replay-{self.path.name}", daemon=True)
        self._thread.start()

    def close(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    @property
    def done(self) -> bool:
        """True when the run has finished, or its launcher is gone: nothing can be controlled."""
        return self.control_socket() is None

    def control_socket(self) -> Path | None:
        """The live launch's control socket, or None when the run is over or its launcher gone."""
        info = self.info
        sock = info.get("control_socket")
        if info.get("state") == "done" or not isinstance(sock, str) or not Path(sock).exists():
            return None
        pid = info.get("pid")
        if isinstance(pid, int):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return None
            except PermissionError:
                pass
        return Path(sock)

    def status(self) -> ClusterStatus:
        with self._lock:
            if self._live_status is not None:
                return self._live_status
            # Only running roles can lag behind: a finished one's last step time says nothing now.
            times = {
                n: r.stats.step_time_s
                for n, r in self._roles.items()
                if r.stats.step_time_s and r.state == RoleState.RUNNING
            }
            slow = stragglers({n: t for n, t in times.items() if t is not None})
            roles = tuple(self._role_status(r, r.task.role_id in slow) for r in self._roles.values())
            return ClusterStatus(self._phase, self._result, self._reason, roles)

    def placement(self, role: str) -> dict[str, Any]:
        with self._lock:
            return self._roles[role].placement.summary()

    def stop_role(self, role: str) -> Future[str]:
        return self._request({"action": "stop", "role": role})

    def kill_role(self, role: str) -> Future[str]:
        return self._request({"action": "kill", "role": role})

    def restart_role(self, role: str) -> Future[str]:
        return self._request({"action": "restart", "role": role})

    def stop_all(self) -> Future[str]:
        return self._request({"action": "stop_all"})

    def kill_all(self) -> Future[str]:
        return self._request({"action": "kill_all"})

    def restart_all(self) -> Future[str]:
        return self._request({"action": "restart_all"})

    def _request(self, payload: dict[str, Any]) -> Future[str]:
        future: Future[str] = Future()

        def send() -> None:
            sock = self.control_socket()
            try:
                if sock is None:
                    raise OSError("the run is not running any more")
                reply = control.request(sock, payload)
            except OSError as exc:
                future.set_exception(RuntimeError(f"cannot reach the launch of {self.path.name}: {exc}"))
                self._publish("warning", message=f"{payload['action']}: cannot reach the launch: {exc}")
                return
            if reply.get("ok"):
                future.set_result(str(reply.get("message", "")))
            else:
                future.set_exception(RuntimeError(str(reply.get("error"))))
                self._publish("warning", message=f"{payload['action']}: {reply.get('error')}")

        threading.Thread(target=send, name="replay-request", daemon=True).start()
        return future

    # ------------------------------------------------------------------ the reading thread

    def _run(self) -> None:
        last_status_poll = 0.0
        while not self._stop.is_set():
            try:
                self._read_info()
                self._read_events()
                for role in self._roles.values():
                    self._read_output(role)
                now = time.monotonic()
                if now - last_status_poll >= 1.0:
                    last_status_poll = now
                    self._poll_live_status()
            except Exception as exc:  # a damaged file must not kill the reader
                self._publish("warning", message=f"reading {self.path}: {exc!r}")
            self._stop.wait(POLL_S)

    def _read_info(self) -> None:
        # run.json is replaced atomically by the writer; a failed read keeps the last one.
        with contextlib.suppress(OSError, ValueError):
            self.info = json.loads((self.path / "run.json").read_text(encoding="utf-8"))

    def _read_events(self) -> None:
        try:
            with open(self.path / "events.jsonl", "rb") as f:
                f.seek(self._events_offset)
                data = f.read(CHUNK_BYTES * 8)
        except FileNotFoundError:
            return
        self._events_offset += len(data)
        data = self._events_partial + data
        lines = data.split(b"\n")
        self._events_partial = lines.pop()
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and isinstance(record.get("kind"), str):
                self._apply(record)

    def _apply(self, record: dict[str, Any]) -> None:
        kind = record["kind"]
        name = record.get("role")
        role = self._roles.get(name) if isinstance(name, str) else None
        t = float(record.get("t") or 0.0)
        data = {k: v for k, v in record.items() if k not in ("kind", "role", "t")}
        with self._lock:
            if kind == "role_state" and role is not None:
                try:
                    role.state = RoleState(str(data.get("state")))
                except ValueError:
                    return
                role.state_since = t
                role.detail = str(data.get("detail", ""))
                role.pid = data.get("pid") if isinstance(data.get("pid"), int) else None
                role.attempt = int(data.get("attempt") or role.attempt)
                role.restarts = int(data.get("restarts") or 0)
                role.returncode = data.get("returncode")
                role.signal = data.get("signal")
                if role.state == RoleState.STARTING:
                    role.started_at, role.ended_at = t, None
                elif role.state in (RoleState.SUCCEEDED, RoleState.FAILED, RoleState.STOPPED, RoleState.BACKOFF):
                    role.ended_at = t
            elif kind == "role_stalled" and role is not None:
                role.stalled_at = t if data.get("stalled") else None
                role.stalled_for_s = float(data.get("stalled_for_s") or 0.0)
            elif kind == "role_waiting" and role is not None:  # diagnosis (issue 13)
                role.waiting = dict(data) if data.get("waiting") else {}
            elif kind == "role_pid" and role is not None:
                role.pid = data.get("pid") if isinstance(data.get("pid"), int) else None
                role.log_path = Path(str(data["log"])) if data.get("log") else None
            elif kind == "metrics" and role is not None:
                for raw in data.get("samples") or []:
                    try:
                        role.stats.add(MetricSample(**raw))
                    except TypeError:
                        continue
            elif kind == "sample":
                self._apply_sample(data)
            elif kind == "cluster_state":
                with contextlib.suppress(ValueError):
                    self._phase = ClusterPhase(str(data.get("phase")))
                self._result = data.get("result")
                self._reason = str(data.get("reason") or "")
        self._publish(kind, name if isinstance(name, str) else None, t=t, **data)

    def _apply_sample(self, data: dict[str, Any]) -> None:
        on_gpu: dict[str, set[int]] = {}
        for gpu in data.get("gpus") or []:
            for proc in (gpu.get("processes") if isinstance(gpu, dict) else None) or []:
                if isinstance(proc, dict) and isinstance(proc.get("role"), str):
                    on_gpu.setdefault(proc["role"], set()).add(int(gpu.get("index", -1)))
        roles: dict[str, Any] = data["roles"] if isinstance(data.get("roles"), dict) else {}
        for name, figures in roles.items():
            role = self._roles.get(name)
            if role is not None and isinstance(figures, dict):
                role.figures = figures
                role.gpus = tuple(sorted(on_gpu.get(name, ())))

    def _read_output(self, role: _RoleReplay) -> None:
        for _ in range(CHUNKS_PER_POLL):
            if not self._read_output_chunk(role):
                return

    def _read_output_chunk(self, role: _RoleReplay) -> bool:
        """Read one chunk of the role's current attempt log; False when there is nothing more now."""
        directory = role_dir(self.path, role.task)
        path = directory / f"attempt-{role.read_attempt}.log"
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return False
        if role.read_offset >= size:
            if not (directory / f"attempt-{role.read_attempt + 1}.log").exists():
                return False
            role.read_attempt += 1  # that attempt is over and read: go on to the next
            role.read_offset = 0
            role.decoder = codecs.getincrementaldecoder("utf-8")("replace")
            return True
        with open(path, "rb") as f:
            f.seek(role.read_offset)
            data = f.read(CHUNK_BYTES)
        role.read_offset += len(data)
        text = role.decoder.decode(data)
        with self._lock:
            role.placement.feed_stream(text)
        if size - role.read_offset <= CATCH_UP_OUTPUT_BYTES:
            # Of a long log read back, only the tail goes to the screen; the file has the rest.
            self._publish("role_output", role.task.role_id, attempt=role.read_attempt, text=text)
        return True

    def _poll_live_status(self) -> None:
        sock = self.control_socket()
        if sock is None:
            with self._lock:
                self._live_status = None
            return
        try:
            reply = control.request(sock, {"action": "status"}, timeout_s=2.0)
        except (OSError, ValueError):
            return
        if not reply.get("ok"):
            return
        roles = []
        for r in reply.get("roles") or []:
            try:
                r = dict(r)
                r["state"] = RoleState(r["state"])
                r["log_path"] = Path(r["log_path"]) if r.get("log_path") else None
                r["gpus"] = tuple(r.get("gpus") or ())
                roles.append(RoleStatus(**r))
            except (TypeError, ValueError, KeyError):
                return
        with self._lock:
            self._live_status = ClusterStatus(
                ClusterPhase(str(reply.get("phase"))), reply.get("result"), str(reply.get("reason") or ""), tuple(roles)
            )

    def _role_status(self, r: _RoleReplay, straggler: bool) -> RoleStatus:
        f = r.figures if r.state in (RoleState.RUNNING, RoleState.STARTING) else {}
        stats = r.stats
        return RoleStatus(
            role=r.task.role_id,
            job=r.task.job,
            index=r.task.index,
            host=r.task.host,
            address=r.task.address,
            state=r.state,
            state_since=r.state_since,
            pid=r.pid if r.state in (RoleState.RUNNING, RoleState.STARTING, RoleState.STOPPING) else None,
            attempt=r.attempt,
            restarts=r.restarts,
            returncode=r.returncode,
            signal=r.signal,
            started_at=r.started_at,
            ended_at=r.ended_at,
            detail=r.detail,
            log_path=r.log_path,
            cpu_percent=f.get("cpu_percent"),
            rss_bytes=f.get("rss_bytes"),
            threads=f.get("threads"),
            gpus=r.gpus,
            step=stats.step,
            loss=stats.loss,
            step_time_s=stats.step_time_s,
            steps_per_sec=stats.steps_per_sec,
            straggler=straggler,
            stalled=r.stalled_at is not None and r.state == RoleState.RUNNING,
            stalled_for_s=(
                r.stalled_for_s + max(0.0, time.time() - r.stalled_at) if r.stalled_at is not None else None
            ),
            waiting_for=r.waiting.get("waiting_for") if r.state == RoleState.RUNNING else None,  # issue 13
            waiting_message=str(r.waiting.get("message", "")),
            waiting_fix=str(r.waiting.get("fix", "")),
        )

    def _publish(self, kind: str, role: str | None = None, t: float | None = None, **data: Any) -> None:
        event = Event(kind, t if t is not None else time.time(), role, data)
        for callback in list(self._subscribers):
            with contextlib.suppress(Exception):  # a broken listener must not stop the reader
                callback(event)
