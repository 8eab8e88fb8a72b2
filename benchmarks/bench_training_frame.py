"""One frame of the Training tab with a long run: 4 workers x 1,000,000 steps each.

TowerDeck keeps each curve in a bounded Series and draws at most 2000 points per curve (plus EMA
smoothing of what is drawn). The baseline is the common approach, in the same panel: keep every point in
NumPy arrays and hand them all to pyqtgraph each frame (with its own peak downsampling and
clip-to-view, as its scrollingPlots example recommends), without smoothing. A frame = one new point per worker, update the curves, render the widget (grab()).
Offscreen Qt. Also reports the memory each approach holds for the data.
Run from the repo root: `python benchmarks/bench_training_frame.py`.
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import pyqtgraph as pg
from PySide6 import QtWidgets

from core.views.series import Series
from core.views.training import SERIES_CAPACITY
from gui.run.tabs.training import TrainingPanel

WORKERS = 4
STEPS = 1_000_000
FRAMES = 10


def losses(worker: int) -> np.ndarray:
    steps = np.arange(STEPS, dtype=float)
    return 2.0 * np.exp(-steps / 200_000) + 0.05 * np.sin(steps / 50 + worker) + 0.1


def towerdeck_frames(app: QtWidgets.QApplication) -> tuple[list[float], int]:
    panel = TrainingPanel()
    panel.resize(1200, 700)
    panel.show()
    for w in range(WORKERS):
        role = f"worker:{w}"
        panel._ensure_worker(role)
        series = panel.figures.loss[role] = Series(capacity=SERIES_CAPACITY)
        for step, value in enumerate(losses(w).tolist()):
            series.append(float(step), value)
    times = []
    for frame in range(FRAMES):
        for w in range(WORKERS):  # a new point for every worker: every curve is recomputed
            panel.figures.loss[f"worker:{w}"].append(float(STEPS + frame), 0.1)
        panel._dirty = True
        t0 = time.perf_counter()
        panel.refresh(force=True)
        panel.grab()
        times.append(time.perf_counter() - t0)
    held = sum(s.memory_bytes() for s in panel.figures.loss.values())
    panel.close()
    return times, held


def naive_frames(app: QtWidgets.QApplication) -> tuple[list[float], int]:
    """The same panel and curves, fed every point from NumPy arrays each frame (no smoothing)."""
    panel = TrainingPanel()
    panel.resize(1200, 700)
    panel.show()
    data = [
        (np.arange(STEPS + FRAMES, dtype=float), np.concatenate([losses(w), np.full(FRAMES, 0.1)]))
        for w in range(WORKERS)
    ]
    curves = [panel._loss_curves(f"worker:{w}", pg.intColor(w))[1] for w in range(WORKERS)]
    times = []
    for frame in range(FRAMES):
        n = STEPS + frame + 1  # the same new point per worker per frame
        t0 = time.perf_counter()
        for curve, (x, y) in zip(curves, data, strict=True):
            curve.setData(x[:n], y[:n])
        panel.grab()
        times.append(time.perf_counter() - t0)
    held = sum(x.nbytes + y.nbytes for x, y in data)
    panel.close()
    return times, held


def main() -> int:
    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication(sys.argv[:1])
    assert isinstance(app, QtWidgets.QApplication)
    ours, ours_bytes = towerdeck_frames(app)
    base, base_bytes = naive_frames(app)
    ours_ms, base_ms = statistics.median(ours) * 1000, statistics.median(base) * 1000
    print(f"training frame, {WORKERS} workers x {STEPS:,} steps (median of {FRAMES} frames, update + render):")
    print(
        f"  towerdeck (bounded Series, <=8192 points/curve, EMA): {ours_ms:8.1f} ms   data held {ours_bytes / 2**20:6.1f} MiB"
    )
    print(
        f"  baseline  (same panel, every point, no smoothing):     {base_ms:8.1f} ms   data held {base_bytes / 2**20:6.1f} MiB"
    )
    print(f"  speed-up {base_ms / ours_ms:.1f}x; frame budget at 10 Hz is 100 ms")
    return 0 if math.isfinite(ours_ms) else 1


if __name__ == "__main__":
    sys.exit(main())
