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
can wait (:func:`waits`) are timed. A reader's join in the middle of its pass, a lock another
thread holds, a socket's bind, a directory made on a slow disk: each is one long call.

One thing still stretches such a call with the machine's load: a call that lets go of the GIL
(any system call) has to take it back, from a thread that may itself be waiting for a CPU, off
the CPU while holding it. Measured at a load average of 19 on 2 cores: 175 ms in a ``getcwd``.
So from each call's wall time this takes away the time threads of this process spent waiting for
a CPU meanwhile (``/proc/self/task/TID/schedstat``): the GUI thread's own, and the most of any
other thread's (the GIL's holder). What is left, :attr:`Wait.blocked_s`, is the waiting the
window's code chose: a join is not excused by it, as the joined thread spends the time on a CPU.
A lock taken by a ``with`` statement is entered without a call the profile sees (CPython 3.11
enters it inside the ``BEFORE_WITH`` opcode): :func:`see_locks` makes the locks of the modules a
test names (the run's inbox, the reader's and the controller's own) enter by a call. What it
cannot see: Qt's own C++ (a ``QSettings.sync``) and compiled extensions' internals.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# The modules whose functions can block the calling thread, and of some, the functions that do:
# locks (and so joins, events, conditions), queues, sleeps, files and directories, sockets,
# pipes, polls, file locks, process starts.
WAITING_MODULES = frozenset({"posix", "io", "_io", "socket", "_socket", "select", "fcntl", "_posixsubprocess"})
WAITING_FUNCTIONS = {"_thread": {"acquire", "acquire_lock", "__enter__"}, "time": {"sleep"}, "_queue": {"get"}}
STACK_DEPTH = 8  # frames of the project's own code named for a long wait
ROOT = Path(__file__).resolve().parents[2]
TASKS = Path("/proc/self/task")


def _module_of(fn: Any) -> str:
    owner = getattr(fn, "__self__", None)
    if owner is None or isinstance(owner, types.ModuleType):
        return str(getattr(fn, "__module__", None) or getattr(owner, "__name__", ""))
    return type(owner).__module__


def waits(fn: Any) -> str | None:
    """``module.function`` when ``fn`` is a C function that can make its caller wait, else None."""
    module = _module_of(fn)
    name = getattr(fn, "__name__", "?")
    if module in WAITING_MODULES or name in WAITING_FUNCTIONS.get(module, ()):
        return f"{module}.{getattr(fn, '__qualname__', name)}"
    return None


def queue_times() -> dict[str, int]:
    """Nanoseconds each thread of this process has spent runnable but waiting for a CPU."""
    times = {}
    try:
        names = os.listdir(TASKS)
    except OSError:
        return times
    for name in names:
        try:
            with open(TASKS / name / "schedstat", "rb") as f:
                times[name] = int(f.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return times


class SeenLock:
    """A lock whose ``with`` enters by a call to ``acquire`` (which the profile sees)."""

    def __init__(self, lock: Any) -> None:
        self._lock = lock

    def __enter__(self) -> bool:
        return bool(self._lock.acquire())

    def __exit__(self, *_exc: object) -> None:
        self._lock.release()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._lock, name)


class _SeenThreading:
    """The ``threading`` module, but the locks it makes are each a :class:`SeenLock`."""

    @staticmethod
    def Lock() -> SeenLock:  # threading's name
        return SeenLock(threading.Lock())

    @staticmethod
    def RLock() -> SeenLock:  # threading's name
        return SeenLock(threading.RLock())

    def __getattr__(self, name: str) -> Any:
        return getattr(threading, name)


def see_locks(monkeypatch: pytest.MonkeyPatch, *modules: types.ModuleType) -> None:
    """The locks that ``modules`` make from now on (``threading.Lock()``, ``RLock()``) are entered
    by a call, so their waits are timed too."""
    for module in modules:
        monkeypatch.setattr(module, "threading", _SeenThreading())


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
    wall_s: float
    own_queue_s: float  # the GUI thread waiting for a CPU
    other_queue_s: float  # the most any other thread of the process waited for one meanwhile
    call: str  # the C function, e.g. "_thread.lock.acquire"
    where: str  # the project's frames that called it
    phase: str  # what the test was doing ("open", "launch", "close")

    @property
    def blocked_s(self) -> float:
        return max(0.0, self.wall_s - self.own_queue_s - self.other_queue_s)

    def describe(self) -> str:
        return (
            f"{self.blocked_s * 1000:.1f} ms blocked in {self.call} during {self.phase} (wall {self.wall_s * 1000:.1f} ms, "
            f"waiting for a CPU: the GUI thread {self.own_queue_s * 1000:.1f} ms, another thread "
            f"{self.other_queue_s * 1000:.1f} ms), from {self.where}"
        )


class GuiThreadWaits:
    """Use as a context manager on the GUI thread; set :attr:`phase` as the test goes on.
    :attr:`longest` is the wait that blocked longest, :meth:`longest_in` that of a phase."""

    def __init__(self) -> None:
        self.phase = ""
        self.calls = 0  # waiting calls timed (proves the profile saw the GUI thread's calls)
        self._longest: dict[str, Wait] = {}
        self._stack: list[tuple[Any, str | None, float, dict[str, int], types.FrameType]] = []
        self._thread = threading.get_ident()
        self._own = str(threading.get_native_id())

    def __enter__(self) -> GuiThreadWaits:
        assert threading.get_ident() == self._thread
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *_exc: object) -> None:
        sys.setprofile(None)

    def _profile(self, frame: types.FrameType, event: str, arg: Any) -> None:
        if event == "c_call":
            call = waits(arg)
            before = queue_times() if call else {}  # read first: its own reads are not the call's time
            self._stack.append((arg, call, time.perf_counter(), before, frame))
        elif event in ("c_return", "c_exception"):
            for at in range(len(self._stack) - 1, -1, -1):  # a call whose return was not seen is dropped
                if self._stack[at][0] is arg:
                    break
            else:
                return
            _fn, call, started, before, caller = self._stack[at]
            del self._stack[at:]
            if call is not None:
                self._note(call, time.perf_counter() - started, before, caller)

    def _note(self, call: str, wall_s: float, before: dict[str, int], caller: types.FrameType) -> None:
        self.calls += 1
        known = self._longest.get(self.phase)
        if known is not None and wall_s <= known.blocked_s:
            return  # cannot block longer than it took
        after = queue_times()
        queued = {tid: (after[tid] - ns) / 1e9 for tid, ns in before.items() if tid in after}
        own = queued.pop(self._own, 0.0)
        wait = Wait(wall_s, own, max(queued.values(), default=0.0), call, _where(caller), self.phase)
        if known is None or wait.blocked_s > known.blocked_s:
            self._longest[self.phase] = wait

    @property
    def longest(self) -> Wait | None:
        return max(self._longest.values(), key=lambda w: w.blocked_s, default=None)

    def longest_in(self, phase: str) -> Wait | None:
        return self._longest.get(phase)

    def describe(self) -> str:
        return "; ".join(w.describe() for w in self._longest.values()) or "no waiting call seen"
