"""The GPU grid: 64 GPUs on 8 hosts as small tiles grouped by host, bounded history, heat from
temperature and power, and a click that asks for a GPU's full card. Samples have the agent's
``sample`` shape (docs/agent-protocol.md), as the NVML double produces them."""

from __future__ import annotations

import math

from core.views.gpu_figures import GpuFigures
from core.views.gpu_tiles import SPARK_POINTS, GpuTileBoard, heat_level
from tests.helpers.widgets import tiles_painted_per_frame

GIB = 1 << 30


def sample(host: str, t: float, gpus: int = 8, hot: int | None = None) -> dict:
    return {
        "host": host,
        "t": t,
        "gpus": [
            {
                "index": i,
                "name": "NVIDIA H100 80GB HBM3",
                "utilization_gpu_percent": (t * 7 + i * 11) % 100,
                "memory_used_bytes": (10 + i) * GIB,
                "memory_total_bytes": 80 * GIB,
                "temperature_c": 90.0 if i == hot else 55.0,
                "power_w": 300.0,
                "power_limit_w": 700.0,
                "processes": [
                    {"pid": 100 + i, "used_memory_bytes": GIB, "role": f"worker:{i * 8 + int(host[-1]) - 1}"}
                ],
            }
            for i in range(gpus)
        ],
    }


def test_heat_is_the_worse_of_temperature_and_power():
    assert heat_level(50, 100, 700) == 0
    assert heat_level(72, 100, 700) == 1
    assert heat_level(50, 690, 700) == 2
    assert heat_level(88, None, None) == 3
    assert heat_level(None, None, None) == 0


def test_board_keeps_a_bounded_history_per_gpu_and_groups_hosts_naturally():
    board = GpuTileBoard()
    for t in range(5 * SPARK_POINTS):
        for h in (10, 2, 1):
            board.add_sample(sample(f"127.0.0.{h}", float(t), gpus=2))
    assert len(board) == 6
    assert [h for h, _ in board.by_host()] == ["127.0.0.1", "127.0.0.2", "127.0.0.10"]
    tile = board.tile("127.0.0.2", 1)
    assert tile is not None and len(tile.utilization_history) == SPARK_POINTS
    last_t = 5 * SPARK_POINTS - 1
    assert math.isclose(tile.utilization_history[-1], ((last_t * 7 + 11) % 100) / 100)
    assert tile.memory_fraction == 11 / 80 and tile.roles == ("worker:9",)
    board.add_sample({"host": "127.0.0.3", "t": 1.0, "gpus": []})  # a host without GPUs adds no tile
    board.add_sample({"host": "127.0.0.3", "t": 1.0, "gpus": [{"index": 0, "utilization_gpu_percent": None}]})
    assert board.tile("127.0.0.3", 0).utilization_percent is None  # NVML could not say: n/a, not a crash


def test_grid_shows_64_gpus_on_8_hosts_and_a_click_selects_one(qtbot):
    from PySide6 import QtCore

    from gui.run.gpu_grid import GpuGrid

    grid = GpuGrid()
    qtbot.addWidget(grid)
    grid.resize(1500, 900)
    grid.show()
    for t in range(30):
        for h in range(1, 9):
            grid.board.add_sample(sample(f"127.0.0.{h}", float(t), hot=3 if h == 5 else None))
    grid.refresh()
    qtbot.waitUntil(lambda: grid.repaints > 0)
    headers = grid.headers()
    assert len(headers) == 8 and headers[0].startswith("127.0.0.1   8 GPUs · mean")
    assert headers[4].endswith("· 1 hot") and "hot" not in headers[3]
    rects = [grid.tile_rect(f"127.0.0.{h}", i) for h in range(1, 9) for i in range(8)]
    assert all(r is not None for r in rects)
    for i, a in enumerate(rects):
        assert all(not a.intersects(b) for b in rects[i + 1 :])
    with qtbot.waitSignal(grid.sig_gpu_selected) as blocker:
        qtbot.mouseClick(grid, QtCore.Qt.MouseButton.LeftButton, pos=grid.tile_rect("127.0.0.6", 3).center())
    assert blocker.args == ["127.0.0.6", 3]
    # Nothing new: refresh paints nothing; a host's new sample: its 8 tiles only.
    assert grid.refresh() is False
    qtbot.waitUntil(lambda: grid.repaints > 1)  # the click's selection
    painted = grid.tiles_painted
    grid.board.add_sample(sample("127.0.0.1", 31.0))
    assert grid.refresh() is True
    qtbot.waitUntil(lambda: grid.tiles_painted > painted)
    assert grid.tiles_painted - painted == 8 and grid.stale == 0 and grid.refresh() is False


