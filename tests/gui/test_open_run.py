"""A long finished run reopens whole and fast: every worker's curve from its first step to its last
and every GPU's history to its last second, while the event loop keeps turning (a generated run:
tests/helpers/past_run.py, big enough that its files are skimmed, see core/run/skim.py)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from PySide6 import QtCore

from tests.helpers.past_run import START_T, generate_run

pytestmark = pytest.mark.slow

WORKERS, SECONDS, HOSTS = 4, 20_000, 2  # 2.4 MB of metrics a worker, 40 MB of samples a host


# Both formats: a run written before the compact encoding, and one written as today's runs are
# (key frames and deltas: a skim starting mid-file must find a key frame before it shows a point).
@pytest.mark.parametrize("compact", [False, True], ids=["plain", "compact"])
def test_a_long_past_run_shows_its_whole_span_and_the_window_keeps_turning(qtbot, tmp_path: Path, compact: bool):
    from gui.window.main_window import MainWindow

    run = generate_run(tmp_path / "run", workers=WORKERS, seconds=SECONDS, hosts=HOSTS, compact=compact)
    window = MainWindow(None, runs_root=tmp_path / "runs")
    qtbot.addWidget(window)
    window.answer_close_question("leave")
    window.show()
    longest = [0.0]
    last = [time.perf_counter()]

    def tick() -> None:
        now = time.perf_counter()
        longest[0] = max(longest[0], now - last[0])
        last[0] = now

    probe = QtCore.QTimer()
    probe.setInterval(10)
    probe.timeout.connect(tick)
    probe.start()
    workers = [f"worker:{w}" for w in range(WORKERS)]
    gpus = [(f"gpu-{h}", i) for h in range(HOSTS) for i in range(8)]

    def full() -> bool:
        loss = [window.training.figures.loss.get(w) for w in workers]
        history = [window.gpus.figures.history.get(g) for g in gpus]
        return (
            all(s is not None and s.last() is not None and s.last()[0] == SECONDS for s in loss)
            and all(
                h is not None and h[0].last() is not None and h[0].last()[0] == START_T + SECONDS - 1 for h in history
            )
            and window.binding.inbox.pending() == 0
        )

    try:
        last[0] = time.perf_counter()
        assert window.open_run(run)
        qtbot.waitUntil(full, timeout=60_000)
    finally:
        probe.stop()
    for worker in workers:
        points = window.training.figures.loss[worker].points()
        assert points[0][0] <= SECONDS / 100, (worker, points[0])  # from the first steps, not the tail
        steps = points[0]  # (t, mean, min, max) lists: the steps are the first
        assert len(steps) > 100 and steps == sorted(steps), (worker, steps[:5])
    for key in gpus:
        first_t = window.gpus.figures.history[key][0].points()[0][0]
        assert first_t - START_T <= SECONDS / 100, key
    assert len(window.gpus.grid.board) == len(gpus)
    # Generous: a loaded 2-core machine; loading in one go stalled the window for seconds.
    assert longest[0] < 3.0, f"the event loop stalled {longest[0]:.1f} s while the run loaded"
