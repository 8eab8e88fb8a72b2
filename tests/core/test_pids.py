"""A stored pid is signalled only while it is the same process (issue 19): after minutes of a lost
link, the pid a role had may belong to another process, which must not be killed."""

from __future__ import annotations

import subprocess
import time

from core.run.pids import kill_group_if_same, start_time


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "60"], start_new_session=True)


def test_start_time_tells_a_process_from_a_later_one_with_its_pid() -> None:
    proc = _sleeper()
    try:
        started = start_time(proc.pid)
        assert started is not None and start_time(proc.pid) == started
        later = _sleeper()
        try:
            assert start_time(later.pid) is not None
        finally:
            later.kill()
            later.wait()
    finally:
        proc.kill()
        proc.wait()
    assert start_time(proc.pid) is None  # reaped: no such process


def test_a_reused_pid_is_not_signalled_and_the_same_process_is() -> None:
    proc = _sleeper()
    try:
        started = start_time(proc.pid)
        assert started is not None
        # As if the stored start time were another process's: the pid was reused meanwhile.
        assert kill_group_if_same(proc.pid, started - 1) is False
        assert kill_group_if_same(proc.pid, None) is False  # never known: not risked either
        time.sleep(0.2)
        assert proc.poll() is None  # still running: nothing was sent
        assert kill_group_if_same(proc.pid, started) is True
        assert proc.wait(10) == -9
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert kill_group_if_same(proc.pid, started) is True  # gone: nothing left to stop, no error
