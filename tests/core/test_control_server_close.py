"""Closing the control socket's server returns at once: its thread waits in accept(), and the
window closes it on the GUI thread (issue 19: closing the window stood still ~270 ms, the rest of
accept()'s 0.5 s timeout)."""

from __future__ import annotations

import time
from pathlib import Path

from core.controller.control_server import ControlServer


def test_close_wakes_the_accept_and_joins_its_thread_at_once(tmp_path: Path) -> None:
    server = ControlServer(controller=None, run_dir=tmp_path)  # type: ignore[arg-type]  # no request is made
    path = server.start()
    assert path.exists()
    assert server._sock is not None and server._thread is not None
    server._sock.settimeout(None)  # from its next accept() on, one that waits for ever unless woken
    # Past the current accept()'s 0.5 s timeout, so the thread waits in one without a timeout. (On a
    # machine too loaded for that, it is still in the first: close() works either way, no flake.)
    time.sleep(0.8)
    started = time.monotonic()
    server.close()
    assert not server._thread.is_alive(), "close() left the control thread waiting in accept()"
    assert time.monotonic() - started < 1.9  # close() joins for at most 2 s: it did not run out
    assert not path.exists()
