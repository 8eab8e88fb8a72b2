"""A GUI-thread heartbeat: proves the event loop keeps turning while a test drives the window.

A QTimer on the GUI thread notes the time at every turn; the longest gap between two turns is
how long the window was frozen (plus whatever the test itself did on the GUI thread meanwhile,
which is GUI-thread work too). Window tests assert it stays under a few seconds.

Each gap is also split into what it was spent on: the GUI thread's own CPU time
(``time.thread_time``) and, on Linux, the time it was runnable but waiting for a CPU (the run
queue, ``/proc/self/task/TID/schedstat``). The first is what the window's code controls; the
second is the machine's CPUs being taken by others (issue 19: at a 65-role launch on 2 cores, a
708 ms gap was 31 ms of GUI-thread CPU and 672 ms in the run queue). :attr:`longest_cpu_s` is the
most GUI-thread CPU between two turns, which a test can bound however loaded the machine is.
What is left of a gap, neither CPU nor run queue, is time the GUI thread was blocked (a lock, a
read, a sleep): :attr:`longest_blocked_s` is the most of it in one gap past the timer's interval,
the freeze of the worst kind (a GUI thread waiting on I/O), which no load explains either.
"""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path

from PySide6 import QtCore

INTERVAL_MS = 50


def run_queue_s(path: Path) -> float:
    """Seconds this thread has spent runnable but not running (NaN where the kernel does not say)."""
    try:
        return int(path.read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return math.nan


class Heartbeat(QtCore.QObject):
    """Start it on the GUI thread; :attr:`longest_gap_s` is the longest time without a turn,
    :attr:`longest_cpu_s` the most GUI-thread CPU time between two turns."""

    def __init__(self) -> None:
        super().__init__()
        self.turns = 0
        self.longest_gap_s = 0.0
        self.longest_cpu_s = 0.0
        self.longest_gap_cpu_s = 0.0  # of the longest gap: the GUI thread's CPU time
        self.longest_gap_queue_s = 0.0  # ... and its time waiting for a CPU
        self.longest_blocked_s = 0.0  # the most time blocked (neither CPU nor run queue) in a gap
        self.last_gap = (0.0, 0.0, 0.0)  # the latest gap: (seconds, GUI-thread CPU, run-queue wait)
        self._schedstat = Path(f"/proc/self/task/{threading.get_native_id()}/schedstat")
        self._last = time.monotonic()
        self._last_cpu = time.thread_time()
        self._last_queue = run_queue_s(self._schedstat)
        self.timer = QtCore.QTimer(self)
        self.timer.setInterval(INTERVAL_MS)
        self.timer.timeout.connect(self._beat)
        self.timer.start()

    def _beat(self) -> None:
        now, cpu, queue = time.monotonic(), time.thread_time(), run_queue_s(self._schedstat)
        gap, cpu_s = now - self._last, cpu - self._last_cpu
        if gap > self.longest_gap_s:
            self.longest_gap_s = gap
            self.longest_gap_cpu_s = cpu_s
            self.longest_gap_queue_s = queue - self._last_queue
        self.longest_cpu_s = max(self.longest_cpu_s, cpu_s)
        waited = queue - self._last_queue
        if waited == waited:  # where the kernel says nothing, blocked time is not measured
            blocked = gap - cpu_s - waited - INTERVAL_MS / 1000
            self.longest_blocked_s = max(self.longest_blocked_s, blocked)
        self.last_gap = (gap, cpu_s, queue - self._last_queue)
        self._last, self._last_cpu, self._last_queue = now, cpu, queue
        self.turns += 1

    def stop(self) -> None:
        self._beat()
        self.timer.stop()

    def describe_longest(self) -> str:
        """The longest gap and what it was spent on, for a failure message or a benchmark."""
        queue = self.longest_gap_queue_s
        waiting = f", waiting for a CPU {queue:.2f} s" if queue == queue else ""
        return (
            f"the GUI thread stood still for {self.longest_gap_s:.2f} s (its own CPU {self.longest_gap_cpu_s:.2f} s"
            f"{waiting}); most GUI-thread CPU between two turns {self.longest_cpu_s:.2f} s; "
            f"most time blocked in one gap {self.longest_blocked_s:.2f} s"
        )

    def assert_turning(
        self, max_gap_s: float = 5.0, max_cpu_s: float | None = None, max_blocked_s: float | None = None
    ) -> None:
        """The event loop turned, never stood still longer than ``max_gap_s``, and (if given) never
        spent more than ``max_cpu_s`` of GUI-thread CPU between two turns nor was blocked longer
        than ``max_blocked_s`` in one gap."""
        self.stop()
        assert self.turns > 1, "the GUI thread's event loop never turned"
        assert self.longest_gap_s < max_gap_s, self.describe_longest()
        if max_cpu_s is not None:
            assert self.longest_cpu_s < max_cpu_s, self.describe_longest()
        if max_blocked_s is not None:
            assert self.longest_blocked_s < max_blocked_s, self.describe_longest()
