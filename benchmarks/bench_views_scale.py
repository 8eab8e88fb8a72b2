"""The Run page's views from 64 to 1,024 workers (8 workers and 8 GPUs a host), a frame at a time,
each against its baseline in the same run. Offscreen Qt, median of FRAMES frames; a frame is what
the window does on its frame timer: the new figures in, then a render (``grab()``) of what the
view shows in its scroll area.

- overview: a status a frame (one role's state moves) -> ``ClusterOverview.set_roles`` + render.
  Baseline: a tile per role at every size (``host_tiles_from`` out of reach), as before.
- roles table: ``RolesView.show_status`` of every role + render (a model/view table).
- GPUs: a sample from every host -> ``GpuPanel.add_samples`` + ``refresh`` + render. Baseline:
  the tile per GPU grid at every size (``hosts_from``/``gpus_from`` out of reach), with a box per
  host and each host's CPU card made as it was.
- Training: a point per worker in loss and step time -> the spread plots and the heat map
  (``refresh_from``) + render, after a day of steps (STEPS, default 86,400). Baseline: the views
  worked out from scratch each frame with a heat-map row per worker, as before.
- GPUs at 8,192 (1,024 hosts of 8), as the GPUs row.

Run from the repo root: ``python benchmarks/bench_views_scale.py`` (SIZES, FRAMES, STEPS may be set
in the environment, e.g. ``SIZES=1024``). Figures: docs/benchmarks.md.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
from PySide6 import QtWidgets

from core.run.status import ClusterPhase, ClusterStatus, RoleState, RoleStatus
from core.telemetry.step_window import StepSums
from core.views.rates import status_rates
from core.views.spread import BinnedWorkers, slowest
from gui.run.overview import ClusterOverview
from gui.run.roles import RolesView
from gui.run.tabs.gpus import GpuPanel
from gui.run.tabs.spread import SpreadPlot, StepTimeHeatmap, refresh_from
from tests.helpers.statuses import hosted_status

SIZES = [int(s) for s in os.environ.get("SIZES", "64,128,256,512,1024").split(",")]
FRAMES = int(os.environ.get("FRAMES", "5"))
STEPS = int(os.environ.get("STEPS", "86400"))
SIZE = (1900, 1000)
GIB = 1 << 30
FAR = 10**9
CARD_FRAMES = 300  # frames let make cards before timing; the baseline at 1,024 hosts is still making them


def timed(frame: Callable[[int], None]) -> float:
    frame(-1)  # a first frame lays out and builds what the next ones reuse
    times = []
    for f in range(FRAMES):
        t0 = time.perf_counter()
        frame(f)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def statuses(workers: int) -> list[RoleStatus]:
    hosts = max(1, workers // 8)
    roles = [hosted_status("ps:0", "node-1")]
    for i in range(workers):
        roles.append(
            hosted_status(
                f"worker:{i}",
                f"node-{i % hosts + 1}",
                window=StepSums(timed=10, timed_s=10 / (10.0 + i / 100), last_t=100.0),
                gpus=(i // hosts % 8,),
                gpu_utilization_percent=50.0,
            )
        )
    return roles


def in_scroll(widget: QtWidgets.QWidget) -> QtWidgets.QScrollArea:
    scroll = QtWidgets.QScrollArea()
    scroll.setWidgetResizable(True)
    scroll.setWidget(widget)
    scroll.resize(SIZE[0], 450)
    scroll.show()
    return scroll


def overview(workers: int, *, baseline: bool) -> float:
    view = ClusterOverview()
    if baseline:
        view.host_tiles_from = FAR
    scroll = in_scroll(view)
    roles = statuses(workers)

    def frame(f: int) -> None:
        moved = list(roles)
        k = 1 + (f + 1) % workers
        moved[k] = dataclasses.replace(moved[k], state=RoleState.BACKOFF)
        view.set_roles(moved, status_rates(moved, None))
        scroll.grab()

    result = timed(frame)
    scroll.close()
    return result


def roles_table(workers: int) -> float:
    view = RolesView(lambda _role, _n: [])
    view.resize(SIZE[0], 450)
    view.show()
    roles = statuses(workers)

    def frame(f: int) -> None:
        moved = list(roles)
        k = 1 + (f + 1) % workers
        moved[k] = dataclasses.replace(moved[k], state=RoleState.BACKOFF)
        view.show_status(ClusterStatus(ClusterPhase.RUNNING, None, "", tuple(moved)), {}, status_rates(moved, None))
        view.grab()

    result = timed(frame)
    view.close()
    return result


def gpu_sample(h: int, t: float) -> dict:
    return {
        "host": f"node-{h}",
        "t": t,
        "figures": {"cpu_percent": 20.0, "memory_used_bytes": 100 * GIB, "memory_total_bytes": 512 * GIB},
        "gpus": [
            {
                "index": i,
                "name": "NVIDIA H100 80GB HBM3",
                "utilization_gpu_percent": (t * 7 + i * 11 + h) % 100,
                "memory_used_bytes": (40 + i) * GIB,
                "memory_total_bytes": 80 * GIB,
                "temperature_c": 55.0 + i,
                "power_w": 300.0,
                "power_limit_w": 700.0,
                "processes": [{"pid": 1000 + i, "used_memory_bytes": GIB, "role": f"worker:{(h - 1) * 8 + i}"}],
            }
            for i in range(8)
        ],
    }


def gpus(hosts: int, *, baseline: bool) -> float:
    panel = GpuPanel()
    if baseline:
        panel.figures.hosts_from = panel.figures.gpus_from = FAR
    panel.resize(*SIZE)
    panel.show()
    for t in range(3):
        panel.add_samples([gpu_sample(h, float(t)) for h in range(1, hosts + 1)])
    made = 0
    while panel.pending_cards() and made < CARD_FRAMES:  # the first frames make the cards, one a frame
        panel.refresh()
        made += 1

    def frame(f: int) -> None:
        panel.add_samples([gpu_sample(h, float(10 + f)) for h in range(1, hosts + 1)])
        panel.refresh()
        panel.grab()

    result = timed(frame)
    panel.close()
    return result


def training(workers: int, *, baseline: bool) -> float:
    view = QtWidgets.QWidget()
    layout = QtWidgets.QVBoxLayout(view)
    loss_plot, time_plot, heat = SpreadPlot("Loss by step", "loss"), SpreadPlot("Step time", "s"), StepTimeHeatmap()
    for widget in (loss_plot, time_plot, heat):
        layout.addWidget(widget)
    view.resize(1400, 800)
    view.show()
    losses, times = BinnedWorkers(origin=0.0), BinnedWorkers(origin=0.0)
    x = np.arange(STEPS, dtype=float)
    loss_values = 2.0 * np.exp(-x / (STEPS / 5)) + 0.1
    time_values = 0.1 + 0.01 * np.sin(x / 300) ** 2
    for w in range(workers):
        losses.add_many(f"worker:{w}", x, loss_values)
        times.add_many(f"worker:{w}", x, time_values * (1 + 0.01 * w))
    width = max(200, loss_plot.plot.width())

    def frame(f: int) -> None:
        latest = {}
        for w in range(workers):
            role = f"worker:{w}"
            losses.add(role, float(STEPS + f + 1), 0.1)
            times.add(role, float(STEPS + f + 1), 0.1 * (1 + 0.01 * w))
            latest[role] = 0.1 * (1 + 0.01 * w)
        if baseline:  # as before: every column from scratch, a heat-map row per worker
            losses._view = times._view = None
            refresh_from(losses, loss_plot, None, columns=width)
            top = slowest(latest, k=3, factor=1.0)
            refresh_from(times, time_plot, None, columns=width, highlight={role: "" for role in top})
            heat.set_heatmap(times.heatmap(max_columns=width))
        else:
            refresh_from(losses, loss_plot, None, columns=width)
            top = slowest(latest, k=3, factor=1.0)
            refresh_from(times, time_plot, heat, columns=width, highlight={role: "" for role in top})
        view.grab()

    result = timed(frame)
    view.close()
    return result


def main() -> int:
    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication(sys.argv[:1])
    assert app is not None
    rows: list[tuple[str, list[str]]] = []
    for workers in SIZES:
        hosts = max(1, workers // 8)
        figures = {
            "overview, baseline": overview(workers, baseline=True),
            "overview": overview(workers, baseline=False),
            "roles table": roles_table(workers),
            "GPUs, baseline": gpus(hosts, baseline=True),
            "GPUs": gpus(hosts, baseline=False),
            "Training, baseline": training(workers, baseline=True),
            "Training": training(workers, baseline=False),
        }
        rows.append((f"{workers} workers, {hosts} hosts, {hosts * 8} GPUs", [f"{v:.1f}" for v in figures.values()]))
        print(rows[-1][0], {k: round(v, 1) for k, v in figures.items()}, flush=True)
    names = list(figures)
    print(f"\nframe in ms (median of {FRAMES}; offscreen; {STEPS:,} steps a worker):")
    print("| size | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for label, values in rows:
        print(f"| {label} | " + " | ".join(values) + " |")
    if os.environ.get("GPUS_8192", "1") == "1":
        base, new = gpus(1024, baseline=True), gpus(1024, baseline=False)
        print(f"\nGPUs at 8,192 GPUs on 1,024 hosts: baseline {base:.1f} ms, host tiles {new:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
