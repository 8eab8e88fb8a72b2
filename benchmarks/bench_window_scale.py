"""The window at scale, one frame at a time: 32 workers x STEPS steps (default 1,000,000) of loss and
step time, and 64 GPUs (8 hosts x 8) x 24 h of 1 Hz samples. A frame = a new point on every series,
then update + render (grab()) of the tab on screen. Offscreen Qt, median of FRAMES frames.

Baseline, in the same run: the current panels at that size. Training: TrainingPanel drawing every
worker's loss and step-time curve (bounded Series, EMA). GPUs: GpuPanel with one card (a plot) per
GPU, all 64 laid out in its scroll area.

TowerDeck at scale: Training = SpreadPlot for loss and step time (median, 10-90 % and min-max
bands from BinnedWorkers) + the 3 slowest workers on top (their BinnedWorkers rows) + the
step-time heat map; GPUs = GpuPanel past 8 GPUs: its GpuGrid (a tile per GPU with sparklines) + the selected GPU's
full card.

History is built once per kind and copied to every worker/GPU (appending 64 M points one by one
would take minutes here and changes nothing a frame costs: a Series holds a bounded number of
points once past its capacity). Run from the repo root: `python benchmarks/bench_window_scale.py`
(STEPS, FRAMES and WORKERS may be set in the environment).
"""

from __future__ import annotations

import copy
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
from gpu_samples import gpu_sample
from PySide6 import QtWidgets

from core.views.series import Series
from core.views.spread import BinnedWorkers, slowest
from gui.run.tabs.gpus import GpuPanel
from gui.run.tabs.spread import SpreadPlot, StepTimeHeatmap, refresh_from
from gui.run.tabs.training import TrainingPanel

WORKERS = int(os.environ.get("WORKERS", "32"))
STEPS = int(os.environ.get("STEPS", "1000000"))
FRAMES = int(os.environ.get("FRAMES", "10"))
HOSTS, GPUS_PER_HOST = 8, 8
DAY_S = 24 * 3600
SIZE = (1400, 800)


def filled(values: np.ndarray, capacity: int) -> Series:
    series = Series(capacity=capacity)
    for x, v in enumerate(values.tolist()):
        series.append(float(x), v)
    return series


def loss_curve(steps: int) -> np.ndarray:
    x = np.arange(steps, dtype=float)
    return 2.0 * np.exp(-x / (steps / 5)) + 0.05 * np.sin(x / 50) + 0.1


def step_time_curve(steps: int) -> np.ndarray:
    x = np.arange(steps, dtype=float)
    return 0.1 + 0.01 * np.sin(x / 300) ** 2


def timed(frames: int, frame: Callable[[int], None]) -> list[float]:
    times = []
    for f in range(frames):
        t0 = time.perf_counter()
        frame(f)
        times.append(time.perf_counter() - t0)
    return times


def training_baseline(loss: Series, step_time: Series) -> list[float]:
    panel = TrainingPanel()
    panel.spread_from = 10**9  # the panel as it was: a line per worker
    panel.resize(*SIZE)
    panel.show()
    for w in range(WORKERS):
        role = f"worker:{w}"
        panel._ensure_worker(role)
        panel.figures.loss[role] = copy.deepcopy(loss)
        panel.figures.step_time[role] = copy.deepcopy(step_time)

    def frame(f: int) -> None:
        for w in range(WORKERS):
            panel.figures.loss[f"worker:{w}"].append(float(STEPS + f), 0.1)
            panel.figures.step_time[f"worker:{w}"].append(float(STEPS + f), 0.1)
        panel._dirty = True
        panel.refresh(force=True)
        panel.grab()

    times = timed(FRAMES, frame)
    panel.close()
    return times


