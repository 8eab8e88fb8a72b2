"""Work off the GUI thread: run a function on a short-lived thread, get its result back on the GUI thread.

The GUI thread never waits on the disk or a socket (see CONVENTIONS.md); a file read, a write or
a port probe runs here and hands its result back through a queued signal.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

from PySide6 import QtCore


class Relay(QtCore.QObject):
    """Carries a callable from a worker thread to the GUI thread (a queued signal)."""

    sig_call = QtCore.Signal(object)

    def __init__(self, parent: QtCore.QObject) -> None:
        super().__init__(parent)
        self.sig_call.connect(self._on_call, QtCore.Qt.ConnectionType.QueuedConnection)

    def _on_call(self, fn: Callable[[], None]) -> None:
        fn()


def run_off_thread(relay: Relay, work: Callable[[], Any], done: Callable[[Any, BaseException | None], None]) -> None:
    """Run ``work`` on a daemon thread, then ``done(result, error)`` on the GUI thread."""

    def body() -> None:
        result: Any = None
        error: BaseException | None = None
        try:
            result = work()
        except Exception as exc:
            error = exc
        with contextlib.suppress(RuntimeError):  # the editor was deleted meanwhile: nobody to tell
            relay.sig_call.emit(lambda: done(result, error))

    threading.Thread(target=body, name="towerdeck-editor-io", daemon=True).start()
