"""Guards the PySide6 pin: PySide6 6.12.0 with pyqtgraph 0.14.0 dies ("Fatal Python error:
none_dealloc") after a few repaints; 6.11.3 does not. A crash kills the interpreter, so the
repaints run in a child process and the test reads its exit status and output."""

from __future__ import annotations

import os
import subprocess
import sys

REPAINTS = 300

SCRIPT = f"""
import numpy as np
import pyqtgraph as pg
from PySide6 import QtWidgets

app = QtWidgets.QApplication([])
win = pg.GraphicsLayoutWidget()
win.resize(800, 600)
plots = [win.addPlot(row=i // 2, col=i % 2) for i in range(4)]
curves = []
for plot in plots:
    plot.addLegend()
    for k in range(3):
        curve = plot.plot(pen=pg.intColor(k), name=f"worker {{k}}")
        curve.setDownsampling(auto=True, method="peak")
        curve.setClipToView(True)
        curves.append(curve)
win.show()
rng = np.random.default_rng(0)
x = np.arange(2000, dtype=float)
for i in range({REPAINTS}):
    for k, curve in enumerate(curves):
        curve.setData(x, np.cumsum(rng.standard_normal(2000)) + k)
    for plot in plots:
        plot.setTitle(f"repaint {{i}}")
    win.repaint()
    app.processEvents()
    image = win.grab().toImage()
    assert image.width() > 0
print("repainted", {REPAINTS})
"""


def test_pyqtgraph_survives_many_repaints():
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=240, env=env)
    assert "none_dealloc" not in result.stderr
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"repainted {REPAINTS}" in result.stdout
