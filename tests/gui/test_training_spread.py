"""The Training tab past a handful of workers: the spread instead of 32 lines, the slowest named
and drawn on top, workers in natural order, and a line each on demand."""

from __future__ import annotations


def feed(panel, workers: int, steps: int, slow: str) -> None:
    for w in range(workers):
        role = f"worker:{w}"
        step_s = 0.2 if role == slow else 0.1
        samples = [
            {
                "t": 1000.0 + s * step_s,
                "step": s,
                "loss": 2.0 / (1 + s / 50) + 0.01 * w,
                "step_time_s": None,
                "steps_per_sec": None,
                "extra": {},
                "source": "classic",
            }
            for s in range(steps)
        ]
        panel.add_samples(role, samples)


def test_32_workers_show_the_spread_and_the_straggler_on_top(qtbot):
    from gui.run.tabs.training import TrainingPanel

    panel = TrainingPanel()
    qtbot.addWidget(panel)
    panel.resize(1300, 900)
    panel.show()
    # worker:10 arrives before worker:1: each still gets its own row, in natural order.
    for w in (10, 1, 2, *range(3, 10), 0, *range(11, 32)):
        panel._ensure_worker(f"worker:{w}")
    names = [panel.workers.item(i).text() for i in range(panel.workers.count())]
    assert names == [f"worker:{w}" for w in range(32)]
    feed(panel, 32, 200, slow="worker:13")
    panel.refresh(force=True)
    assert panel.spread_mode and panel.views.currentIndex() == 1
    assert panel.visible_roles() == []  # past 8 workers nothing is ticked by default
    xs, _ys = panel.spread_loss.median.getData()
    assert len(xs) > 50
    # Both linked spread plots show the steps (pyqtgraph's link had turned X auto-range off).
    qtbot.waitUntil(lambda: panel.spread_loss.plot.getViewBox().viewRange()[0][1] > 150)
    for plot in (panel.spread_loss.plot, panel.spread_time.plot):
        low, high = plot.getViewBox().viewRange()[0]
        assert low <= 1 and high >= 198, (low, high)
    assert list(panel.spread_time.highlights) == ["worker:13"]  # the straggler, named in the key
    assert "worker:13 200 ms" in panel.spread_time.key_text()
    assert panel.heatmap.rows[13] == "worker:13" and panel.heatmap.image.image[13, -1] > 1.5
    # A ticked worker is drawn on top too.
    panel.workers.item(5).setCheckState(__import__("PySide6.QtCore").QtCore.Qt.CheckState.Checked)
    panel.refresh(force=True)
    assert set(panel.spread_time.highlights) == {"worker:13", "worker:5"}
    # Every worker: back to a line each.
    panel.every_worker.setChecked(True)
    panel.refresh(force=True)
    assert not panel.spread_mode and panel.views.currentIndex() == 0


def test_a_few_workers_keep_a_line_each(qtbot):
    from gui.run.tabs.training import TrainingPanel

    panel = TrainingPanel()
    qtbot.addWidget(panel)
    feed(panel, 3, 50, slow="worker:1")
    panel.refresh(force=True)
    assert not panel.spread_mode and sorted(panel.visible_roles()) == ["worker:0", "worker:1", "worker:2"]


def test_the_per_worker_key_sits_outside_the_plots(qtbot):
    """The key names each shown worker in its colour, above the plots: its rectangle never
    meets either plot's view box (a pyqtgraph legend is drawn inside it, over the curves)."""
    from PySide6 import QtCore

    from gui.run.tabs.training import TrainingPanel, role_colour

    panel = TrainingPanel()
    qtbot.addWidget(panel)
    panel.resize(900, 600)
    panel.show()
    feed(panel, 4, 100, slow="worker:3")
    panel.refresh(force=True)
    assert not panel.spread_mode and panel.views.currentIndex() == 0
    assert panel.key_text().split(" · ") == ["■ worker:0", "■ worker:1", "■ worker:2", "■ worker:3"]
    assert role_colour(2).name() in panel.key.text()
    assert panel.loss_plot.getPlotItem().legend is None and panel.time_plot.getPlotItem().legend is None
    qtbot.waitUntil(lambda: panel.key.isVisible() and panel.key.height() > 0)
    key = QtCore.QRect(panel.key.mapTo(panel, QtCore.QPoint(0, 0)), panel.key.size())
    for plot in (panel.loss_plot, panel.time_plot):
        vb = plot.getPlotItem().vb
        scene_rect = vb.mapRectToScene(vb.boundingRect())
        top_left = plot.mapTo(panel, plot.mapFromScene(scene_rect.topLeft()))
        view_box = QtCore.QRect(top_left, scene_rect.size().toSize())
        assert view_box.height() > 50 and not key.intersects(view_box), (key, view_box)
    # Unticking a worker takes it out of the key.
    panel.workers.item(1).setCheckState(QtCore.Qt.CheckState.Unchecked)
    panel.refresh(force=True)
    assert "worker:1" not in panel.key_text() and "worker:2" in panel.key_text()


def test_every_worker_of_64_gets_its_curves_a_few_a_frame(qtbot):
    """Issue 19: ticking *Every worker* on a 64-worker run made all 64 workers' curves (three plot
    items each) in one frame, a second and more without an event loop turn on a loaded machine.
    Each frame makes at most CURVES_PER_FRAME workers' curves now, and all of them appear, drawn
    with their data, within 64 / CURVES_PER_FRAME frames."""
    from PySide6 import QtCore

    from gui.run.tabs.training import CURVES_PER_FRAME, TrainingPanel

    panel = TrainingPanel()
    qtbot.addWidget(panel)
    panel.resize(1300, 900)
    panel.show()
    feed(panel, 64, 20, slow="worker:7")
    panel.every_worker.setChecked(True)
    for w in range(64):  # a line each: tick them all
        panel.workers.item(w).setCheckState(QtCore.Qt.CheckState.Checked)
    made = []
    for _frame in range(64):
        before = len(panel.loss_curves)
        panel.refresh()  # no force: a frame with curves still to make is not held to REFRESH_HZ
        made.append(len(panel.loss_curves) - before)
        if len(panel.loss_curves) == 64:
            break
    assert max(made) <= CURVES_PER_FRAME, made
    assert len(panel.loss_curves) == 64 and len(panel.time_curves) == 64, made
    assert len(made) <= -(-64 // CURVES_PER_FRAME), made
    for w in range(64):
        _raw, smooth = panel.loss_curves[f"worker:{w}"]
        x, y = smooth.getData()
        assert smooth.isVisible() and len(x) == 20 and abs(y[0] - (2.0 + 0.01 * w)) < 1e-9
        assert len(panel.time_curves[f"worker:{w}"].getData()[0]) > 0
    panel.refresh()  # all made: nothing is pending, the refresh rate holds again
    assert not panel._dirty
