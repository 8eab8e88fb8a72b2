"""Reading a run directory back: a past run, or one that another TowerDeck process still runs.

:class:`RunReader` follows, on its own thread and streaming (see :mod:`core.run.journal`), the journal
``events.jsonl``, every role's ``metrics.jsonl``, ``scalars.jsonl`` and ``attempt-<n>.log``, and
every host's ``telemetry/samples-<host>.jsonl``, and publishes the same
:class:`~core.run.status.Event` kinds as a live :class:`~core.controller.controller.Controller` (``role_state``,
``role_output``, ``metrics``, ``scalars``, ``sample``, ``gpu_status``, ``cluster_state``,
``warning``), telemetry in batches of one chunk, so a view shows a reopened run exactly like a live
one. Role status is rebuilt with the controller's own builder (:mod:`core.run.role_view`); while the
launching process still runs, its control socket answers ``status`` and takes
``stop``/``restart``/``kill`` (see :mod:`core.run.control`).
"""

from __future__ import annotations

import codecs
import contextlib
import os
import re
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from core.cluster.render import role_dir
from core.cluster.spec import ClusterSpec, Task
from core.run import control, journal, skim
from core.run.events import (
    ClusterStateChanged,
    Event,
    Metrics,
    RecoveryChanged,
    RoleOutput,
    Sample,
    Scalars,
    warning,
)
from core.run.publish import Publisher, Subscriber
from core.run.role_view import RoleView, StatusBoard, apply_sample
from core.run.rundir import RUN_FILE, SPEC_FILE, launcher_alive, read_run_json, read_run_spec
from core.run.status import ClusterPhase, ClusterStatus, RoleStatus, agent_hosts
from core.telemetry.placement import PlacementAggregator
from core.telemetry.step_window import BUCKET_S, RATE_WINDOW_S

POLL_S = 0.5
# A pass that read nothing new rebuilds the roles' status at most this often (for the figures that
# age: how long a role has been stalled); one that read something, at once.
IDLE_STATUS_S = 1.0
LIVE_STATUS_POLL_S = 1.0  # how often a live launch's control socket is asked for its status
CHUNK_BYTES = 1 << 20  # read at most this much of one file per poll: the view stays fed evenly
CHUNKS_PER_POLL = 8
TELEMETRY_CHUNK_BYTES = 256 * 1024  # per telemetry file and poll: ~2,500 metrics samples
CATCH_UP_OUTPUT_BYTES = 512 * 1024  # of an attempt log read back, only the tail is published as output
SKIM_SAMPLES = 1024  # host samples taken over a long file (each feeds 8 GPUs' cards and tiles)
# What the first pass over a run hands the views of its skimmed files, in all, shared among them
# (:func:`core.run.skim.share`): the roles' metrics and scalars, and the hosts' samples (each
# feeds 8 GPUs). A 256-worker day-long run handed ~424,000 metrics records (1,656 a worker), most
# of the 30 s it took to open; no plot shows more than its width of each of 256 curves.
RUN_METRICS_RECORDS = 131_072
RUN_SAMPLES = 16_384
# Of a skimmed metrics file, only the lines of its last this many seconds go into a role's rate
# window (and straggler readings): older buckets leave the window anyway, and the line just before
# them gives the first one's step advance. A 256-worker run's 116,736 records each went through
# both, a third of this thread's first pass; the reader shows no straggler medians (its flags come
# from the journal), only the window's sums, which are the same.
WINDOWS_HISTORY_S = RATE_WINDOW_S + 2 * BUCKET_S
_ATTEMPT = re.compile(r"attempt-(\d+)\.log$")


