"""A stored pid is only signalled while it is still the same process.

A pid kept from a role's start (the controller's last resort when a local agent is lost, up to
``core.remote.link.RECONNECT_GIVE_UP_S`` later) may have been reused by then. The process's start time,
read when the pid was learned, tells the two apart: Linux's ``/proc/PID/stat`` start time in
clock ticks since boot, else psutil's create time.
"""

from __future__ import annotations

import contextlib
import os
import signal


def start_time(pid: int) -> float | None:
    """When process ``pid`` started (comparable only with this function's own answers); None when
    there is no such process or it cannot be told."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return float(stat[stat.rindex(b")") + 2 :].split()[19])  # field 22, starttime
    except FileNotFoundError:
        if os.path.isdir("/proc/self"):
            return None  # Linux: no such process
    except (OSError, ValueError, IndexError):
        pass
    try:
        import psutil

        return float(psutil.Process(pid).create_time())
    except Exception:  # no psutil, or no such process
        return None


def kill_group_if_same(pid: int, started: float | None, sig: int = signal.SIGKILL) -> bool:
    """Send ``sig`` to the process group led by ``pid`` unless ``pid`` is now another process:
    alive with another start time, or alive while its start time was never known. A group whose
    leader is gone is still signalled (its pid cannot be reused while the group lives). False
    only when ``pid`` is another process (nothing sent); True when sent, or nothing was left."""
    now = start_time(pid)
    if now is not None and now != started:
        return False
    with contextlib.suppress(OSError):  # no such group: nothing left to stop
        os.killpg(pid, sig)
    return True
