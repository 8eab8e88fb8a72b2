"""Runs one ``[notify]`` command and ends everything it started, daemons included.

``python reaper.py PARENT_PID -- COMMAND...`` (standard library only; :mod:`core.notify.notifier`
runs it, PARENT_PID being its own pid).
A command that forks a daemon (``setsid``, a double fork) takes that daemon out of its process
group and its session, where no ``killpg`` reaches it: each notification left one running. This
process makes itself the daemons' reaper (Linux's ``PR_SET_CHILD_SUBREAPER``: orphans of its
descendants become its children, not init's), runs the command with the same stdin, stdout and
stderr, and when the command has ended, or on SIGTERM (the notifier's timeout, TowerDeck
exiting, or TowerDeck dying: it asks the kernel for that signal then), kills every process
descended from it and reaps them. It exits with the command's code (128 + N when ended by
signal N). Elsewhere than Linux it ends the command's process group only.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
from types import FrameType

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
CANNOT_START = 127  # and one line on stderr: could not start (...)
MAX_ROUNDS = 50  # of killing what is there; a fork bomb still ends (SIGKILL leaves no time to fork much)


def _prctl(option: int, value: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        return int(ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _parents() -> dict[int, int]:
    """pid -> parent pid, of every process this user can see (Linux's /proc)."""
    out: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
            out[int(name)] = int(stat[stat.rindex(b")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return out


def descendants(root: int) -> list[int]:
    """Every process below ``root`` (children, theirs, ...)."""
    children: dict[int, list[int]] = {}
    for pid, ppid in _parents().items():
        children.setdefault(ppid, []).append(pid)
    found: list[int] = []
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def end_all(command: subprocess.Popen[bytes] | None) -> None:
    """SIGKILL every descendant (the command's group too), until none is left; reap them."""
    if command is not None and command.returncode is None:
        with contextlib.suppress(OSError):
            os.killpg(command.pid, signal.SIGKILL)
    if os.path.isdir("/proc"):
        for _ in range(MAX_ROUNDS):
            left = descendants(os.getpid())
            if not left:
                break
            for pid in left:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            _reap()
    _reap()


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def main(argv: list[str]) -> int:
    if len(argv) < 3 or not argv[0].isdigit() or argv[1] != "--":
        print("usage: reaper.py PARENT_PID -- COMMAND...", file=sys.stderr)
        return 2
    parent, argv = int(argv[0]), argv[2:]
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)  # TowerDeck died: end the command all the same
    command: subprocess.Popen[bytes] | None = None

    def on_term(signum: int, frame: FrameType | None) -> None:
        end_all(command)
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_term)
    if os.getppid() != parent:  # TowerDeck was gone before the request above: nothing to notify
        return 128 + signal.SIGTERM
    try:
        # Its own process group, so a stray kill of this one's group does not skip the cleanup here.
        command = subprocess.Popen(argv, process_group=0)
    except OSError as exc:
        print(f"could not start ({argv[0]}: {exc.strerror or exc})", file=sys.stderr)
        return CANNOT_START
    code = command.wait()
    end_all(command)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