def training_at_scale(loss: Series, step_time: Series) -> list[float]:
    view = QtWidgets.QWidget()
    layout = QtWidgets.QVBoxLayout(view)
    loss_plot, time_plot, heat = SpreadPlot("Loss by step", "loss"), SpreadPlot("Step time", "s"), StepTimeHeatmap()
    for widget in (loss_plot, time_plot, heat):
        layout.addWidget(widget)
    view.resize(*SIZE)
    view.show()
    losses, times = BinnedWorkers(origin=0.0), BinnedWorkers(origin=0.0)
    x = np.arange(STEPS, dtype=float)
    loss_values, time_values = loss_curve(STEPS), step_time_curve(STEPS)
    for w in range(WORKERS):
        losses.add_many(f"worker:{w}", x, loss_values)
        times.add_many(f"worker:{w}", x, time_values * (1 + 0.01 * w))
    width = max(200, loss_plot.plot.width())

    def frame(f: int) -> None:
        latest = {}
        for w in range(WORKERS):
            role = f"worker:{w}"
            losses.add(role, float(STEPS + f), 0.1)
            times.add(role, float(STEPS + f), 0.1 * (1 + 0.01 * w))
            latest[role] = 0.1 * (1 + 0.01 * w)
        refresh_from(losses, loss_plot, None, columns=width)
        top = slowest(latest, k=3, factor=1.0)
        refresh_from(times, time_plot, heat, columns=width, highlight={role: "" for role in top})
        view.grab()

    result = timed(FRAMES, frame)
    view.close()
    return result


def gpus_baseline(template: Series) -> list[float]:
    panel = GpuPanel()
    panel.figures.grid_from = 10**9  # the panel as it was: a plotted card for every GPU
    panel.resize(*SIZE)
    panel.show()
    for h in range(HOSTS):
        panel.add_sample(gpu_sample(f"127.0.0.{h + 1}", float(DAY_S)))
    for card in panel.cards.values():
        card.first, card.second = copy.deepcopy(template), copy.deepcopy(template)

    def frame(f: int) -> None:
        for h in range(HOSTS):
            panel.add_sample(gpu_sample(f"127.0.0.{h + 1}", float(DAY_S + f + 1)))
        panel.refresh()
        panel.grab()

    times = timed(FRAMES, frame)
    panel.close()
    return times


def gpus_at_scale(template: Series) -> list[float]:
    panel = GpuPanel()  # past 8 GPUs: the tile grid and the selected GPU's full card
    panel.resize(*SIZE)
    panel.show()
    for t in range(DAY_S - 120, DAY_S):
        for h in range(HOSTS):
            panel.add_sample(gpu_sample(f"127.0.0.{h + 1}", float(t)))
    history = panel.figures.history
    for key in history:
        history[key] = (copy.deepcopy(template), copy.deepcopy(template))
    for key, card in panel.cards.items():
        if key in history:
            card.first, card.second = history[key]
    panel.refresh()

    def frame(f: int) -> None:
        for h in range(HOSTS):
            panel.add_sample(gpu_sample(f"127.0.0.{h + 1}", float(DAY_S + f + 1)))
        panel.refresh()
        panel.grab()

    times = timed(FRAMES, frame)
    panel.close()
    return times


def main() -> int:
    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication(sys.argv[:1])
    assert app is not None
    t0 = time.perf_counter()
    loss, step_time = filled(loss_curve(STEPS), 4096), filled(step_time_curve(STEPS), 4096)
    gpu_template = filled(50 + 40 * np.sin(np.arange(DAY_S) / 60), 2048)
    print(f"(history built in {time.perf_counter() - t0:.0f} s)")
    results = {
        "training, baseline (a curve per worker)": training_baseline(loss, step_time),
        "training, at scale (spread + 3 slowest + heat map)": training_at_scale(loss, step_time),
        "GPUs, baseline (a plotted card per GPU)": gpus_baseline(gpu_template),
        "GPUs, at scale (tile grid + 1 full card)": gpus_at_scale(gpu_template),
    }
    print(
        f"window frame at scale: {WORKERS} workers x {STEPS:,} steps; {HOSTS * GPUS_PER_HOST} GPUs x 24 h of 1 Hz samples "
        f"(median of {FRAMES} frames, new point on every series + update + render, {SIZE[0]}x{SIZE[1]}):"
    )
    for name, times in results.items():
        print(f"  {name:<52} {statistics.median(times) * 1000:8.1f} ms  (max {max(times) * 1000:.1f})")
    print("  budget: 30 ms a frame")
    return 0 if all(math.isfinite(statistics.median(t)) for t in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
