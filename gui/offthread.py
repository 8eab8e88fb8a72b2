"""Work off the GUI thread: a function runs on a thread of its own, its outcome comes back on the GUI thread.

The GUI thread owns the widgets and only them: while it waits on a disk, a socket, a process or
another thread, no widget repaints and no click is answered, so a file read or write, a port
probe, a profile capture, a run's launch or its close runs here instead, and hands its outcome
back through a queued signal (TowerDeck's thread model, docs/architecture.md).

Each kind of job runs on a thread named for what it does (``editor-io``, ``profile-capture``,
``window-run-switch``...): a stack dump, ``py-spy`` or a hang's report then says which job a
thread was doing, and two kinds never wait behind one another.

Even starting a thread waits: ``threading.Thread.start`` returns once the new thread runs, and on a
loaded machine that took the GUI thread 96 ms (2 cores, load average 11). So the GUI thread only
queues a start here (:func:`start_soon`, :func:`start_thread`); one starter thread, made once,
does them.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import itertools
import queue
import threading
import time
import traceback
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from PySide6 import QtCore

T = TypeVar("T")
Done = Callable[[Any, BaseException | None], None]
FINISH_AT_EXIT_S = 30.0  # how long the process's exit waits for the jobs still queued (a run's close)


class Relay(QtCore.QObject):
    """Carries outcomes from worker threads to the GUI thread (a queued signal).

    The callbacks that take them stay here, on the GUI thread; a worker holds only a token and a
    weak reference to the relay. So a worker never drops the last reference to a callback, nor
    to the window or widget it refers to, on its own thread: a Qt object released there can
    deadlock the window (see DESIGN.md on the collector)."""

    sig_done = QtCore.Signal(int, object, object)  # token, result, error

    def __init__(self, parent: QtCore.QObject) -> None:
        super().__init__(parent)
        self._waiting: dict[int, Done] = {}
        self._tokens = itertools.count()
        self.sig_done.connect(self._on_done, QtCore.Qt.ConnectionType.QueuedConnection)

    def expect(self, done: Done) -> int:
        """Keep ``done`` for an outcome to come (GUI thread); the token a worker hands it back with."""
        token = next(self._tokens)
        self._waiting[token] = done
        return token

    def _on_done(self, token: int, result: object, error: object) -> None:
        done = self._waiting.pop(token, None)
        if done is not None:
            done(result, error if isinstance(error, BaseException) else None)


_starts: queue.SimpleQueue[Callable[[], None]] | None = None
_starts_lock = threading.Lock()


def start_soon(start: Callable[[], None]) -> None:
    """Call ``start`` (a thread's ``start``, or an object's that starts its own thread, as
    ``RunReader.start``) on the starter thread, soon, without waiting for it."""
    global _starts
    with _starts_lock:
        if _starts is None:
            _starts = queue.SimpleQueue()
            threading.Thread(target=_start_each, args=(_starts,), name="thread-starter", daemon=True).start()
        starts = _starts
    starts.put(start)


def start_thread(thread: threading.Thread) -> None:
    """Start ``thread`` without waiting until it runs (the starter thread waits instead)."""
    start_soon(thread.start)


def _start_each(starts: queue.SimpleQueue[Callable[[], None]]) -> None:
    while True:
        start = starts.get()
        try:
            start()
        except Exception:  # said, and the starts after it still happen
            traceback.print_exc()


class _Outcome:
    """Where a worker sends its outcome: a relay, weakly held, and the token of its callback."""

    def __init__(self, relay: Relay, done: Done) -> None:
        self._relay = weakref.ref(relay)
        self._token = relay.expect(done)

    def deliver(self, result: Any, error: BaseException | None) -> bool:
        """The callback's call on the GUI thread, queued; False when nobody is left to take it
        (the relay's owner was deleted meanwhile)."""
        relay = self._relay()
        if relay is None:
            return False
        try:
            relay.sig_done.emit(self._token, result, error)
        except RuntimeError:
            return False
        return True


def _outcome(work: Callable[[], Any]) -> tuple[Any, BaseException | None]:
    try:
        return work(), None
    except Exception as exc:
        return None, exc


def run_off_thread(relay: Relay, work: Callable[[], Any], done: Done, *, name: str) -> None:
    """Run ``work`` on a daemon thread named ``name`` (what the job does), then ``done(result,
    error)`` on the GUI thread. Daemon: a job that is only worth its answer (a read, a probe, a
    capture) must not keep the application from exiting."""

    outcome = _Outcome(relay, done)

    def body() -> None:
        outcome.deliver(*_outcome(work))

    start_thread(threading.Thread(target=body, name=name, daemon=True))


_Job = tuple[Callable[[], Any], "Future[Any]"]
_workers: set[tuple[queue.SimpleQueue[_Job | None], threading.Thread]] = set()


class JobThread:
    """One long-lived thread named ``name`` that runs the jobs given it one at a time, in order:
    for jobs that must not overlap or pass one another (a run's close, then its attach), or that
    come often (a frame's slow reads) and would otherwise start a thread each.

    Submitting never waits. The jobs still queued when the process exits are run first (for up to
    ``FINISH_AT_EXIT_S``): a run's close releases its lock and its control socket."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=_serve, args=(self._jobs,), name=name, daemon=True)
        self._entry = (self._jobs, self._thread)
        self._started = False
        self._closed = False
        # An owner deleted without shutdown (a window deleted, never closed) ends the thread too.
        weakref.finalize(self, self._jobs.put, None)

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        """``fn(*args)`` after the jobs before it; its future (cancelled after :meth:`shutdown`)."""
        future: Future[T] = Future()
        if self._closed:
            future.cancel()
            return future
        self._jobs.put((functools.partial(fn, *args), future))
        if not self._started:
            self._started = True
            _workers.add(self._entry)
            start_thread(self._thread)
        return future

    def shutdown(self, *, cancel_pending: bool = False) -> None:
        """Take no more jobs; those queued still run, unless ``cancel_pending`` (never waits)."""
        self._closed = True
        if cancel_pending:
            with contextlib.suppress(queue.Empty):
                while True:
                    job = self._jobs.get_nowait()
                    if job is not None:
                        job[1].cancel()
        self._jobs.put(None)


def _serve(jobs: queue.SimpleQueue[_Job | None]) -> None:
    try:
        while (job := jobs.get()) is not None:
            fn, future = job
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn())
                except BaseException as exc:
                    future.set_exception(exc)
            del job, fn, future  # idle, it holds nothing of the last job
    finally:
        for entry in list(_workers):
            if entry[0] is jobs:
                _workers.discard(entry)


@atexit.register
def _finish_at_exit() -> None:
    """The jobs queued when the process exits run before it does (their threads are daemons, so
    one idle thread never holds the exit)."""
    deadline = time.monotonic() + FINISH_AT_EXIT_S
    entries = list(_workers)
    for jobs, _thread in entries:
        jobs.put(None)
    for _jobs, thread in entries:
        while thread.ident is None and time.monotonic() < deadline:  # the starter has yet to start it
            time.sleep(0.01)
        with contextlib.suppress(RuntimeError):  # never started
            thread.join(max(0.0, deadline - time.monotonic()))


class SerialJobs:
    """A :class:`JobThread` whose jobs' outcomes come back on the GUI thread (a run's launch,
    attach and close, in the order they were asked for)."""

    def __init__(self, relay: Relay, name: str) -> None:
        self._relay = relay
        self._thread = JobThread(name)

    def submit(self, work: Callable[[], Any], done: Done, *, undelivered: Callable[[Any], None] | None = None) -> None:
        """``work`` after the jobs before it; ``done(result, error)`` on the GUI thread, or, when
        the GUI side is gone by then, ``undelivered(result)`` on this thread (a launched session
        nobody took is stopped there, not left running)."""
        outcome = _Outcome(self._relay, done)

        def body() -> None:
            result, error = _outcome(work)
            if not outcome.deliver(result, error) and undelivered is not None and error is None:
                with contextlib.suppress(Exception):
                    undelivered(result)

        self._thread.submit(body)

    def shutdown(self) -> None:
        """Take no more jobs; those queued still run (without waiting for them here)."""
        self._thread.shutdown()
