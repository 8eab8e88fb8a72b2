"""Every view at 60 Hz: a frame of each tab, from 3 roles to 64 workers x 1M steps and 64 GPUs x 24 h.

A frame = new data through the panel's own input (``add_samples`` for a worker's metrics,
``add_sample`` for a host's GPUs), then the panel's ``refresh`` and one turn of the event loop,
which paints what changed into the window's backing store as on screen (offscreen Qt; ``grab()``
would paint a second time), timed together: wall time (median and 95th percentile over
``FRAMES`` frames, default 40), the GUI thread's own CPU time (steadier on a shared machine) and
the plots painted per frame. Pan/zoom: on the Training tab with 4 workers, each frame moves or
narrows the step axis (``setXRange``, what a drag or a wheel turn does) and paints, no new data.
Budget: 10 ms median, 16 ms p95 (60 Hz).

Baseline, in the same run: the panels as they were at commit ``BASELINE`` (``git archive`` into a
temporary folder). Each variant runs in its own process (``--child ROOT``) with the same inputs.
Offscreen Qt, 1400x800. Run from the repo root: ``python benchmarks/bench_frames.py``.
"""

from __future__ import annotations

import copy
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BASELINE = "d3e24cd"
FRAMES = int(os.environ.get("FRAMES", "40"))
STEPS = 1_000_000
DAY_S = 24 * 3600
SIZE = (1400, 800)
BUDGET_MEDIAN_MS, BUDGET_P95_MS = 10.0, 16.0
HERE = Path(__file__).resolve().parent


