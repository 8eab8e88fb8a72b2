"""What each of pyqtgraph's options buys for a TowerDeck plot: one plot, 1400x400, 4 curves of 8,192
points (a worker's bounded series read whole), a new point per curve each frame, setData + render.

Variants, each measured in the same process on the same data (median / p95 of ``FRAMES`` frames):
plain (every point drawn), + peak downsampling to the pixel width (``setDownsampling(auto=True,
method="peak")`` set after the curve exists), + clip to view, + ``skipFiniteCheck``, with
``connect="finite"``, a 2 px pen against a 1 px (cosmetic) one, zoomed into a tenth of the run
(what clip-to-view is for), and no ``setData`` at all when nothing changed (the render alone),
with the grid as TowerDeck draws it (opaque, major ticks: ``gui.run.tabs.plotting.light_grid``)
against pyqtgraph's translucent one. Timed as ``grab()`` (one paint of the plot).
OpenGL is tried last when ``OPENGL=1`` and said unavailable when the platform has none (the
offscreen platform here has none).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np
import pyqtgraph as pg
from PySide6 import QtWidgets

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from gui.run.tabs.plotting import light_grid

FRAMES = int(os.environ.get("FRAMES", "40"))
POINTS = 8192
CURVES = 4


def measure(
    name: str, make: Callable[[pg.PlotWidget], list[pg.PlotDataItem]], grid: str = "light", **options: object
) -> None:
    plot = pg.PlotWidget()
    plot.setBackground("w")
    if grid == "light":
        light_grid(plot)  # what every TowerDeck plot uses
    elif grid != "none":
        plot.showGrid(x=True, y=True, alpha=0.3)  # translucent, blended at every paint
        if grid == "major":
            for axis in ("left", "bottom"):
                plot.getAxis(axis).setStyle(maxTickLevel=0)
    plot.resize(1400, 400)
    plot.show()
    curves = make(plot)
    x = np.arange(POINTS, dtype=float)
    ys = [2.0 * np.exp(-x / 2000) + 0.05 * np.sin(x / 5 + c) + 0.1 for c in range(CURVES)]
    zoom = bool(options.pop("zoom", False))
    unchanged = bool(options.pop("unchanged", False))
    for curve, y in zip(curves, ys, strict=True):
        curve.setData(x, y, **options)
    if zoom:
        plot.setXRange(POINTS * 0.85, POINTS * 0.95, padding=0)
    plot.grab()
    times = []
    for f in range(FRAMES):
        t0 = time.perf_counter()
        if not unchanged:
            for curve, y in zip(curves, ys, strict=True):
                y[f % POINTS] += 0.01  # a changed curve, as a new point makes it
                curve.setData(x, y, **options)
        plot.grab()
        times.append(time.perf_counter() - t0)
    plot.close()
    ordered = sorted(times)
    p95 = ordered[round(0.95 * (len(ordered) - 1))]
    print(f"  {name:<62} {statistics.median(times) * 1000:7.2f} / {p95 * 1000:6.2f} ms")


def curves(
    width: float, downsample: bool, clip: bool, factor: float = 5.0
) -> Callable[[pg.PlotWidget], list[pg.PlotDataItem]]:
    def make(plot: pg.PlotWidget) -> list[pg.PlotDataItem]:
        out = []
        for c in range(CURVES):
            curve = plot.plot(pen=pg.mkPen(pg.intColor(c), width=width))
            if downsample:
                curve.setDownsampling(auto=True, method="peak")  # after the curve exists
                curve.opts["autoDownsampleFactor"] = factor  # pyqtgraph's default: 5 points a pixel
            if clip:
                curve.setClipToView(True)
            out.append(curve)
        return out

    return make


def main() -> int:
    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication(sys.argv[:1])
    assert app is not None
    print(f"one plot 1400x400, {CURVES} curves x {POINTS:,} points, setData + render (median / p95, {FRAMES} frames):")
    print(f"  load average {os.getloadavg()[0]:.1f}")
    measure("plain: every point drawn, 2 px pen", curves(2, False, False))
    measure("peak downsampling (5 points a pixel, the default), 2 px", curves(2, True, False))
    measure("peak downsampling to 1 point a pixel, 2 px", curves(2, True, False, 1.0))
    measure("  ... + clip to view", curves(2, True, True, 1.0))
    measure("  ... + connect='finite'", curves(2, True, True, 1.0), connect="finite")
    measure("  ... + skipFiniteCheck", curves(2, True, True, 1.0), connect="finite", skipFiniteCheck=True)
    measure("  ... 1 px pen (cosmetic): TowerDeck's curves", curves(1, True, True, 1.0), connect="finite")
    measure("plain, 1 px pen", curves(1, False, False))
    measure("zoomed to a tenth: downsampling only, 1 px", curves(1, True, False, 1.0), zoom=True)
    measure("zoomed to a tenth: downsampling + clip to view, 1 px", curves(1, True, True, 1.0), zoom=True)
    measure("no setData (nothing changed): render only", curves(1, True, True, 1.0), unchanged=True)
    measure("  ... grid translucent, minor ticks too", curves(1, True, True, 1.0), grid="all", unchanged=True)
    measure("  ... grid translucent, major ticks", curves(1, True, True, 1.0), grid="major", unchanged=True)
    measure("  ... no grid", curves(1, True, True, 1.0), grid="none", unchanged=True)
    print(f"  load average {os.getloadavg()[0]:.1f}")
    if os.environ.get("OPENGL") == "1":
        try:
            pg.setConfigOptions(useOpenGL=True)
            measure("OpenGL, downsampling + clip, 1 px", curves(1, True, True), connect="finite")
        except Exception as exc:
            print(f"  OpenGL unavailable here: {exc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
