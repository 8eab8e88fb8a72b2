"""Work off the GUI thread: a function runs on a thread of its own, its outcome comes back on the GUI thread.

The GUI thread owns the widgets and only them: while it waits on a disk, a socket, a process or
another thread's join, no widget repaints and no click is answered, so a file read or write, a
port probe, a profile capture, a run's launch or its close runs here instead, and hands its
outcome back through a queued signal (TowerDeck's thread model, docs/architecture.md).

Each kind of job runs on a thread named for what it does (``editor-io``, ``profile-capture``,
``window-run-switch``...): a stack dump, ``py-spy`` or a hang's report then says which job a
thread was doing, and two kinds never wait behind one another.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from PySide6 import QtCore

Done = Callable[[Any, BaseException | None], None]


class Relay(QtCore.QObject):
    """Carries a callable from a worker thread to the GUI thread (a queued signal)."""

    sig_call = QtCore.Signal(object)

    def __init__(self, parent: QtCore.QObject) -> None:
        super().__init__(parent)
        self.sig_call.connect(self._on_call, QtCore.Qt.ConnectionType.QueuedConnection)

    def _on_call(self, fn: Callable[[], None]) -> None:
        fn()


def _deliver(relay: Relay, done: Done, result: Any, error: BaseException | None) -> bool:
    """``done(result, error)`` on the GUI thread; False when nobody is left to take it (the
    relay's owner was deleted meanwhile)."""
    try:
        relay.sig_call.emit(lambda: done(result, error))
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

    def body() -> None:
        result, error = _outcome(work)
        _deliver(relay, done, result, error)

    threading.Thread(target=body, name=name, daemon=True).start()


class SerialJobs:
    """Jobs that must neither overlap nor pass one another (a run's launch, attach and close: a
    close must end before the same run is attached again): one at a time, in the order given, on
    one thread named ``name``; each outcome back on the GUI thread.

    The thread is not a daemon, so a job still queued when the window goes (a close that releases
    a run's lock and socket) is finished before the process exits."""

    def __init__(self, relay: Relay, name: str) -> None:
        self._relay = relay
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)

    def submit(self, work: Callable[[], Any], done: Done, *, undelivered: Callable[[Any], None] | None = None) -> None:
        """``work`` after the jobs before it; ``done(result, error)`` on the GUI thread, or, when
        the GUI side is gone by then, ``undelivered(result)`` on this thread (a launched session
        nobody took is stopped there, not left running)."""

        def body() -> None:
            result, error = _outcome(work)
            if not _deliver(self._relay, done, result, error) and undelivered is not None and error is None:
                with contextlib.suppress(Exception):
                    undelivered(result)

        self._executor.submit(body)

    def shutdown(self) -> None:
        """Take no more jobs; those queued still run (without waiting for them here)."""
        self._executor.shutdown(wait=False)
