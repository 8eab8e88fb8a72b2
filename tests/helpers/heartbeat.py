"""A GUI-thread heartbeat: proves the event loop keeps turning while a test drives the window.

A QTimer on the GUI thread notes the time at every turn; the longest gap between two turns is
how long the window was frozen (plus whatever the test itself did on the GUI thread meanwhile,
which is GUI-thread work too). Window tests assert it stays under a few seconds.
"""

from __future__ import annotations

import time

from PySide6 import QtCore

INTERVAL_MS = 50


class Heartbeat(QtCore.QObject):
    """Start it on the GUI thread; :attr:`longest_gap_s` is the longest time without a turn."""

    def __init__(self) -> None:
        super().__init__()
        self.turns = 0
        self.longest_gap_s = 0.0
        self._last = time.monotonic()
        self.timer = QtCore.QTimer(self)
        self.timer.setInterval(INTERVAL_MS)
        self.timer.timeout.connect(self._beat)
        self.timer.start()

    def _beat(self) -> None:
        now = time.monotonic()
        self.longest_gap_s = max(self.longest_gap_s, now - self._last)
        self._last = now
        self.turns += 1

    def stop(self) -> None:
        self._beat()
        self.timer.stop()

    def assert_turning(self, max_gap_s: float = 5.0) -> None:
        """The event loop turned, and never stood still longer than ``max_gap_s``."""
        self.stop()
        assert self.turns > 1, "the GUI thread's event loop never turned"
        assert self.longest_gap_s < max_gap_s, f"the GUI thread stood still for {self.longest_gap_s:.1f} s"