def test_a_second_of_every_host_s_samples_repaints_the_gpus_a_share_a_frame(qtbot):
    """The agents sample in step: a second's samples of 16 hosts (128 GPUs) came in one frame, and
    repainting every tile in it was the GPUs tab's p95 at 128 workers. The GPUs whose samples came
    go a share a frame, every one within a second (10 frames); a new host is a new layout: all."""
    from gui.run.gpu_grid import TILE_SHARES, TILES_PER_FRAME, GpuGrid

    grid = GpuGrid()
    qtbot.addWidget(grid)
    grid.resize(1500, 900)
    grid.show()
    for h in range(1, 17):
        grid.board.add_sample(sample(f"127.0.0.{h}", 0.0))
    assert grid.refresh() is True
    qtbot.waitUntil(lambda: grid.repaints > 0)
    for h in range(1, 17):  # every host's next sample
        grid.board.add_sample(sample(f"127.0.0.{h}", 1.0, hot=2 if h == 3 else None))
    shares = tiles_painted_per_frame(qtbot, grid)
    on_screen = sum(1 for r, _ in grid._rects if r.intersects(grid.visibleRegion().boundingRect()))
    share = max(TILES_PER_FRAME, -(-128 // TILE_SHARES))  # every tile within TILE_SHARES frames
    assert max(shares) <= share < 128 and sum(shares) == on_screen, (shares, on_screen)
    assert grid.stale == 0 and grid.refresh() is False
    assert "1 hot" in grid.headers()[2]  # the host's line changed with its sample, at once
    painted = grid.repaints
    grid.board.add_sample(sample("127.0.0.17", 1.0))  # a new host: a new layout, every tile
    assert grid.refresh() is True and grid.stale == 0
    qtbot.waitUntil(lambda: grid.repaints > painted)


def fed_panel(qtbot, samples: int):  # type: ignore[no-untyped-def]
    """A shown GPU panel fed ``samples`` samples of 8 hosts with 8 GPUs each (host CPU 10 %, 11 %...)."""
    from gui.run.tabs.gpus import GpuPanel

    panel = GpuPanel()
    qtbot.addWidget(panel)
    panel.resize(1400, 900)
    panel.show()
    for t in range(samples):
        for h in range(1, 9):
            panel.add_sample(sample(f"127.0.0.{h}", float(t)) | {"figures": {"cpu_percent": 10.0 + t}})
    return panel


def test_gpu_panel_leads_with_the_grid_past_8_gpus_and_shows_one_full_card(qtbot):
    from PySide6 import QtCore

    panel = fed_panel(qtbot, 5)
    panel.refresh()
    assert panel.figures.grid_mode and panel.grid_scroll.isVisible() and len(panel.grid.board) == 64
    # One full card shows, not 64 plots; cards made before the grid took over stay hidden.
    assert [k for k, c in panel.cards.items() if k[1] >= 0 and not c.box.isHidden()] == [("127.0.0.1", 0)]
    assert len([k for k in panel.cards if k[1] >= 0]) <= panel.figures.grid_from + 1
    assert not panel.cards[("127.0.0.1", 0)].box.isHidden()
    qtbot.waitUntil(lambda: panel.grid.tile_rect("127.0.0.7", 5) is not None)
    panel.grid_scroll.ensureVisible(0, panel.grid.tile_rect("127.0.0.7", 5).center().y())
    qtbot.mouseClick(panel.grid, QtCore.Qt.MouseButton.LeftButton, pos=panel.grid.tile_rect("127.0.0.7", 5).center())
    assert panel.figures.focus == ("127.0.0.7", 5)
    card = panel.cards[("127.0.0.7", 5)]
    assert not card.box.isHidden() and panel.cards[("127.0.0.1", 0)].box.isHidden()
    assert len(card.first) == 5  # the card opens with the GPU's history, kept before it was shown
    assert "GPU 5" in card.box.title()


def test_gpu_panel_with_few_gpus_keeps_a_card_each(qtbot):
    from gui.run.tabs.gpus import GpuPanel

    panel = GpuPanel()
    qtbot.addWidget(panel)
    panel.add_sample(sample("127.0.0.1", 1.0, gpus=4) | {"figures": {}})
    while panel.pending_cards():  # a few cards a frame
        panel.refresh()
    assert not panel.figures.grid_mode and panel.grid_scroll.isHidden()
    assert {k for k in panel.cards if k[1] >= 0} == {("127.0.0.1", i) for i in range(4)}


def test_cards_are_made_a_few_a_frame_and_open_with_their_history(qtbot):
    """Issue 19: the first samples of a 64-GPU run made 17 plot widgets in one go on the GUI
    thread (6.7 s without an event loop turn on a loaded machine). Samples make no widget now;
    each frame makes at most CARDS_PER_FRAME cards, those on screen only, the focused GPU's first."""
    from gui.run.tabs.gpus import CARDS_PER_FRAME

    panel = fed_panel(qtbot, 3)
    assert panel.cards == {}, "a sample made plot widgets"
    assert len(panel.figures.history) == 64 + 8 and all(len(first) == 3 for first, _ in panel.figures.history.values())
    made = []
    while panel.pending_cards():
        before = len(panel.cards)
        panel.refresh()
        made.append(len(panel.cards) - before)
        if len(made) == 1:  # the focused GPU's card comes first
            assert ("127.0.0.1", 0) in panel.cards
    assert max(made) <= CARDS_PER_FRAME and len(made) >= (8 + 1) // CARDS_PER_FRAME
    assert set(panel.cards) == {(f"127.0.0.{h}", -1) for h in range(1, 9)} | {("127.0.0.1", 0)}
    card = panel.cards[("127.0.0.8", -1)]
    assert len(card.first) == 3 and card.first.last() == (2.0, 12.0)  # samples from before it was made
    panel.grid.select("127.0.0.5", 3)
    panel.grid.sig_gpu_selected.emit("127.0.0.5", 3)  # as a click on its tile does
    assert len(panel.cards[("127.0.0.5", 3)].first) == 3


def test_cards_scrolled_out_of_view_are_drawn_when_they_come_back(qtbot):
    """Only the cards on screen get their curves redrawn each frame; scrolling one into view draws
    it with every sample at once, before it paints."""
    from gui.run.tabs.gpus import GpuPanel

    panel = GpuPanel()
    qtbot.addWidget(panel)
    panel.resize(1000, 500)  # two or three cards high: eight GPUs' cards do not all fit
    panel.show()
    qtbot.waitExposed(panel)
    t = 0.0
    while t < 6 or panel.pending_cards():  # a few cards a frame
        panel.add_sample(sample("127.0.0.1", t) | {"figures": {"cpu_percent": 10.0}})
        panel.refresh()
        t += 1
    last = panel.cards[("127.0.0.1", 7)]
    qtbot.waitUntil(lambda: last.plot.isVisible())
    for _ in range(3):  # laid out now: frames that draw what is in view
        panel.add_sample(sample("127.0.0.1", t) | {"figures": {"cpu_percent": 10.0}})
        panel.refresh()
        t += 1

    def points(key: tuple[str, int]) -> int:
        x = panel.cards[key].curves[0].getData()[0]
        return 0 if x is None else len(x)

    top = ("127.0.0.1", -1)
    assert points(top) == len(panel.figures.history[top][0]) == t  # in view: every sample drawn
    assert 0 < points(("127.0.0.1", 7)) < t  # out of view: left as it was
    bar = panel.cards_scroll.verticalScrollBar()
    bar.setValue(bar.maximum())
    assert points(("127.0.0.1", 7)) == t  # drawn on the scroll, with no new sample


def mixed_samples(count: int) -> list[dict]:
    """8 hosts' samples in the order a reopened run hands them over, with the odd gap: a host
    without figures, a GPU without memory figures, a sample without GPUs."""
    out = []
    for t in range(count):
        for h in range(1, 9):
            data = sample(f"127.0.0.{h}", float(t)) | {"figures": {"cpu_percent": 10.0 + t % 90}}
            if t % 17 == 0:
                data["gpus"][3] = {"index": 3, "utilization_gpu_percent": None}
            if (t + h) % 23 == 0:
                data = {"host": f"127.0.0.{h}", "t": float(t), "gpus": [], "figures": {}}
            out.append(data)
    return out


def test_a_batch_of_samples_is_each_sample_in_turn():
    """A reopened run's thousands of samples go in one batch (one Series.extend per series); the
    panel's figures (Qt-free, no widget built), its series and the tiles end exactly as with a
    sample at a time."""
    samples = mixed_samples(3 * SPARK_POINTS)
    one_by_one, batched = GpuFigures(), GpuFigures()
    for data in samples:
        one_by_one.add_sample(data)
    batched.add_samples(samples[:5])  # a live frame's few, then a backlog
    batched.add_samples(samples[5:])
    assert list(batched.history) == list(one_by_one.history) and batched.focus == one_by_one.focus
    for key, (first, second) in one_by_one.history.items():
        other = batched.history[key]
        for mine, theirs in ((first, other[0]), (second, other[1])):
            assert repr(mine.points()) == repr(theirs.points()) and mine.appended == theirs.appended
    assert repr(batched.board.by_host()) == repr(one_by_one.board.by_host())  # NaN readings too
    assert batched.latest == one_by_one.latest


def test_the_board_takes_a_batch_as_samples_in_turn():
    samples = mixed_samples(SPARK_POINTS + 7)
    one_by_one, batched = GpuTileBoard(), GpuTileBoard()
    for data in samples:
        one_by_one.add_sample(data)
    batched.add_samples(samples)
    tiles = one_by_one.by_host()
    assert repr(batched.by_host()) == repr(tiles)  # repr: NaN readings compare too
    assert len(tiles) == 8 and len(tiles[0][1][0].utilization_history) == SPARK_POINTS
    version = batched.version
    batched.add_samples(samples[:1])
    assert batched.version > version


def test_a_gpu_card_s_plot_builds_its_menus_at_the_first_right_click_not_when_made(qtbot):
    """Making a card's plot built pyqtgraph's context menus too (two thirds of the plot's making,
    the GPUs tab's longest turn at 256 GPUs); they are built when the user first right-clicks it,
    and then are pyqtgraph's own."""
    from PySide6 import QtCore

    panel = fed_panel(qtbot, 3)
    panel.refresh()
    card = panel.cards[("127.0.0.1", 0)]
    box = card.plot.getViewBox()
    assert box.menu is None and not card.plot.getPlotItem().menuEnabled()
    qtbot.waitUntil(lambda: card.plot.isVisible() and card.plot.width() > 100)
    centre = card.plot.mapFromScene(box.sceneBoundingRect().center())
    qtbot.mouseClick(card.plot.viewport(), QtCore.Qt.MouseButton.RightButton, pos=centre)
    qtbot.waitUntil(lambda: box.menu is not None)
    assert card.plot.getPlotItem().menuEnabled() and box.menu.isVisible()
    box.menu.close()


def test_the_grid_s_half_of_the_tab_shows_only_with_a_grid_in_it(qtbot):
    """Before the first samples (the agents' GPU lines only) the tab showed an empty half above
    the hosts' boxes (seen following 256 simulated workers); the grid's half comes with the grid."""
    from gui.run.tabs.gpus import GpuPanel

    panel = GpuPanel()
    qtbot.addWidget(panel)
    panel.resize(1400, 900)
    panel.show()
    for h in range(1, 9):
        panel.set_gpu_status(f"127.0.0.{h}", "8 GPUs")
    panel.refresh()
    grids = panel.split.widget(0)  # the grid's half
    assert not grids.isVisible() and panel.cards_scroll.isVisible()
    for h in range(1, 9):
        panel.add_sample(sample(f"127.0.0.{h}", 1.0) | {"figures": {"cpu_percent": 10.0}})
    panel.refresh()
    assert panel.grid_scroll.isVisible() and grids.height() >= panel.height() // 3
