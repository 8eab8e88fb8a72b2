"""Runs the user's ``[notify]`` command with each notification, off the controller's thread.

:meth:`Notifier.on_event` is a controller subscriber: it only classifies the event
(:func:`core.notify.events.classify`) and queues it (bounded), so the cluster never waits on the
command. A small thread runs the command with the notification as one JSON object on stdin, under a reaper
(:mod:`core.notify.reaper`) that ends everything the command started, a daemon included, when
it ends, after ``timeout_s``, and when this process exits or dies.

At most one notification per kind per ``min_interval_s`` (a minute): one that comes sooner is held,
the newest of a burst replacing the older ones, and sent when the minute is up with ``folded``
saying how many it stands for. ``run_finished`` carries the ones still held (``unsent``), so nothing
is lost when the run ends. A command that fails, times out or cannot start is reported (a
``warning`` event to :meth:`subscribe`-rs, and the run's journal) and never stops the run; every
attempt is journalled as a ``notify`` record.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.cluster.notify_table import NotifyConfig
from core.notify.events import Notification, classify
from core.notify.reaper import CANNOT_START
from core.run import children
from core.run.children import kill_group
from core.run.events import Event, JournalKind, warning
from core.run.publish import Publisher, Subscriber

MIN_INTERVAL_S = 60.0
QUEUE_SIZE = 16
POLL_S = 0.2


class Notifier:
    """Notifications for one run; start with :meth:`start`, end with :meth:`close`.

    ``run`` is what every payload says about the run (``run``, ``run_dir``, ``cluster``);
    ``journal(record)`` keeps a record in the run's journal (it must be safe from another thread).
    """

    def __init__(
        self,
        config: NotifyConfig,
        run: dict[str, Any],
        journal: Callable[[dict[str, Any]], None] | None = None,
        min_interval_s: float = MIN_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
        cwd: Path | None = None,
    ) -> None:
        self.config = config
        self.cwd = cwd  # where the command starts (the cluster's workdir)
        self.run = dict(run)
        self._journal = journal
        self.min_interval_s = min_interval_s
        self._clock = clock
        self._queue: queue.Queue[tuple[Notification, int, list[dict[str, Any]]]] = queue.Queue(QUEUE_SIZE)
        self._lock = threading.Lock()
        self._last_sent: dict[str, float] = {}
        self._held: dict[str, tuple[Notification, int]] = {}  # kind -> (newest, how many it stands for)
        self._publisher = Publisher(journal=self._journal_record)  # its warnings, journalled as they are told
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.dropped = 0
        self.sent: collections.deque[dict[str, Any]] = collections.deque(maxlen=100)  # the latest payloads sent

    def subscribe(self, callback: Subscriber) -> None:
        """``callback(event)`` gets the notifier's reports (``warning`` events), on its thread."""
        self._publisher.subscribe(callback)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="notifier", daemon=True)
        self._thread.start()

    def on_event(self, event: Event) -> None:
        """A controller subscriber: never blocks, never raises."""
        notification = classify(event)
        if notification is None or notification.kind not in self.config.events:
            return
        self.offer(notification)

    def offer(self, notification: Notification) -> None:
        """Send ``notification`` now, or hold it until its kind's minute is up."""
        now = self._clock()
        with self._lock:
            unsent: list[dict[str, Any]] = []
            if notification.kind == "run_finished":
                for kind, (held, count) in sorted(self._held.items()):
                    unsent.append({"kind": kind, "title": held.title, "message": held.message, "count": count})
                self._held.clear()
            last = self._last_sent.get(notification.kind)
            if last is not None and now - last < self.min_interval_s:
                _, count = self._held.get(notification.kind, (notification, 0))
                self._held[notification.kind] = (notification, count + 1)
                return
            self._last_sent[notification.kind] = now
        self._enqueue(notification, 0, unsent)

    def close(self, timeout_s: float | None = None) -> None:
        """Deliver what is queued (each command within its timeout), then stop the thread.
        Notifications still held by the rate limit are reported as not sent."""
        with self._lock:
            held = sum(count for _, count in self._held.values())
            self._held.clear()
        if held:
            self._report(f"{held} notification(s) held by the one-a-minute limit were not sent (the run is over)")
        self._stop.set()
        if self._thread is not None:
            wait_s = timeout_s if timeout_s is not None else (self._queue.qsize() + 1) * (self.config.timeout_s + 2)
            self._thread.join(wait_s)

    # ------------------------------------------------------------------ the notifier thread

    def _enqueue(self, notification: Notification, folded: int, unsent: list[dict[str, Any]]) -> None:
        try:
            self._queue.put_nowait((notification, folded, unsent))
        except queue.Full:
            self.dropped += 1
            self._report(f"notification dropped ({notification.title}): {QUEUE_SIZE} are already waiting")

    def _release_due(self) -> None:
        now = self._clock()
        due = []
        with self._lock:
            for kind, (notification, count) in list(self._held.items()):
                if now - self._last_sent.get(kind, 0.0) >= self.min_interval_s:
                    del self._held[kind]
                    self._last_sent[kind] = now
                    due.append((notification, count - 1))
        for notification, folded in due:
            self._enqueue(notification, folded, [])

    def _loop(self) -> None:
        while True:
            try:
                item = self._queue.get(timeout=POLL_S)
            except queue.Empty:
                if self._stop.is_set():
                    return
                self._release_due()
                continue
            try:
                self._deliver(*item)
            except Exception as exc:  # the notifier must outlive anything a command does
                self._report(f"notify: internal error: {exc!r}")

    def _deliver(self, notification: Notification, folded: int, unsent: list[dict[str, Any]]) -> None:
        payload = notification.payload(self.run, folded, unsent)
        self.sent.append(payload)
        error = run_command(
            self.config.command, json.dumps(payload) + "\n", timeout_s=self.config.timeout_s, cwd=self.cwd
        )
        self._journal_record(
            {
                "t": round(time.time(), 3),
                "kind": str(JournalKind.NOTIFY),
                "notification": notification.kind,
                "folded": folded,
            }
            | ({"error": error} if error else {"ok": True})
        )
        if error:
            self._report(
                f"notify command for {notification.kind} ({notification.title}) {error}; the run is not affected"
            )

    def _report(self, message: str) -> None:
        self._publisher.publish(warning(message, round(time.time(), 3)))

    def _journal_record(self, record: dict[str, Any]) -> None:
        if self._journal is not None:
            with contextlib.suppress(Exception):
                self._journal(record)


