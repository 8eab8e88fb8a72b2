"""One controller per run: an exclusive lock in the run directory, held while a process runs it.

``launch``, ``attach`` and the window take ``controller.lock`` (``fcntl.flock``, exclusive, never
waiting) before they reach the run's agents, and write who they are into it. A second one is
refused with a line naming the holder, instead of the two taking the agents from each other. The
kernel drops the lock when its process ends however it ends (SIGKILL included), so a held lock is
also how ``runs`` tells a run that someone still runs from one whose launcher is gone.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

LOCK_FILE = "controller.lock"


class RunLocked(Exception):
    """Another process controls the run; the message names it and what to do."""


def _describe(path: Path, holder: dict[str, Any] | None) -> str:
    if not holder:
        return f"another process controls the run in {path} (it holds {path / LOCK_FILE})"
    since = holder.get("since")
    when = time.strftime(" since %H:%M:%S", time.localtime(since)) if isinstance(since, (int, float)) else ""
    return (
        f"run {path.name} is controlled by pid {holder.get('pid')} on {holder.get('host')} "
        f"(`{holder.get('command')}`){when}; use that one, leave it with `python main.py ctl {path} detach`, "
        "or stop it first"
    )


class RunLock:
    """The held lock of one run directory; :meth:`release` (or process exit) lets it go."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, path: Path, role: str) -> RunLock:
        """Take the run's lock for this process (``role``: launch, attach, window); RunLocked when
        another process holds it, OSError when the file cannot be made."""
        import fcntl

        fd = os.open(path / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        for attempt in range(10):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                found = holder(path)
                if found is not None or attempt == 9:  # else a reader looked at that very moment
                    os.close(fd)
                    raise RunLocked(_describe(path, found)) from None
                time.sleep(0.02)
            except OSError:
                os.close(fd)
                raise
        command = " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]) if sys.argv and sys.argv[0] else role
        record = {"pid": os.getpid(), "host": socket.gethostname(), "command": command[:300], "role": role}
        record["since"] = round(time.time(), 3)
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(record) + "\n").encode(), 0)
        return cls(path, fd)

    def release(self) -> None:
        """Let the run go (the file stays: whoever takes it next rewrites it)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)  # closing the only descriptor drops the flock
            self._fd = None


def holder(path: Path) -> dict[str, Any] | None:
    """Who holds the run's lock now, or None when nobody does (or the run has no lock file)."""
    import fcntl

    try:
        fd = os.open(path / LOCK_FILE, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                data = json.loads(os.pread(fd, 4096, 0) or b"{}")
            except ValueError:
                data = {}
            return data if isinstance(data, dict) and data else {"pid": "?", "host": "?", "command": "?"}
        except OSError:
            return None
        return None  # we could take it: nobody holds it
    finally:
        os.close(fd)  # also drops the shared lock taken to look
