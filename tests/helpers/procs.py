"""Asserting that nothing is left behind: no process, no listening port."""

from __future__ import annotations

import time

import psutil


def listening(ports: list[int]) -> list[tuple[int, int | None]]:
    return [
        (c.laddr.port, c.pid)
        for c in psutil.net_connections(kind="tcp")
        if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port in ports
    ]


def with_marker(marker: str) -> list[psutil.Process]:
    """Live processes whose command line contains ``marker``."""
    found = []
    for p in psutil.process_iter(["cmdline", "status"]):
        try:
            if p.info["status"] != psutil.STATUS_ZOMBIE and marker in " ".join(p.info["cmdline"] or []):
                found.append(p)
        except psutil.Error:
            continue
    return found


def assert_nothing_left(ports: list[int], marker: str, timeout_s: float = 5.0) -> None:
    """No process with ``marker`` in its command line and no listener on ``ports``.

    The wait covers the kernel's reaping; TowerDeck has already reported every role as ended.
    """
    deadline = time.time() + timeout_s
    while True:
        procs = with_marker(marker)
        ports_held = listening(ports)
        if not procs and not ports_held:
            return
        if time.time() > deadline:
            raise AssertionError(
                f"left behind: processes {[(p.pid, p.cmdline()) for p in procs]}, listening ports {ports_held}"
            )
        time.sleep(0.1)


def of_run(path: object) -> list[psutil.Process]:
    """Live processes of a run under ``path``: its roles (they carry TOWERDECK_RUN_DIR) and its
    agents (they work in its folder)."""
    text = str(path)
    found = []
    for p in psutil.process_iter(["status"]):
        try:
            if p.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if p.environ().get("TOWERDECK_RUN_DIR", "").startswith(text) or p.cwd().startswith(text):
                found.append(p)
        except psutil.Error:
            continue
    return found


def gone(pid: int) -> bool:
    """Whether ``pid`` has exited (a zombie counts): a process that exits between a ``pid_exists``
    and a ``Process(pid)`` is gone, not an error (the race failed a test on a loaded machine)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