def _read(tail: journal.JsonlTail, part: skim.Share) -> tuple[list[dict[str, Any]], int]:
    """The next records of a telemetry file, and how many of the first are spaced over its span
    rather than consecutive lines. A large file read for the first time (a past run, or a live one
    opened late) is skimmed (:mod:`core.run.skim`): its whole span at a plot's resolution and its
    newest lines exact, in one pass, instead of every line a chunk at a time, taking ``part`` of
    the run's budget; from there on it is followed line by line (none spaced)."""
    size = _grown(tail)
    if size is None:
        return [], 0
    if tail.offset == 0 and size >= skim.SKIM_FROM_BYTES:
        parts = skim.skim_parts(tail.path, part.points, decoder=tail.decoder, tail_records=part.tail_records)
        tail.offset = parts.end
        return parts.spaced + parts.tail, len(parts.spaced)
    return tail.read(TELEMETRY_CHUNK_BYTES), 0


def _grown(tail: journal.JsonlTail) -> int | None:
    """The size of the file ``tail`` follows when it holds bytes past what was read, else None:
    one stat for a file with nothing new, not an open and a read (each pass over a 256-worker run's
    files took the reader's thread ~40 ms of CPU, every POLL_S, while the window took the run in)."""
    try:
        size = os.stat(tail.path).st_size
    except OSError:  # not written yet
        return None
    return size if size > tail.offset else None


def _skimmed(path: Path) -> bool:
    """Whether :func:`_read` skims ``path`` when it reads it for the first time."""
    try:
        return path.stat().st_size >= skim.SKIM_FROM_BYTES
    except OSError:
        return False


class RunDirError(Exception):
    """The directory is not a readable run directory; the message says why and what to do."""


class _RoleReplay(RoleView):
    """A role's view plus where the reader is in its files."""

    def __init__(self, task: Task, run_path: Path) -> None:
        super().__init__(task, run_path)
        self.placement = PlacementAggregator()
        self.read_attempt = 1
        self.read_offset = 0
        self.decoder: Any = codecs.getincrementaldecoder("utf-8")("replace")
        directory = role_dir(run_path, task)
        self.logs = str(directory / "attempt-")  # + "<n>.log": a string, joined each pass for every role
        self.metrics = journal.JsonlTail(directory / "metrics.jsonl")
        self.scalars = journal.JsonlTail(directory / "scalars.jsonl")


