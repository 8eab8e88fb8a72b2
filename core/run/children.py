"""Child processes that must end with this one: ssh relays and probes, GPU queries, TensorBoard,
``[notify]`` commands.

Each starts in its own session (so a Ctrl-C in the terminal reaches TowerDeck, which decides what
to end and how, and so one ``killpg`` reaches whatever the child started: ssh's ProxyCommand, a
notify command's helpers). Being in another session, a child would outlive a TowerDeck that dies
without running its handlers (SIGKILL, or a signal it does not handle); so on Linux the kernel is
asked to SIGKILL it then (``PR_SET_PDEATHSIG``). That request follows the *thread* that forked
the child, not the process: a child started from a worker thread (a pool's, or a connection's)
would be killed when that thread ends. So every child is forked by one thread that lives as long
as the process (``child-spawner``), and the callers wait for their ``Popen`` there.

    proc = popen(["ssh", ...], stdin=PIPE, stdout=PIPE)   # as subprocess.Popen, own session
    kill_group(proc)                                      # SIGKILL its whole process group
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

_PR_SET_PDEATHSIG = 1
_requests: queue.SimpleQueue[tuple[Callable[[], subprocess.Popen[Any]], Future[subprocess.Popen[Any]]]] = (
    queue.SimpleQueue()
)
_spawner: threading.Thread | None = None
_spawner_lock = threading.Lock()


def _prctl() -> Callable[..., int] | None:
    """libc's prctl, looked up here, before any fork: the child only calls it."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    function.restype = ctypes.c_int
    return function


_PRCTL = _prctl()


def _die_with_parent(parent_pid: int) -> Callable[[], None]:
    def in_child() -> None:
        # Runs in the child between fork and exec: only the system call and a check, nothing that
        # could wait for a lock another thread held at the fork.
        if _PRCTL is not None:
            _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before the request was made: go now
            os._exit(1)

    return in_child


def _serve() -> None:
    while True:
        start, result = _requests.get()
        if not result.set_running_or_notify_cancel():
            continue
        try:
            result.set_result(start())
        except BaseException as exc:  # an OSError (no such program) goes back to the caller
            result.set_exception(exc)


def _on_spawner(start: Callable[[], subprocess.Popen[Any]]) -> subprocess.Popen[Any]:
    global _spawner
    if threading.current_thread() is _spawner:
        return start()
    with _spawner_lock:
        if _spawner is None or not _spawner.is_alive():
            _spawner = threading.Thread(target=_serve, name="child-spawner", daemon=True)
            _spawner.start()
    result: Future[subprocess.Popen[Any]] = Future()
    _requests.put((start, result))
    try:
        return result.result()
    except BaseException:
        # Interrupted while waiting (a signal's exception in this thread): a child the spawner
        # has started would be nobody's, alive until this process dies. End it before unwinding.
        if not result.cancel():
            _end_unclaimed(result)
        raise


def _end_unclaimed(result: Future[subprocess.Popen[Any]]) -> None:
    try:
        proc = result.result(timeout=30)
    except BaseException:  # its own failure, or a second interrupt: nothing of ours to end
        return
    kill_group(proc)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5)


def popen(argv: list[str], **kwargs: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen(argv, **kwargs)`` in a new session, killed (SIGKILL) by the kernel if this
    process dies first (Linux). Raises what Popen raises (OSError for a missing program)."""
    kwargs["start_new_session"] = True
    kwargs["preexec_fn"] = _die_with_parent(os.getpid())
    return _on_spawner(lambda: subprocess.Popen(argv, **kwargs))


def kill_group(proc: subprocess.Popen[Any], sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` to ``proc``'s whole process group (its session: see :func:`popen`), unless it
    has been reaped (its pid may be another process's by now)."""
    if proc.returncode is not None:
        return
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, sig)
