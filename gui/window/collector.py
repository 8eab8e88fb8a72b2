"""Python's cyclic garbage collector runs on the GUI thread only, while a window exists.

CPython collects on whichever thread allocates when a generation's threshold is crossed. In the
window's process the controller, agent-link and reader threads allocate all the time (JSON
parsing), so a collection could run there and destroy Qt objects left in a cycle (a pyqtgraph
``PlotItem``'s ``QMenu``): the destructor took a Qt lock and waited for the GIL while the GUI
thread, holding the GIL, waited for that lock, and the window froze for good (seen under load
with a 64-worker run).

:func:`hold` turns automatic collection off and starts a GUI-thread timer that collects by
generation as CPython would (``pyqtgraph.GarbageCollector`` does the same, without a way back):
the oldest generation whose count is over its threshold, and the oldest (a full collection) only
once the objects that reached it since the last full collection are a quarter of those it kept
then, as CPython's own ``long_lived_pending`` / ``long_lived_total`` rule (gcmodule.c) waits. With
a big heap (the ring buffers of 257 roles) a full collection is a long frame, and the count alone
asked for one every ten gen-1 collections, about every 10 s. The last :meth:`Hold.release` (the window
closed or destroyed) stops the timer and gives automatic collection back.
"""

from __future__ import annotations

import gc

from PySide6 import QtCore

INTERVAL_MS = 100  # 10 checks a second: gen-0 garbage never waits long, each check costs ~1 us


class _Collector(QtCore.QObject):
    def __init__(self) -> None:
        super().__init__()
        self.was_enabled = gc.isenabled()
        self.threshold = gc.get_threshold()
        self.users = 0
        # CPython's figures for when a full collection is worth its cost: the objects that survived
        # a gen-1 collection (moved to the oldest generation) since the last full collection, and
        # how many the last full collection kept.
        self.long_lived_pending = 0
        self.long_lived_total = 0
        self.timer = QtCore.QTimer(self)
        self.timer.setInterval(INTERVAL_MS)
        self.timer.timeout.connect(self.check)

    def check(self) -> None:
        counts, threshold = gc.get_count(), self.threshold
        if threshold[0] <= 0 or counts[0] <= threshold[0]:
            return
        if counts[2] > threshold[2] and self.long_lived_pending >= self.long_lived_total // 4:
            gc.collect(2)
            self.long_lived_pending = 0
            # Survivors of a full collection are all in the oldest generation: listing them costs a
            # fraction of the collection just made, and only once per full collection.
            self.long_lived_total = len(gc.get_objects(generation=2))
        elif counts[1] > threshold[1]:
            # What survives collecting the two young generations moves to the oldest one.
            young = len(gc.get_objects(generation=0)) + len(gc.get_objects(generation=1))
            found = gc.collect(1)
            self.long_lived_pending += max(young - found, 0)
        else:
            gc.collect(0)


_collector: _Collector | None = None
_generation = 0  # release_all() voids the holds made before it


class Hold:
    """One window's claim on GUI-thread collection; :meth:`release` is idempotent."""

    def __init__(self) -> None:
        self.released = False
        self.generation = _generation

    def release(self) -> None:
        if self.released or _collector is None or self.generation != _generation:
            return
        self.released = True
        _collector.users -= 1
        if _collector.users == 0:
            release_all()


def release_all() -> None:
    """Stop collecting on the timer and give automatic collection back, whatever holds remain
    (a test whose window was never closed; every hold made before is void)."""
    global _collector, _generation
    if _collector is None:
        return
    _collector.timer.stop()
    # Collect what the window left in cycles here, on the GUI thread, before automatic collection
    # comes back: a thread still running then (a run's summary writer) would otherwise collect
    # those Qt-owning cycles itself.
    gc.collect()
    if _collector.was_enabled:
        gc.enable()
    _collector.deleteLater()
    _collector = None
    _generation += 1


def hold() -> Hold:
    """Collect on this (the GUI) thread only until the returned hold is released."""
    global _collector
    app = QtCore.QCoreApplication.instance()
    if app is None or QtCore.QThread.currentThread() != app.thread():
        raise RuntimeError("gui.window.collector.hold() must be called on the GUI thread")
    if _collector is None:
        _collector = _Collector()
        gc.disable()
        _collector.timer.start()
    _collector.users += 1
    return Hold()


def active() -> bool:
    """True while some window holds collection on the GUI thread."""
    return _collector is not None