class RunReader:
    """Follows a run directory; thread-safe; :meth:`close` stops the thread."""

    def __init__(self, path: Path) -> None:
        if not (path / RUN_FILE).is_file():
            raise RunDirError(
                f"{path} is not a run directory (it has no run.json); pick a directory under the runs root"
            )
        spec, problems = read_run_spec(path)
        if spec is None:
            first = problems[0].format() if problems else "unreadable"
            raise RunDirError(f"{path / SPEC_FILE} cannot be read back: {first}")
        self.path = path
        self.spec: ClusterSpec = spec
        self._roles = {t.role_id: _RoleReplay(t, path) for t in spec.tasks()}
        self._lock = threading.RLock()
        self._publisher = Publisher()
        self._events = journal.JsonlTail(path / journal.EVENTS_FILE)
        self._samples: dict[Path, journal.JsonlTail] = {}
        self._live_status: ClusterStatus | None = None
        self._board = StatusBoard(self._roles, time.time())  # the status read back, rebuilt by this reader's thread
        # The hosts whose roles the launcher reaches through their agent, from its last status reply.
        self._agent_hosts: frozenset[str] = frozenset()
        self._status_problem = ""  # the last unreadable status reply, said once
        self._live_polled_at = -LIVE_STATUS_POLL_S  # time.monotonic() of the last poll of the live status
        self._stop = threading.Event()
        self._taken = 0  # how many reads brought something (events, telemetry, samples), ever
        self._thread: threading.Thread | None = None
        self.info: dict[str, Any] = {}
        # Each skimmed file's part of the budget, set by the first pass from how many files it skims.
        self._telemetry_part = skim.share(RUN_METRICS_RECORDS, 1)
        self._samples_part = skim.share(RUN_SAMPLES, 1, max_points=SKIM_SAMPLES)

    # ------------------------------------------------------------------ the Controller-like surface

    def subscribe(self, callback: Subscriber) -> None:
        self._publisher.subscribe(callback)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"replay-{self.path.name}", daemon=True)
        self._thread.start()

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop the thread and wait for it (at most ``timeout_s``). It looks at the stop between
        files and chunks, not only between passes: the first pass over a day-long run skims every
        file and takes seconds, and a close waits for the file being read only."""
        self._stop.set()
        if self._thread is not None:
            # Being started by another thread this very moment, it cannot be joined yet; it sees the stop.
            with contextlib.suppress(RuntimeError):
                self._thread.join(timeout_s)

    @property
    def stopping(self) -> bool:
        """True once :meth:`close` was asked: long passes over the files stop at their next step."""
        return self._stop.is_set()

    @property
    def done(self) -> bool:
        """True when the run has finished, or its launcher is gone: nothing can be controlled."""
        return self.control_socket() is None

    # The RunSource protocol (core.controller.session): a reader follows a run; its launcher controls it.
    @property
    def controls_here(self) -> bool:
        return False

    @property
    def attachable(self) -> bool:
        """The launcher is gone but the run did not end: its roles may run on (attach to them)."""
        return self.done and self.info.get("state") not in (None, "done")

    def release(self) -> None:
        self.close()

    def control_socket(self) -> Path | None:
        """The live launch's control socket, or None when the run is over or its launcher gone."""
        sock = self.info.get("control_socket")
        if not isinstance(sock, str) or not Path(sock).exists() or not launcher_alive(self.path, self.info):
            return None
        return Path(sock)

    @property
    def live(self) -> bool:
        """True while the status comes from the launch's control socket (its own roles' figures)."""
        return self._live_status is not None

    def agent_hosts(self) -> frozenset[str]:
        """The hosts whose roles the launcher reaches through their agent (its last status reply)."""
        return self._agent_hosts

    def status(self) -> ClusterStatus:
        """The latest status, without waiting: the launcher's own while it runs, else the one read
        back, each an immutable snapshot swapped in by the reader's thread."""
        return self._live_status or self._board.current

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

    def signal_role(self, role: str, signal_name: str) -> Future[str]:
        return self._request({"action": "signal", "role": role, "signal": signal_name})

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
                self._warn(f"{payload['action']}: cannot reach the launch: {exc}")
                return
            if reply.get("ok"):
                future.set_result(str(reply.get("message", "")))
            else:
                future.set_exception(RuntimeError(str(reply.get("error"))))
                self._warn(f"{payload['action']}: {reply.get('error')}")

        threading.Thread(target=send, name="replay-request", daemon=True).start()
        return future

    # ------------------------------------------------------------------ the reading thread

    def _run(self) -> None:
        last_refresh = 0.0
        refreshed_at = -1  # self._taken when the status was last rebuilt
        try:
            # A live launch's own status first: every role's latest figures in one reply, before
            # the first pass over the files (a window opened a minute into a 256-worker run under
            # load took 5-10 s over it, its roles table blank meanwhile).
            self._read_info()
            self._poll_live_status_due()
        except Exception as exc:
            self._warn(f"reading {self.path}: {exc!r}")
        self._prefetch()
        while not self._stop.is_set():
            try:
                self._read_info()
                self._read_events()
                # The hosts' samples first: on opening a past run they are the heaviest for the
                # window to take (each feeds 8 GPUs' series and tiles), so it takes them while
                # this thread skims the roles' files, not after: a day-long run opens sooner.
                self._read_samples()
                for role in self._roles.values():
                    if self._stop.is_set():
                        break  # closed mid-pass: a close waits for the file being read, not the pass
                    self._read_telemetry(role)
                    self._read_output(role)
                    self._poll_live_status_due()  # also during a long pass, not only after it
                self._poll_live_status_due()  # and after it: a run with no role known yet
                now = time.monotonic()
                if self._taken != refreshed_at or now - last_refresh >= IDLE_STATUS_S:
                    # Rebuilt after a pass that read something; else only for the figures that age:
                    # 257 roles' status each POLL_S, unchanged, as the window took a finished run in.
                    refreshed_at, last_refresh = self._taken, now
                    self._board.refresh(time.time())
            except Exception as exc:  # a damaged file must not kill the reader
                self._warn(f"reading {self.path}: {exc!r}")
            self._stop.wait(POLL_S)

    def _prefetch(self) -> None:
        """The files the first pass skims: each one's part of the run's budget, from how many there
        are; then asked of the disk all at once, in the order they are read
        (:func:`core.run.skim.prefetch`): a run from yesterday is no longer in the page cache."""
        samples = [path for path in self._sample_files() if _skimmed(path)]
        telemetry = [t.path for r in self._roles.values() for t in (r.metrics, r.scalars) if _skimmed(t.path)]
        self._samples_part = skim.share(RUN_SAMPLES, len(samples), max_points=SKIM_SAMPLES)
        self._telemetry_part = skim.share(RUN_METRICS_RECORDS, len(telemetry))
        for path in samples:
            skim.prefetch(path, self._samples_part.points)
        for path in telemetry:
            if self._stop.is_set():
                return
            skim.prefetch(path, self._telemetry_part.points)

    def _sample_files(self) -> list[Path]:
        return sorted((self.path / "telemetry").glob("samples-*.jsonl"))

    def _read_info(self) -> None:
        # run.json is replaced atomically by the writer; a failed read keeps the last one.
        info = read_run_json(self.path)
        if info is not None:
            self.info = info

    def _read_events(self) -> None:
        """The journal's new records: into the role views and the status first, then to the
        subscribers, so a listener that reads :meth:`status` on an event sees what it tells.
        Old run directories journalled telemetry too: those lines are skipped (the telemetry
        files have the same data), as are users' commands (nothing to show)."""
        if _grown(self._events) is None:
            return
        records = [r for r in self._events.read(CHUNK_BYTES * 8) if journal.is_state_record(r.get("kind"))]
        events = [e for r in records if (e := Event.from_record(r)) is not None]
        if not events:
            return
        self._taken += 1
        now = time.time()
        with self._lock:
            for event in events:
                role = self._roles.get(event.role) if event.role is not None else None
                if role is not None:
                    role.apply(event.t, event.payload)
                    self._board.role_changed(role.task.role_id, now)
                elif isinstance(event.payload, ClusterStateChanged):
                    p = event.payload
                    self._board.set_phase(p.phase, p.result, p.reason)
                elif isinstance(event.payload, RecoveryChanged):
                    self._board.set_recovery(event.payload.text(), recovering=event.payload.phase == "started")
        for event in events:
            self._publisher.publish(event)

    def _read_telemetry(self, role: _RoleReplay) -> None:
        """A chunk of the role's metrics and scalars: into its view, and to the view as one batch.
        The views are this thread's alone; the status others read is the board's snapshot."""
        name = role.task.role_id
        samples, spaced = _read(role.metrics, self._telemetry_part)
        if samples:
            self._taken += 1
            role.add_metrics(samples, windows_from=_windows_start(samples, spaced))
            self._publisher.publish(Event(_time(samples[-1].get("t")), name, Metrics(samples)))
        if self._stop.is_set():
            return
        points, spaced = _read(role.scalars, self._telemetry_part)
        if points:
            self._taken += 1
            role.add_scalars(points, windows_from=spaced)
            self._publisher.publish(Event(_time(points[-1].get("wall_time")), name, Scalars(points)))

    def _read_samples(self) -> None:
        for path in self._sample_files():
            if self._stop.is_set():
                return
            tail = self._samples.setdefault(path, journal.JsonlTail(path))
            records, _spaced = _read(tail, self._samples_part)  # a GPU card draws ~600 px of a day
            if records:
                self._taken += 1
            for record in _newest_figures(records):
                apply_sample(self._roles, record)
            for record in records:
                self._publisher.publish(Event(_time(record.get("t")), None, Sample.from_record(record)))

    def _read_output(self, role: _RoleReplay) -> None:
        for _ in range(CHUNKS_PER_POLL):
            if self._stop.is_set() or not self._read_output_chunk(role):
                return

    def _read_output_chunk(self, role: _RoleReplay) -> bool:
        """Read one chunk of the role's current attempt log; False when there is nothing more now."""
        path = f"{role.logs}{role.read_attempt}.log"
        try:
            size = os.stat(path).st_size
        except FileNotFoundError:
            return False
        if role.read_offset >= size:
            if not os.path.exists(f"{role.logs}{role.read_attempt + 1}.log"):
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
            output = RoleOutput(text, attempt=role.read_attempt)
            self._publisher.publish(Event(time.time(), role.task.role_id, output))
        return True

    def _poll_live_status_due(self) -> None:
        """:meth:`_poll_live_status` when the last poll is :data:`LIVE_STATUS_POLL_S` old."""
        now = time.monotonic()
        if now - self._live_polled_at >= LIVE_STATUS_POLL_S and not self._stop.is_set():
            self._live_polled_at = now
            self._poll_live_status()

    def _poll_live_status(self) -> None:
        sock = self.control_socket()
        if sock is None:
            self._live_status = None
            return
        try:
            reply = control.request(sock, {"action": "status"}, timeout_s=2.0)
        except control.BadReply as exc:  # said, not swallowed: the window would show no live status
            self._say_status_problem(f"the run's control socket sent a status this window cannot read: {exc}")
            return
        except OSError:  # gone or busy: the next poll asks again
            return
        if not reply.get("ok"):
            return
        try:
            roles = [RoleStatus.from_json(r) for r in reply.get("roles") or []]
            phase = ClusterPhase(str(reply.get("phase")))
        except ValueError as exc:
            # Said once per change, never swallowed: the window would show no live status.
            self._say_status_problem(f"the run's control socket sent a status this window cannot read: {exc}")
            return
        self._status_problem = ""
        self._agent_hosts = agent_hosts(reply)
        recovery = reply.get("recovery")
        self._live_status = ClusterStatus(
            phase,
            reply.get("result"),
            str(reply.get("reason") or ""),
            tuple(roles),
            recovery if isinstance(recovery, str) else "",
            reply.get("recovering") is True,
        )

    def _say_status_problem(self, message: str) -> None:
        """Said once per change of the problem, never per poll."""
        if message != self._status_problem:
            self._status_problem = message
            self._warn(message)

    def _warn(self, message: str) -> None:
        self._publisher.publish(warning(message, time.time()))


