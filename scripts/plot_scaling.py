"""Draws benchmarks/bench_sim_scale.py's figures against the number of workers, a PNG per cost.

Usage: python scripts/plot_scaling.py RESULTS.jsonl [MORE.jsonl ...] --out docs/ [--prefix sim-scale]

Reads the ``{"bench": "sim_scale", ...}`` lines (other lines are skipped), and for each cost draws
this checkout's figure at each size as a line, and the baseline's (where it ran) as separate
points, the worker axis in powers of two (64 ... 1,024). Where a size ran more than once the last
line counts. Offscreen pyqtgraph (no matplotlib here); every PNG is 1200x700.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

SIZE = (1200, 700)
Getter = Callable[[dict[str, Any]], float | None]


def _get(*keys: str) -> Getter:
    def get(record: dict[str, Any]) -> float | None:
        value: Any = record
        for key in keys:
            if not isinstance(value, dict) or key not in value:
                return None
            value = value[key]
        return float(value) if isinstance(value, int | float) else None

    return get


def _worst_view(field: str) -> Getter:
    def get(record: dict[str, Any]) -> float | None:
        views = (record.get("window") or {}).get("views") or {}
        values = [v[field] for v in views.values() if field in v]
        return float(max(values)) if values else None

    return get


def _view(tab: str, field: str) -> Getter:
    return _get("window", "views", tab, field)


# Each chart: file stem, title, unit, [(series name, getter)], goal line (or None).
CHARTS: list[tuple[str, str, str, list[tuple[str, Getter]], float | None]] = [
    (
        "controller-cpu",
        "Controller CPU (launch process and its links) while following the run",
        "% of a core",
        [
            ("controller", _get("cli", "controller_percent")),
            ("its main process", _get("cli", "controller_main_percent")),
        ],
        25.0,
    ),
    (
        "simulator-cpu",
        "The simulating agents' CPU (the harness's cost, not TowerDeck's)",
        "% of a core",
        [("all agents", _get("cli", "simulator_agents_percent"))],
        None,
    ),
    (
        "disk",
        "Bytes written per worker-hour",
        "kB per worker-hour",
        [
            ("journal", lambda r: _kb(_get("cli", "bytes_per_worker_hour", "journal")(r))),
            ("metrics", lambda r: _kb(_get("cli", "bytes_per_worker_hour", "metrics")(r))),
            ("samples", lambda r: _kb(_get("cli", "bytes_per_worker_hour", "samples")(r))),
            ("derived, all", lambda r: _kb(_get("cli", "disk_bytes_per_worker_hour")(r))),
            ("roles' logs", lambda r: _kb(_get("cli", "bytes_per_worker_hour", "logs")(r))),
        ],
        1000.0,
    ),
    (
        "frame-p95",
        "The window's frame time, p95, each view on screen",
        "ms",
        [(tab, _view(tab, "frame_p95_ms")) for tab in ("Training", "GPUs", "Placement", "Logs")],
        16.0,
    ),
    (
        "event-loop-gap",
        "The window's longest event-loop gap, each view on screen",
        "ms",
        [(tab, _view(tab, "longest_gap_ms")) for tab in ("Training", "GPUs", "Placement", "Logs")],
        200.0,
    ),
    (
        "launch",
        "Launch to every role running",
        "s",
        [("CLI", _get("cli", "launch_to_all_running_s")), ("window", _get("window", "launch_to_all_running_s"))],
        None,
    ),
]


def _kb(value: float | None) -> float | None:
    return None if value is None else value / 1000


def load(paths: list[Path]) -> list[dict[str, Any]]:
    records: dict[tuple[str, int], dict[str, Any]] = {}
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.startswith("{"):
                continue
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if record.get("bench") == "sim_scale" and "workers" in record:
                records[(str(record.get("variant")), int(record["workers"]))] = record
    return list(records.values())


COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#ff7f0e"]


def chart(records: list[dict[str, Any]], title: str, unit: str, series: list[tuple[str, Getter]], goal: float | None):
    widget = pg.PlotWidget(background="w")
    widget.resize(*SIZE)
    item = widget.getPlotItem()
    item.setTitle(title, color="#222", size="13pt")
    item.setLabel("bottom", "workers (simulated)", color="#222")
    item.setLabel("left", unit, color="#222")
    item.showGrid(x=True, y=True, alpha=0.25)
    item.setLogMode(x=True, y=False)
    legend = item.addLegend(offset=(10, 10), labelTextColor="#222", brush=pg.mkBrush(255, 255, 255, 220))
    legend.setParentItem(item.vb)
    sizes = sorted({int(r["workers"]) for r in records})
    item.getAxis("bottom").setTicks([[(math.log10(s), f"{s:,}") for s in sizes]])
    for axis in ("bottom", "left"):
        item.getAxis(axis).setPen("#444")
        item.getAxis(axis).setTextPen("#222")
    for i, (name, get) in enumerate(series):
        colour = COLOURS[i % len(COLOURS)]
        ours = sorted((int(r["workers"]), get(r)) for r in records if r.get("variant") == "this code")
        ours_points = [(w, v) for w, v in ours if v is not None]
        if ours_points:
            item.plot(
                [w for w, _ in ours_points],
                [v for _, v in ours_points],
                pen=pg.mkPen(colour, width=2.5),
                symbol="o",
                symbolBrush=colour,
                symbolPen=colour,
                name=f"{name}, this code",
            )
        base = sorted((int(r["workers"]), get(r)) for r in records if str(r.get("variant", "")).startswith("baseline"))
        base_points = [(w, v) for w, v in base if v is not None]
        if base_points:
            item.plot(
                [w for w, _ in base_points],
                [v for _, v in base_points],
                pen=None,
                symbol="x",
                symbolSize=14,
                symbolPen=pg.mkPen(colour, width=2.5),
                name=f"{name}, baseline",
            )
    if goal is not None:
        line = pg.InfiniteLine(pos=goal, angle=0, pen=pg.mkPen("#555", width=1.5, style=QtCore.Qt.PenStyle.DashLine))
        line.label = pg.InfLineLabel(line, text=f"goal at 256: {goal:g} {unit}", position=0.05, color="#555")
        item.addItem(line)
    return widget


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("results", nargs="+", type=Path, help="bench_sim_scale.py's JSON lines")
    parser.add_argument("--out", type=Path, default=Path("docs"), help="folder for the PNG files")
    parser.add_argument("--prefix", default="sim-scale", help="each file is PREFIX-COST.png")
    args = parser.parse_args(argv)
    missing = [str(p) for p in args.results if not p.is_file()]
    if missing:
        print(f"plot_scaling: no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    records = load(args.results)
    if not records:
        print("plot_scaling: no sim_scale lines in the files given", file=sys.stderr)
        return 2
    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication([])
    assert app is not None
    args.out.mkdir(parents=True, exist_ok=True)
    for stem, title, unit, series, goal in CHARTS:
        widget = chart(records, title, unit, series, goal)
        widget.show()
        app.processEvents()
        image: QtGui.QPixmap = widget.grab()
        path = args.out / f"{args.prefix}-{stem}.png"
        image.save(str(path))
        widget.close()
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
