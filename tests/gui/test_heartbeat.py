"""The heartbeat the window tests lean on (tests/helpers/heartbeat.py) tells a frozen GUI thread's
own work from a machine whose CPUs are taken: a gap is split into the GUI thread's CPU time and
its time waiting for a CPU, and a test can bound the first however loaded the machine is."""

from __future__ import annotations

import os
import time

import pytest
from PySide6 import QtCore

from tests.helpers.heartbeat import Heartbeat


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_a_gap_of_gui_thread_work_is_counted_as_its_cpu(qtbot):
    beat = Heartbeat()
    qtbot.waitUntil(lambda: beat.turns >= 2, timeout=10_000)
    QtCore.QTimer.singleShot(0, lambda: _spin(0.3))
    turns = beat.turns
    qtbot.waitUntil(lambda: beat.turns >= turns + 3 and beat.longest_cpu_s >= 0.3, timeout=20_000)
    assert beat.longest_gap_s >= 0.3 and beat.longest_gap_cpu_s >= 0.3
    if os.path.exists("/proc/self/schedstat"):
        assert beat.longest_gap_queue_s == beat.longest_gap_queue_s  # a number, not NaN, on Linux
    with pytest.raises(AssertionError, match=r"its own CPU 0\.[3-9]"):
        beat.assert_turning(max_gap_s=60.0, max_cpu_s=0.2)


def test_a_gap_spent_asleep_is_not_gui_thread_cpu(qtbot):
    beat = Heartbeat()
    qtbot.waitUntil(lambda: beat.turns >= 2, timeout=10_000)
    QtCore.QTimer.singleShot(0, lambda: time.sleep(0.4))  # blocked: neither CPU nor run queue
    turns = beat.turns
    qtbot.waitUntil(lambda: beat.turns >= turns + 3 and beat.longest_gap_s >= 0.4, timeout=20_000)
    assert beat.longest_gap_cpu_s < 0.2
    beat.assert_turning(max_gap_s=60.0, max_cpu_s=0.2)
    if os.path.exists("/proc/self/schedstat"):
        assert beat.longest_blocked_s >= 0.3, beat.describe_longest()
        with pytest.raises(AssertionError, match=r"blocked in one gap 0\.[3-9]"):
            beat.assert_turning(max_gap_s=60.0, max_blocked_s=0.2)
