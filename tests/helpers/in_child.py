"""Running a test's body in a child process under a deadline that kills it.

pytest-timeout's ``thread`` method needs the GIL to fire: a C call that holds it (``re`` backtracking
on a line) stops the timer too, and the suite sat there for good. A child process can always be
killed, so a body that may hold the GIL runs there and a hang fails the test instead."""

from __future__ import annotations

import multiprocessing
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection


def _run(body: Callable[[], None], conn: Connection) -> None:
    try:
        body()
    except BaseException:  # every failure goes back to the test, as text
        conn.send(traceback.format_exc())
    else:
        conn.send(None)
    conn.close()


def run_in_child(body: Callable[[], None], timeout_s: float) -> None:
    """Run ``body`` (a module-level function: it is imported by name in a fresh interpreter) and
    fail with its traceback, or with the deadline if it is still running after ``timeout_s``."""
    ctx = multiprocessing.get_context("spawn")  # no fork of a process with threads (and maybe Qt)
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_run, args=(body, child), daemon=True)
    proc.start()
    child.close()
    try:
        if not parent.poll(timeout_s):
            raise AssertionError(f"{body.__name__} was still running after {timeout_s:g} s (killed)")
        failure = parent.recv()
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join()
        parent.close()
    if failure is not None:
        raise AssertionError(f"{body.__name__} failed in its child process:\n{failure}")
