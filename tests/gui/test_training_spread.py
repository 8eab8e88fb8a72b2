"""The Training tab past a handful of workers: the spread instead of 32 lines, the slowest named
and drawn on top, workers in natural order, and a line each on demand."""

from __future__ import annotations


def feed(panel, workers: int, steps: int, slow: str = "", first: int = 0) -> None:
    """``steps`` steps of ``workers`` workers from step ``first`` (``slow`` steps half as fast)."""
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
            for s in range(first, first + steps)
        ]
        panel.add_samples(role, samples)


def shown_panel(qtbot, workers: int, slow: str, size: tuple[int, int]):
    """A Training tab on screen, fed ``workers`` workers of which ``slow`` is twice as slow."""
    from gui.run.tabs.training import TrainingPanel

    panel = TrainingPanel()
    qtbot.addWidget(panel)
    panel.resize(*size)
    panel.show()
    feed(panel, workers, 100, slow=slow)
    panel.refresh(force=True)
    return panel


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

    from gui.run.tabs.training import role_colour

    panel = shown_panel(qtbot, 4, "worker:3", (900, 600))
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


def test_the_spread_s_slowest_workers_offer_profile_and_why(qtbot):
    from PySide6 import QtCore, QtWidgets

    panel = shown_panel(qtbot, 12, "worker:7", (1300, 900))
    assert panel.spread_mode
    menu = panel.slowest_menu
    assert menu.roles == ("worker:7",)  # the straggler; with a ticked worker after it
    panel.workers.item(2).setCheckState(QtCore.Qt.CheckState.Checked)
    panel.refresh(force=True)
    assert menu.roles == ("worker:7", "worker:2")
    assert '<a href="worker:7"' in panel.spread_time.key.text() and '<a href="worker:7"' in panel.spread_loss.key.text()
    assert "worker:7 200 ms" in panel.spread_time.key_text()  # the key reads as before

    # A right-click on a key: every named worker, each with Profile and Why.
    panel.spread_time.key.customContextMenuRequested.emit(QtCore.QPoint(5, 5))
    qtbot.waitUntil(lambda: isinstance(QtWidgets.QApplication.activePopupWidget(), QtWidgets.QMenu))
    popup = QtWidgets.QApplication.activePopupWidget()
    assert [a.text() for a in popup.actions()] == ["worker:7 (200 ms)", "worker:2 (ticked)"]
    slowest = popup.actions()[0].menu()
    assert [a.text() for a in slowest.actions()] == ["Profile worker:7", "Why is worker:7 slow?"]
    with qtbot.waitSignal(menu.sig_profile_requested) as profiled:
        slowest.actions()[0].trigger()
    assert profiled.args == ["worker:7"]
    popup.close()

    # A click on a name in the key: that worker's two entries.
    panel.spread_loss.key.linkActivated.emit("worker:7")
    qtbot.waitUntil(lambda: isinstance(QtWidgets.QApplication.activePopupWidget(), QtWidgets.QMenu))
    popup = QtWidgets.QApplication.activePopupWidget()
    assert [a.text() for a in popup.actions()] == ["Profile worker:7", "Why is worker:7 slow?"]
    with qtbot.waitSignal(menu.sig_why_requested) as asked:
        popup.actions()[1].trigger()
    assert asked.args == ["worker:7"]
    popup.close()


def test_the_spread_s_entries_reach_the_window_s_profile_and_why_on_that_worker(qtbot, tmp_path):
    from gui.window.main_window import MainWindow
    from tests.helpers.past_run import generate_run

    window = MainWindow(None, runs_root=tmp_path / "runs")
    qtbot.addWidget(window)
    assert window.open_run(generate_run(tmp_path / "past", workers=12, seconds=60, hosts=1))
    window.select_role("worker:0")
    actions = {a.text(): a for a in window.training.slowest_menu.menu(["worker:5"]).actions()}
    actions["Profile worker:5"].trigger()
    assert window.selected_roles() == ["worker:5"]
    # The Profile action itself answered, on worker:5 (a run read back cannot be profiled).
    assert window.profiler.last_message.startswith("profile: this run is read back from its directory")
    window.select_role("worker:0")
    actions = {a.text(): a for a in window.training.slowest_menu.menu(["worker:5"]).actions()}
    actions["Why is worker:5 slow?"].trigger()
    assert window.selected_roles() == ["worker:5"]
    assert window.why.last_message.startswith("why: this run is read back from its directory")


