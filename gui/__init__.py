"""TowerDeck's window (PySide6 + pyqtgraph); the headless parts are in ``core``.

- ``offthread``: a function run off the GUI thread, its outcome back on it
- ``editor/``: the cluster editor
- ``run/``: one run in the window: overview, GPU grid, roles table, tabs
- ``runs/``: past runs: the Runs page, compare
- ``window/``: the main window and what belongs to it alone
"""

import os

# Qt's raster engine hands every fill of 96 or more spans (a scroll bar's trough, a tab's frame) to
# a pool of threads and waits for them on the GUI thread. On a loaded machine those threads wait to
# be scheduled, and so does the window: py-spy --native saw the GUI thread in that wait
# (QLatch::waitInternal under QRasterPaintEngine::fillRect) 5-20 % of the time while following a
# 64-worker run beside `stress-ng --cpu 2`. The fills are cheap done in place. Qt reads
# the variable once, when it first wants the pool: before any painting, so here.
os.environ.setdefault("QT_NO_GUI_THREADPOOL", "1")