# The notification commands running now (their reapers). The window does not wait for them when
# it closes a run; if the process then exits, they are ended with it, not orphaned.
_RUNNING: set[subprocess.Popen[bytes]] = set()
_RUNNING_LOCK = threading.Lock()
REAPER = Path(__file__).with_name("reaper.py")
END_GRACE_S = 5.0  # for the reaper to end what the command started, before it is killed itself


@atexit.register
def _end_running() -> None:
    with _RUNNING_LOCK:
        running = list(_RUNNING)
    for proc in running:
        _end(proc)


def _end(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the reaper (it kills the command and everything it started, daemons included),
    then SIGKILL its process group if it is still there after :data:`END_GRACE_S`."""
    with contextlib.suppress(OSError):
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(END_GRACE_S)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(END_GRACE_S)


def run_command(argv: tuple[str, ...], stdin_text: str, *, timeout_s: float, cwd: Path | None = None) -> str | None:
    """Run ``argv`` with ``stdin_text``; None on exit 0, else what went wrong (its exit code and
    last line of stderr, a timeout, or why it could not start).

    It runs under :mod:`core.notify.reaper`, in a session of its own that dies with this process:
    at its end, its timeout, or this process's exit, everything the command started is ended,
    a daemon that left its session (``setsid``) included."""
    with tempfile.TemporaryFile() as errors:
        try:
            proc = children.popen(
                [sys.executable, str(REAPER), str(os.getpid()), "--", *argv],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=errors,
                close_fds=True,
                cwd=cwd,
            )
        except OSError as exc:
            return f"could not start ({argv[0]}: {exc.strerror or exc})"
        with _RUNNING_LOCK:
            _RUNNING.add(proc)
        try:
            proc.communicate(stdin_text.encode("utf-8"), timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _end(proc)
            return f"timed out after {timeout_s:g} s (killed)"
        finally:
            with _RUNNING_LOCK:
                _RUNNING.discard(proc)
        if proc.returncode == 0:
            return None
        errors.seek(0)
        lines = errors.read()[-4096:].decode("utf-8", "replace").strip().splitlines()
        if proc.returncode == CANNOT_START and lines and lines[-1].startswith("could not start ("):
            return lines[-1]
        last = f": {lines[-1]}" if lines else ""
        code = proc.returncode
        # The reaper exits 128 + N for a command that signal N ended (as a shell says it).
        how = f"killed by signal {code - 128}" if 128 < code < 160 else f"exited with code {code}"
        return how + last
