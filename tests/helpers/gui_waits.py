"""How long the GUI thread waited, and on what: every call it makes into a function that can wait
(a lock, hence a thread's join or an event; a sleep; a file, socket, pipe or process call) is
timed while a test drives the window (:class:`GuiThreadWaits`), the longest kept with where the
window's code made it.

Why not the gaps between a timer's ticks (tests/helpers/heartbeat.py), nor the wall time of the
window's calls? Both stretch with what other threads and processes do. On a loaded 2-core machine
a tick comes late because the GUI thread waits for a CPU; and while a reader thread parses a run
on the other core, the GUI thread waits for Python's GIL between any two of its bytecodes
(measured here: a roles-table refresh of 13 ms CPU took 74 ms of wall time while a day-long run
was skimmed). Neither says whether the window's own code waited on something.

This does: ``sys.setprofile`` on the GUI thread sees each call into a C function, and those that
can wait (the modules in :data:`WAITING_MODULES`) are timed. A reader's join in the middle of its
pass, a lock another thread holds, a socket's bind, a directory made on a slow disk: each shows
as one long call, however loaded the machine. What it adds of the load is only the GIL's
reacquisition at the end of a call that released it (a few milliseconds). What it cannot see:
Qt's own C++ (a ``QSettings.sync``) and compiled extensions' internals.
"""

from __future__ import annotations

import sys
import threading
import time
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The modules whose functions can block the calling thread: locks (and so joins, events,
# conditions, queues), sleeps, files and directories, sockets, pipes, polls, file locks, forks.
WAITING_MODULES = frozenset(
    {"_thread", "time", "posix", "io", "_io", "socket", "_socket", "select", "fcntl", "_posixsubprocess", "_queue"}
)
STACK_DEPTH = 8  # frames of the project's own code named for a long wait
ROOT = Path(__file__).resolve().parents[2]


def _module_of(fn: Any) -> str:
    owner = getattr(fn, "__self__", None)
    if owner is None or isinstance(owner, types.ModuleType):
        return str(getattr(fn, "__module__", None) or getattr(owner, "__name__", ""))
    return type(owner).__module__


def _where(frame: types.FrameType | None) -> str:
    """The calls that led to a wait, innermost first: the project's own frames only (core/, gui/)."""
    parts = []
    while frame is not None and len(parts) < STACK_DEPTH:
        path = Path(frame.f_code.co_filename)
        if path.is_relative_to(ROOT) and path.relative_to(ROOT).parts[0] in ("core", "gui"):
            parts.append(f"{path.relative_to(ROOT)}:{frame.f_lineno} {frame.f_code.co_name}")
        frame = frame.f_back
    return " <- ".join(parts) or "(outside core/ and gui/)"


@dataclass(frozen=True)
class Wait:
    seconds: float
    call: str  # the C function, e.g. "_thread.lock.acquire"
    where: str  # the project's frames that called it
    phase: str  # what the test was doing ("open", "launch", "close")

    def describe(self) -> str:
        return f"{self.seconds * 1000:.1f} ms in {self.call} during {self.phase}, from {self.where}"


class GuiThreadWaits:
    """Use as a context manager on the GUI thread; set :attr:`phase` as the test goes on.
    :attr:`longest` is the longest wait of all, :meth:`longest_in` that of a phase."""

    def __init__(self) -> None:
        self.phase = ""
        self.calls = 0  # waiting calls timed (proves the profile saw the GUI thread's calls)
        self._longest: dict[str, Wait] = {}
        self._stack: list[tuple[Any, float, types.FrameType]] = []
        self._thread = threading.get_ident()

    def __enter__(self) -> GuiThreadWaits:
        assert threading.get_ident() == self._thread
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *_exc: object) -> None:
        sys.setprofile(None)

    def _profile(self, frame: types.FrameType, event: str, arg: Any) -> None:
        if event == "c_call":
            self._stack.append((arg, time.perf_counter(), frame))
        elif event in ("c_return", "c_exception"):
            for at in range(len(self._stack) - 1, -1, -1):  # a call whose return was not seen is dropped
                if self._stack[at][0] is arg:
                    break
            else:
                return
            fn, started, caller = self._stack[at]
            del self._stack[at:]
            module = _module_of(fn)
            if module not in WAITING_MODULES:
                return
            self.calls += 1
            seconds = time.perf_counter() - started
            known = self._longest.get(self.phase)
            if known is None or seconds > known.seconds:
                name = f"{module}.{getattr(fn, '__qualname__', getattr(fn, '__name__', '?'))}"
                self._longest[self.phase] = Wait(seconds, name, _where(caller), self.phase)

    @property
    def longest(self) -> Wait | None:
        return max(self._longest.values(), key=lambda w: w.seconds, default=None)

    def longest_in(self, phase: str) -> Wait | None:
        return self._longest.get(phase)

    def describe(self) -> str:
        return "; ".join(w.describe() for w in self._longest.values()) or "no waiting call seen"
