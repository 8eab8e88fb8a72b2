"""The window on a real crash loop, driven as a user drives it: 1 ps + 2 workers, worker:1 dying of
ZeroDivisionError at every start, ``restart = { policy = "OnFailure", max_restarts = 4 }``. Its
tile and row are amber and say crash-looping (the tile, between attempts, when the next begins),
the legend counts it apart from the running roles, the Exit column and the banner say how its last
attempt ended and why, and the banner's *Show log* opens the Logs tab at the error, each attempt
under its divider. Light trainers: the behaviour under test is TowerDeck's, not TensorFlow's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from core.cluster.spec import load
from tests.helpers.clusters import CRASH_LOOP
from tests.helpers.ports import free_ports
from tests.helpers.procs import assert_nothing_left
from tests.helpers.project import ROOT

CRASHER = ROOT / "tests" / "helpers" / "crasher.py"
ERROR = "ZeroDivisionError: division by zero"


@pytest.mark.timeout(240)
def test_a_crash_loop_in_the_window_tile_row_banner_and_the_log_at_its_error(qtbot, tmp_path: Path) -> None:
    """On the old code worker:1 was a green "running" tile and row between its brief "backoff"s,
    the legend said "3 running", the Exit column was empty and there was no banner until the
    policy gave up; the Logs tab ran the attempts together, uncoloured, with no way to the error."""
    from PySide6 import QtCore, QtGui

    from core.views.logs import DIVIDER
    from gui.run.overview import CATEGORY_COLOURS
    from gui.window.main_window import MainWindow

    ports = free_ports(3)
    cluster = tmp_path / "cluster.toml"
    cluster.write_text(
        CRASH_LOOP.format(
            trainers=ROOT / "resources" / "trainers",
            p=ports,
            crasher=CRASHER,
            counter=tmp_path / "starts",
            crashes=99,
            backoff=4,
        )  # a back-off long enough to look at the tile between attempts
    )
    spec, problems = load(cluster)
    assert spec is not None, problems
    window = MainWindow(spec, runs_root=tmp_path / "runs")
    qtbot.addWidget(window)
    window.resize(1600, 1000)
    window.show()
    window.launch()

    def row_state() -> str:
        try:
            return window.roles.cell("worker:1", "State")
        except KeyError:
            return ""

    # Between attempts 2 and 3 (two attempts' output in the log): the row counts down to the next.
    # (bool: a callback that returns None is taken as an assertion that passed)
    looping = re.compile(r"crash-looping \(attempt [3-5] of 5 in \d s\)")
    qtbot.waitUntil(lambda: bool(looping.fullmatch(row_state())), timeout=90_000)
    overview = window.overview
    qtbot.waitUntil(lambda: "next in" in overview.painted_text.get("worker:1", ""), timeout=10_000)
    assert overview.painted_text["worker:1"].startswith("w1 crash-looping")
    assert overview.model.cell("worker:1").category == "crash-looping"  # type: ignore[union-attr]
    image = overview.grab().toImage()
    rect = overview.cell_rect("worker:1")
    assert rect is not None
    assert QtGui.QColor(image.pixelColor(rect.x() + 3, rect.y() + 3)).name() == CATEGORY_COLOURS["crash-looping"]
    qtbot.waitUntil(lambda: overview.legend_text().startswith("1 crash-looping · 2 running"), timeout=10_000)
    assert window.roles.cell("worker:1", "Exit") == f"exit code 1 ({ERROR})"
    qtbot.waitUntil(lambda: "worker:1 crash-looping" in window.banner.text(), timeout=10_000)
    assert re.search(rf"<b>worker:1 crash-looping</b>: exit 1 \({ERROR}\), attempt [3-5] of 5", window.banner.text())

    # The banner's Show log: the Logs tab on worker:1, the cursor on the exception line.
    window.tabs.setCurrentWidget(window.training)
    qtbot.mouseClick(window.banner.buttons["worker:1"], QtCore.Qt.MouseButton.LeftButton)
    assert window.tabs.currentWidget() is window.logs and window.logs.current == "worker:1"
    assert window.logs.view.textCursor().block().text() == ERROR
    assert not window.logs.follow.isChecked()
    document = window.logs.view.document()
    blocks = [document.findBlockByNumber(i) for i in range(document.blockCount())]
    dividers = [b.text() for b in blocks if b.userState() == DIVIDER]
    assert dividers[0].startswith("── attempt 1 · started ")
    assert re.fullmatch(r"── attempt 2 · started \d\d:\d\d:\d\d · after exit 1 ──", dividers[1]), dividers

    window.controls.stop_all.trigger()
    qtbot.waitUntil(lambda: window.controller is not None and window.controller.done, timeout=60_000)
    assert_nothing_left(ports, marker=str(tmp_path))
