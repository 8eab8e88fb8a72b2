"""Python's garbage collector runs on the GUI thread only while a window exists (issue 19).

A collection on another thread destroyed Qt objects left in a cycle there and deadlocked the
window; these tests make such cycles on purpose and let a busy thread allocate beside them."""

from __future__ import annotations

import gc
import json
import threading
import weakref
from pathlib import Path

from PySide6 import QtCore, QtGui

from tests.helpers.gcwatch import collection_threads
from tests.helpers.heartbeat import Heartbeat


class QtOwningCycle:
    """A Python object that owns Qt objects (an action and a plain QObject) and itself."""

    def __init__(self) -> None:
        self.action = QtGui.QAction("in a cycle")
        self.object = QtCore.QObject()
        self.me = self


def _allocate_like_a_link(stop: threading.Event, done: threading.Event) -> None:
    """What an agent link does all day: parse JSON lines into events that are kept a while (an
    inbox, a series), so the count of new containers crosses the gen-0 threshold again and again."""
    line = json.dumps({"kind": "metrics", "role": "worker:1", "samples": [{"step": i, "loss": 0.5} for i in range(5)]})
    kept = []
    for _ in range(20_000):
        if stop.is_set():
            break
        kept.append(json.loads(line))
    done.set()


def test_qt_owning_cycles_are_collected_on_the_gui_thread_while_others_allocate(qtbot, tmp_path: Path):
    from gui.window import collector
    from gui.window.main_window import MainWindow

    enabled_before = gc.isenabled()
    window = MainWindow(None, runs_root=tmp_path / "runs")
    qtbot.addWidget(window)
    beat = Heartbeat()
    freed_on: list[str] = []
    cycles = [QtOwningCycle() for _ in range(200)]
    for cycle in cycles:
        weakref.finalize(cycle, lambda: freed_on.append(threading.current_thread().name))
    del cycles, cycle  # unreachable now, but for the collector
    stop, done = threading.Event(), threading.Event()
    busy = threading.Thread(target=_allocate_like_a_link, args=(stop, done), name="agent-link-like")
    with collection_threads() as threads:
        busy.start()
        try:
            qtbot.waitUntil(done.is_set, timeout=60_000)
            qtbot.waitUntil(lambda: len(freed_on) == 200, timeout=10_000)
        finally:
            stop.set()
            busy.join()
    gui_thread = threading.current_thread().name
    assert threads and set(threads) == {gui_thread}, f"collections ran on {sorted(set(threads))}"
    assert set(freed_on) == {gui_thread}
    beat.assert_turning()
    # Closing the last window gives automatic collection back.
    window.close()
    assert not collector.active() and gc.isenabled() == enabled_before
