"""The run directory's hot files kept open: each role's telemetry and parsed-offsets file.

A 256-worker run appends metrics and notes its parse offset ~2,500 times a second. Opening and
closing the file each time was a third of the controller thread's CPU (py-spy at 256 simulated
workers: ``open`` alone 175 of 593 samples), so the files stay open, least recently used first
out past :data:`MAX_OPEN` (half the file limit). Every write is an unbuffered ``os.write``/``os.pwrite``: when it
returns, the bytes are in the file (the page cache) as with a close, so "on disk before on screen"
holds. A failed write closes that file, and the next write opens it again (a full disk that
recovers); so does a write to a file removed since it was opened (one ``fstat`` a write).
"""

from __future__ import annotations

import collections
import os
import resource
import threading
from pathlib import Path

__all__ = ["MAX_OPEN", "OpenFiles"]


def _max_open() -> int:
    """Half the process's file limit (the rest for links, pipes and logs), at most 4,096: a role
    has two hot files, and a cache smaller than them all reopens a file at nearly every write (at
    256 workers a cap of 256 still spent a quarter of the controller thread in ``open``)."""
    try:
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        soft = 1024
    if soft == resource.RLIM_INFINITY:
        soft = 8192
    return max(64, min(4096, soft // 2))


MAX_OPEN = _max_open()  # files held open at once


class OpenFiles:
    """Append to, or overwrite the start of, files kept open; safe from several threads."""

    def __init__(self, max_open: int = MAX_OPEN) -> None:
        self._max_open = max_open
        self._fds: collections.OrderedDict[tuple[Path, bool], int] = collections.OrderedDict()
        self._lock = threading.Lock()

    def append(self, path: Path, data: bytes) -> None:
        """Append ``data`` to ``path`` (made, with its folder, if need be); raises OSError."""
        with self._lock:
            fd, _size = self._fd(path, append=True)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            except OSError:
                self._drop(path, append=True)
                raise

    def overwrite(self, path: Path, data: bytes) -> None:
        """Write ``data`` at the start of ``path`` and cut the file to its length (one ``pwrite``:
        a killed process leaves all of it or none); raises OSError."""
        with self._lock:
            fd, size = self._fd(path, append=False)
            try:
                os.pwrite(fd, data, 0)
                # The size from the one fstat a write makes anyway (a second one after the pwrite
                # was a third of the parse-offset note's system calls, ~1,300 a second at 256 workers).
                if size > len(data):  # a longer, older record
                    os.ftruncate(fd, len(data))
            except OSError:
                self._drop(path, append=False)
                raise

    def close(self) -> None:
        """Close every file held open (writing again opens them again)."""
        with self._lock:
            for fd in self._fds.values():
                os.close(fd)
            self._fds.clear()

    def held(self) -> int:
        """How many files are open now."""
        return len(self._fds)

    def _fd(self, path: Path, *, append: bool) -> tuple[int, int]:
        """The file's descriptor and its size now."""
        key = (path, append)
        fd = self._fds.get(key)
        if fd is not None:
            status = os.fstat(fd)
            if status.st_nlink > 0:
                self._fds.move_to_end(key)
                return fd, status.st_size
            # Removed (or replaced) since it was opened: writes would go to a file nobody can
            # read; open the path again, as a write did before files were kept open.
            self._drop(path, append=append)
        flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | (os.O_APPEND if append else 0)
        try:
            fd = os.open(path, flags, 0o644)
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, flags, 0o644)
        self._fds[key] = fd
        while len(self._fds) > self._max_open:
            _key, old = self._fds.popitem(last=False)
            os.close(old)
        try:
            size = os.fstat(fd).st_size
        except OSError:
            self._drop(path, append=append)
            raise
        return fd, size

    def _drop(self, path: Path, *, append: bool) -> None:
        fd = self._fds.pop((path, append), None)
        if fd is not None:
            os.close(fd)