def child(root: Path) -> dict[str, Any]:
    """Every scenario with the panels under ``root``: frame times in seconds."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    sys.path.insert(0, str(root))
    import numpy as np
    import pyqtgraph as pg
    from gpu_samples import gpu_sample
    from PySide6 import QtCore, QtWidgets

    try:
        from core.telemetry.worker_stats import WorkerStats
        from core.views.series import Series
        from core.views.spread import BinnedWorkers
        from gui.run.gpu_grid import GpuGrid
        from gui.run.tabs.gpus import GpuPanel
        from gui.run.tabs.training import TrainingPanel
    except ImportError:  # the baseline, from before core/ and gui/ were split into packages
        from core.telemetry.series import Series
        from core.telemetry.spread import BinnedWorkers
        from gui.gpu_grid import GpuGrid
        from gui.panels.gpus import GpuPanel
        from gui.panels.training import TrainingPanel

        from core.telemetry.metrics import WorkerStats

    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication(sys.argv[:1])
    assert app is not None

    def filled(values: Any, capacity: int) -> Series:
        series = Series(capacity=capacity)
        for x, v in enumerate(values.tolist()):
            series.append(float(x), v)
        return series

    steps = np.arange(STEPS, dtype=float)
    loss_values = 2.0 * np.exp(-steps / 200_000) + 0.05 * np.sin(steps / 50) + 0.1
    time_values = 100 + 10 * np.sin(steps / 300) ** 2
    loss_template, time_template = filled(loss_values, 4096), filled(time_values, 4096)
    gpu_template = filled(50 + 40 * np.sin(np.arange(DAY_S) / 60), 2048)

    class PaintCounter(QtCore.QObject):
        """Counts the plots painted (pyqtgraph views and the GPU grid), to show frames are drawn."""

        def __init__(self) -> None:
            super().__init__()
            self.paints = 0

        def eventFilter(self, watched: QtCore.QObject, event: QtCore.QEvent) -> bool:
            if event.type() == QtCore.QEvent.Type.Paint and (
                isinstance(watched, GpuGrid) or isinstance(watched.parent(), pg.GraphicsView)  # its viewport
            ):
                self.paints += 1
            return False

    counter = PaintCounter()
    app.installEventFilter(counter)
    paints: dict[str, float] = {}
    cpu_times: dict[str, list[float]] = {}  # the GUI thread's own CPU time: less noisy on a shared machine

    def timed(frame: Callable[[int], None], built: Callable[[], bool] | None = None) -> list[float]:
        """Frame times: the update, then the event loop's turn, which paints what changed into
        the window's backing store as it does on screen (not ``grab()``, which paints again).
        Frames outside the figures first: lazy layouts, first paints, and until ``built()`` says
        the view has made all its widgets (the GPUs tab makes two cards a frame, so that a host's
        first sample does not stall the window; those frames are a view being built, once, not
        its steady pace)."""
        for _ in range(50):
            frame(-1)  # the same sample time each time: no step back, no new segment
            app.processEvents()
            if built is None or built():
                break
        times, cpu = [], []
        counter.paints = 0
        for f in range(FRAMES):
            t0, c0 = time.perf_counter(), time.thread_time()
            frame(f)
            app.processEvents()
            times.append(time.perf_counter() - t0)
            cpu.append(time.thread_time() - c0)
        paints[str(len(paints))] = counter.paints / FRAMES
        cpu_times[str(len(cpu_times))] = cpu
        return times

    def training(workers: int) -> TrainingPanel:
        panel = TrainingPanel()
        panel.resize(*SIZE)
        panel.show()
        figures = getattr(panel, "figures", panel)  # the baseline's panel kept its figures itself
        for w in range(workers):
            role = f"worker:{w}"
            panel.add_samples(role, [sample(0, 1.0)])  # curves, stats and the worker's tick as a run makes them
            figures.loss[role] = copy.deepcopy(loss_template)
            figures.step_time[role] = copy.deepcopy(time_template)
            stats = figures.stats[role] = WorkerStats()
            stats.step_time_s = 0.1 * (1 + 0.01 * w)
        if workers > panel.spread_from:
            figures.loss_bins, figures.time_bins = BinnedWorkers(origin=0.0), BinnedWorkers(origin=0.0)
            for w in range(workers):
                figures.loss_bins.add_many(f"worker:{w}", steps, loss_values)
                figures.time_bins.add_many(f"worker:{w}", steps, time_values * (1 + 0.01 * w))
        panel._dirty = True
        panel.refresh(force=True)
        return panel

    def sample(step: int, loss: float) -> dict[str, object]:
        return {
            "t": step * 0.1,
            "step": step,
            "loss": loss,
            "step_time_s": 0.1,
            "steps_per_sec": 10.0,
            "extra": {},
            "source": "bench",
        }

    def training_frames(workers: int) -> list[float]:
        panel = training(workers)

        def frame(f: int) -> None:
            step = STEPS + f + 1
            for w in range(workers):
                panel.add_samples(f"worker:{w}", [sample(step, 0.1 + 0.001 * w)])
            panel.refresh(force=True)

        times = timed(frame)
        panel.close()
        return times

    def pan_zoom_frames() -> list[float]:
        panel = training(4)
        view = panel.loss_plot.getViewBox()

        def frame(f: int) -> None:
            if f % 2:  # pan: a tenth of the run, moving right
                start = (f % 10) * STEPS / 10
                view.setXRange(start, start + STEPS / 10, padding=0)
            else:  # zoom: from the whole run to its last 1000 steps
                width = STEPS / (1.5 ** (f % 20))
                view.setXRange(STEPS - width, STEPS, padding=0)

        times = timed(frame)
        panel.close()
        return times

    def gpu_frames(hosts: int, gpus: int) -> list[float]:
        panel = GpuPanel()
        panel.resize(*SIZE)
        panel.show()
        names = [f"127.0.0.{h + 1}" for h in range(hosts)]
        for t in range(DAY_S - 120, DAY_S):
            for host in names:
                panel.add_sample(gpu_sample(host, float(t), gpus))
        history = getattr(panel, "figures", panel).history  # the baseline's panel kept it itself
        for key in history:
            history[key] = (copy.deepcopy(gpu_template), copy.deepcopy(gpu_template))
        for key, card in panel.cards.items():
            if key in history:
                card.first, card.second = history[key]
        panel._dirty = True
        panel.refresh()

        def frame(f: int) -> None:
            for host in names:  # each host's agent sends a sample a second: one per frame here
                panel.add_sample(gpu_sample(host, float(DAY_S + f + 2), gpus))
            panel.refresh()

        pending = getattr(panel, "pending_cards", None)  # the baseline's panel made every card at once
        times = timed(frame, built=None if pending is None else lambda: not pending())
        panel.close()
        return times

    results = {
        "Training, 2 workers x 1M steps (3 roles)": training_frames(2),
        "Training, 4 workers x 1M steps": training_frames(4),
        "Training, 64 workers x 1M steps (spread)": training_frames(64),
        "Training, pan/zoom, 4 workers x 1M steps": pan_zoom_frames(),
        "GPUs, 1 host x 8 GPUs x 24 h (cards)": gpu_frames(1, 8),
        "GPUs, 8 hosts x 8 GPUs x 24 h (grid)": gpu_frames(8, 8),
    }
    return {
        "times": results,
        "cpu": dict(zip(results, cpu_times.values(), strict=True)),
        "paints": dict(zip(results, paints.values(), strict=True)),
    }


def run_variant(root: Path) -> dict[str, Any] | None:
    out = subprocess.run(
        [sys.executable, str(HERE / "bench_frames.py"), "--child", str(root)],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        print(f"{root}: failed (exit {out.returncode}): {(out.stderr or out.stdout).strip()[-600:]}")
        return None
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def p95(times: list[float]) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        print(json.dumps(child(Path(sys.argv[2]))))
        return 0
    print(f"frames: {FRAMES} a view, {SIZE[0]}x{SIZE[1]} offscreen; load average {os.getloadavg()[0]:.1f} at start")
    with tempfile.TemporaryDirectory(prefix="bench-frames-") as tmp:
        from baseline import unpack

        base_root = unpack(BASELINE, Path(tmp))
        ours = run_variant(HERE.parent)
        base = run_variant(base_root) if base_root else None
    if ours is None:
        return 1
    over = []
    print(f"{'view':<42} {'this code: median / p95':>24} {BASELINE + ' (before): median / p95':>30} {'ratio':>6}")
    for name, times in ours["times"].items():
        med, tail = statistics.median(times) * 1000, p95(times) * 1000
        row = f"{name:<42} {med:12.1f} / {tail:5.1f} ms"
        if base and name in base["times"]:
            b_med, b_tail = statistics.median(base["times"][name]) * 1000, p95(base["times"][name]) * 1000
            row += f" {b_med:19.1f} / {b_tail:5.1f} ms {b_med / med:5.1f}x"
        paints = ours["paints"][name], (base or {}).get("paints", {}).get(name, math.nan)
        cpu = statistics.median(ours["cpu"][name]) * 1000
        cpu_before = statistics.median(base["cpu"][name]) * 1000 if base and name in base["cpu"] else math.nan
        print(
            row + f"   GUI thread CPU {cpu:.1f} ms ({cpu_before:.1f} before);"
            f" plots painted a frame {paints[0]:.1f} ({paints[1]:.1f} before)"
        )
        if med > BUDGET_MEDIAN_MS or tail > BUDGET_P95_MS:
            over.append(name)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    print(
        f"budget {BUDGET_MEDIAN_MS:g} ms median, {BUDGET_P95_MS:g} ms p95: "
        + ("met" if not over else f"over in {over}")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