def _windows_start(records: list[dict[str, Any]], spaced: int) -> int:
    """Where a role's rate window starts taking ``records``, read in time order, of which the first
    ``spaced`` are spaced over a skimmed file: at the last consecutive line more than
    :data:`WINDOWS_HISTORY_S` older than the newest (the step it starts from), else at the first
    consecutive one; 0 for lines followed one by one (every one counts)."""
    if spaced == 0:
        return 0
    newest: float | None = None
    for i in range(len(records) - 1, spaced - 1, -1):
        t = records[i].get("t")
        if not isinstance(t, (int, float)) or isinstance(t, bool):
            continue
        if newest is None:
            newest = t
        elif t < newest - WINDOWS_HISTORY_S:
            return i
    return spaced


def _newest_figures(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Those of a host's ``records`` (in order) that hold some role's newest figures: applied in
    order, they leave the role views as all of them would (:func:`apply_sample` replaces a role's
    figures with those of each sample where it is alive). A skimmed file's hundreds of samples
    were each applied, ~30 % of reading a 32-host run's samples."""
    seen: set[str] = set()
    newest: list[dict[str, Any]] = []
    for record in reversed(records):
        roles = record.get("roles")
        if not isinstance(roles, dict):
            continue
        alive = [n for n, f in roles.items() if n not in seen and isinstance(f, dict) and f.get("alive", True)]
        if alive:
            seen.update(alive)
            newest.append(record)
    newest.reverse()
    return newest


def _time(t: object) -> float:
    """A record's time, or now for a record without one."""
    return float(t) if isinstance(t, (int, float)) and not isinstance(t, bool) else time.time()