def test_the_key_counts_the_workers_not_read_yet(qtbot):
    from gui.run.tabs.training import TrainingPanel
    from tests.helpers.statuses import role_status

    panel = TrainingPanel()
    qtbot.addWidget(panel)
    panel.resize(1300, 900)
    panel.show()
    feed(panel, 12, 100, slow="worker:3")  # 12 of 20 workers read so far
    panel.set_status(tuple(role_status(r) for r in ["ps:0", *(f"worker:{w}" for w in range(20))]))
    panel.refresh(force=True)
    # Before: "median of 12 workers", as if of all of them.
    assert "median of 12 of 20 workers (8 no loss yet)" in panel.spread_loss.key_text()
    assert "median of 12 of 20 workers (8 no step time yet)" in panel.spread_time.key_text()
    feed(panel, 20, 100, slow="worker:3")
    panel.refresh(force=True)
    assert "median of 20 workers," in panel.spread_time.key_text()


def test_a_spread_refresh_redraws_one_view_a_frame(qtbot, monkeypatch):
    """The loss spread, the step-time spread and the heat map, each re-ticking its axes, were one
    frame's 10-17 ms paint at 256 simulated workers: a refresh draws one of them a frame, in turn,
    and only those whose data moved. ``force`` still draws all three at once."""
    panel = shown_panel(qtbot, 32, "worker:5", (1300, 900))
    drawn: list[str] = []
    for name, view, method in (
        ("loss", panel.spread_loss, "set_spread"),
        ("time", panel.spread_time, "set_spread"),
        ("heat", panel.heatmap, "set_heatmap"),
    ):
        real = getattr(view, method)
        monkeypatch.setattr(view, method, lambda *a, _real=real, _name=name, **k: drawn.append(_name) or _real(*a, **k))
    feed(panel, 32, 10, first=100)
    frames = []
    for _ in range(4):
        panel._last_refresh = 0.0  # the refresh rate's time has passed (a frame's timer would wait)
        panel.refresh()
        frames.append(list(drawn))
        drawn.clear()
    assert frames == [["loss"], ["time"], ["heat"], []]  # nothing new by the fourth: none redrawn
    feed(panel, 32, 10, first=110)
    panel.refresh(force=True)
    assert sorted(drawn) == ["heat", "loss", "time"]


def test_the_spread_axes_move_seldom_while_a_run_grows(qtbot):
    """An auto-ranged spread moved its step axis (and re-ticked both plots' axes) at every refresh
    of a live run; the views now keep room ahead of the newest step and above and below the
    values, and move when the data leaves it."""
    panel = shown_panel(qtbot, 32, "worker:5", (1300, 900))
    moves = {"x": 0, "loss y": 0, "heat x": 0}
    panel.spread_loss.plot.getViewBox().sigXRangeChanged.connect(lambda *_: moves.__setitem__("x", moves["x"] + 1))
    panel.spread_loss.plot.getViewBox().sigYRangeChanged.connect(
        lambda *_: moves.__setitem__("loss y", moves["loss y"] + 1)
    )
    panel.heatmap.plot.getViewBox().sigXRangeChanged.connect(
        lambda *_: moves.__setitem__("heat x", moves["heat x"] + 1)
    )
    for i in range(300):  # 100 steps to 1,000: a live run's first minutes at 10 refreshes a second
        feed(panel, 32, 3, first=100 + 3 * i)
        panel.refresh(force=True)
    assert all(0 < n <= 30 for n in moves.values()), moves
    low, high = panel.spread_loss.plot.getViewBox().viewRange()[0]
    assert low <= 0 and 999 <= high <= 999 * 1.25  # every step shown, the room ahead bounded
    panel.set_live(live=False)  # the run ended: its views end at its last step, no room ahead
    panel.refresh(force=True)
    for plot in (panel.spread_loss.plot, panel.heatmap.plot):
        low, high = plot.getViewBox().viewRange()[0]
        assert high <= 999 * 1.05, (plot, high)
    panel.spread_loss.plot.getViewBox().setXRange(100, 200, padding=0)  # as a user's zoom does (a manual range)
    panel.spread_loss.plot.getViewBox().sigRangeChangedManually.emit([True, True])
    feed(panel, 32, 200, first=1000)
    panel.refresh(force=True)
    assert panel.spread_loss.plot.getViewBox().viewRange()[0] == [100, 200]  # the user's range stays


def test_the_ticked_workers_are_read_from_the_list_once_per_change(qtbot, monkeypatch):
    """``visible_roles`` read all 256 rows' ticks each time: a third of a spread refresh and of
    each status at 256 workers. It reads them again only when a row changed."""
    panel = shown_panel(qtbot, 256, "worker:5", (1300, 900))
    reads = []
    item = panel.workers.item
    monkeypatch.setattr(panel.workers, "item", lambda i: reads.append(i) or item(i))
    for _ in range(5):
        assert panel.visible_roles() == []
    assert len(reads) <= 256
    item(7).setCheckState(item(7).checkState().Checked)  # the user ticks worker:7
    assert panel.visible_roles() == ["worker:7"]
