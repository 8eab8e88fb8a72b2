"""The window's export (the current tab's plots as PNG and SVG, the run's figures as CSV, off the
GUI thread), pyqtgraph's right-click export on our plots, [notify] from a window launch, and the
desktop notification when the window is not the active one. Real light-trainer processes."""

from __future__ import annotations

import json
import socket
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from core.cluster.spec import load
from core.run import journal
from core.run.csv_export import read_csv
from tests.helpers.events import make_event
from tests.helpers.ports import free_ports
from tests.helpers.procs import gone
from tests.helpers.project import ROOT

SINK = ROOT / "tests" / "helpers" / "notify_sink.py"


def light_cluster(tmp_path: Path, sink_out: Path) -> Path:
    p = free_ports(3)
    path = tmp_path / "light.toml"
    path.write_text(
        f"""name = "exported"
workdir = "{ROOT / "resources" / "trainers"}"
command = ["{sys.executable}", "-u", "light_trainer.py", "--steps=150", "--rate_hz=20"]
stop_grace_s = 3
[jobs.ps]
tasks = ["127.0.0.1:{p[0]}"]
[jobs.worker]
tasks = ["127.0.0.1:{p[1]}", "127.0.0.1:{p[2]}"]
[notify]
command = {json.dumps([sys.executable, str(SINK), str(sink_out)])}
events = ["run_finished"]
"""
    )
    return path


def test_export_plots_and_csv_from_a_live_run_and_notify_when_it_ends(qtbot, tmp_path: Path) -> None:
    import pyqtgraph as pg
    from PySide6 import QtGui

    from gui.window import plot_render
    from gui.window.export_dialog import ExportPlotDialog
    from gui.window.exporting import PlotExport, file_names, series_names, visible_plots
    from gui.window.main_window import MainWindow
    from gui.window.plot_render import PlotImage

    sink_out = tmp_path / "notified.jsonl"
    spec, problems = load(light_cluster(tmp_path, sink_out))
    assert spec is not None, problems
    window = MainWindow(spec, runs_root=tmp_path / "runs")
    qtbot.addWidget(window)
    window.show()
    window.controls.launch.trigger()
    qtbot.waitUntil(lambda: window.source is not None, timeout=30_000)  # launched off the GUI thread
    window.tabs.setCurrentWidget(window.training)
    qtbot.waitUntil(lambda: (window.source.status().roles[1].step or 0) > 30, timeout=60_000)
    qtbot.wait(300)  # a few frames: the curves are drawn

    # File > Export plot: every plot of the tab, PNG then SVG, written off the GUI thread, each
    # at a size of its own (1600x900 by default, not the on-screen strip), named <run>-<plot> in
    # the order the plots have on screen, into the run's folder by default.
    plots = visible_plots(window.training)
    assert plots == [window.training.loss_plot, window.training.time_plot]  # top to bottom
    exporter = window.exporter
    run = window.source.path
    assert exporter.default_folder() == run
    exporter.export_plots(PlotExport(folder=exporter.default_folder()))
    qtbot.waitUntil(lambda: len(exporter.last_written) == len(plots), timeout=10_000)
    assert exporter.last_error is None
    assert exporter.last_written == [run / f"{run.name}-loss-by-step.png", run / f"{run.name}-step-time-by-step.png"]
    for path in exporter.last_written:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        image = QtGui.QImage(str(path))
        assert (image.width(), image.height()) == (1600, 900), path
    exporter.last_written = []
    exporter.export_plots(PlotExport(folder=tmp_path, size=None))  # twice the on-screen size
    qtbot.waitUntil(lambda: len(exporter.last_written) == len(plots), timeout=10_000)
    image = QtGui.QImage(str(exporter.last_written[1]))
    assert abs(image.width() - 2 * plots[1].width()) <= 2 and abs(image.height() - 2 * plots[1].height()) <= 2
    exporter.last_written = []
    exporter.export_plots(PlotExport(folder=tmp_path, suffix=".svg"))
    qtbot.waitUntil(lambda: len(exporter.last_written) == len(plots), timeout=10_000)
    for path in exporter.last_written:
        root = ET.parse(path).getroot()
        assert root.tag.endswith("svg")
        assert any(el.tag.endswith("path") or el.tag.endswith("polyline") for el in root.iter()), path
        assert not any(el.tag.endswith("image") for el in root.iter()), path  # vectors, no pixels
        # The key the window shows beside the plots is in the file: which curve is which worker.
        words = " ".join(el.text or "" for el in root.iter())
        assert "worker:0" in words and "worker:1" in words, path
    # All of the tab's plots in one image: 1600x900, the loss plot above the step-time one.
    exporter.last_written = []
    exporter.export_plots(PlotExport(folder=tmp_path, one_image=True))
    qtbot.waitUntil(lambda: len(exporter.last_written) == 1, timeout=10_000)
    assert exporter.last_written == [tmp_path / f"{run.name}-training.png"]
    image = QtGui.QImage(str(exporter.last_written[0]))
    assert (image.width(), image.height()) == (1600, 900)
    exporter.last_written = []
    exporter.export_plots(PlotExport(folder=tmp_path, suffix=".svg", one_image=True))
    qtbot.waitUntil(lambda: len(exporter.last_written) == 1, timeout=10_000)
    root = ET.parse(exporter.last_written[0]).getroot()
    assert sum(1 for el in root if el.tag.endswith("g")) == 2
    assert "Loss by step" in " ".join(el.text or "" for el in root.iter())
    # The dialog's defaults are those: the run's folder, PNG, 1600x900, a file per plot, and it
    # lists the files it will write.
    dialog = ExportPlotDialog(
        window,
        folder=exporter.default_folder(),
        on_screen=(plots[0].width(), plots[0].height()),
        names=lambda choice: file_names(run.name, "Training", plots, choice=choice),
    )
    assert dialog.choice() == PlotExport(folder=run)
    assert dialog.files.text().splitlines() == [f"{run.name}-loss-by-step.png", f"{run.name}-step-time-by-step.png"]
    dialog.one_image.setChecked(True)
    dialog.format.setCurrentIndex(1)
    assert dialog.files.text() == f"{run.name}-training.svg"
    dialog.close()
    # The key sits outside the curves: right of the view box, in the export's layout.
    image_ = PlotImage(plots[1], series_names(window, plots[1]))
    item = plots[1].getPlotItem()
    with plot_render._laid_out(item, image_.key, (1600, 900)):
        legends = [i for i in item.scene().items() if isinstance(i, pg.LegendItem)]
        assert len(legends) == 1
        key_rect = legends[0].sceneBoundingRect()
        assert key_rect.width() > 20
        assert key_rect.left() >= item.getViewBox().sceneBoundingRect().right() - 1  # a pen's half pixel
    # ... and only in the file: the plots on screen are as they were.
    for plot in plots:
        assert not any(isinstance(i, pg.LegendItem) for i in plot.scene().items())

    # Right-click > Export... (pyqtgraph's dialog) is there for our plots, offers PNG and SVG, and
    # its SVG export works (it shares the exporter fixed in gui/window/exporting.py).
    scene = plots[0].scene()
    assert [a.text() for a in scene.contextMenu] == ["Export..."]
    scene.contextMenuItem = plots[0].getPlotItem().getViewBox()  # what a right-click on the curves sets
    scene.contextMenu[0].trigger()
    dialog = scene.exportDialog
    assert dialog is not None
    names = [dialog.ui.formatList.item(i).text() for i in range(dialog.ui.formatList.count())]
    assert any("PNG" in n for n in names) and any("SVG" in n for n in names)
    dialog.ui.formatList.setCurrentRow(next(i for i, n in enumerate(names) if "SVG" in n))
    dialog.currentExporter.export(str(tmp_path / "dialog.svg"))
    assert ET.parse(tmp_path / "dialog.svg").getroot().tag.endswith("svg")
    dialog.close()

    # File > Export run figures as CSV, while the run is live: a consistent snapshot.
    csv_dir = tmp_path / "csv"
    exporter.export_csv(csv_dir)
    qtbot.waitUntil(lambda: exporter.last_written == [csv_dir], timeout=20_000)
    rows = read_csv(csv_dir / "metrics.csv")
    worker0 = [int(r["step"]) for r in rows if r["role"] == "worker:0"]
    assert worker0 and worker0 == list(range(1, len(worker0) + 1))

    # The run ends: [notify] runs the command from the window's launch too.
    qtbot.waitUntil(lambda: window.source.done, timeout=120_000)
    # A whole line, not just the file: the sink creates it before it writes (CI read it empty once).
    qtbot.waitUntil(lambda: sink_out.exists() and sink_out.read_text().endswith("\n"), timeout=30_000)
    got = [json.loads(line) for line in sink_out.read_text().splitlines()]
    assert [(g["kind"], g["event"]["result"]) for g in got] == [("run_finished", "succeeded")]
    run_path = window.source.path
    qtbot.waitUntil(lambda: any(r["kind"] == "notify" for r in journal.iter_journal(run_path)), timeout=10_000)


def test_desktop_notification_only_when_the_window_is_not_active(qtbot, monkeypatch) -> None:
    from gui.window.main_window import MainWindow

    window = MainWindow(None)
    qtbot.addWidget(window)
    notifier = window.desktop_notifier
    failed = make_event("role_state", time.time(), "worker:1", {"state": "failed", "detail": "killed by SIGKILL"})
    monkeypatch.setattr(window, "isActiveWindow", lambda: True)
    notifier.on_event(failed)
    assert notifier.shown == []  # the user is looking at the window
    monkeypatch.setattr(window, "isActiveWindow", lambda: False)
    notifier.on_event(make_event("role_state", time.time(), "worker:1", {"state": "running"}))
    notifier.on_event(make_event("role_state", time.time() - 3600, "worker:1", {"state": "failed"}))  # read back: old
    assert notifier.shown == []
    notifier.on_event(failed)
    assert [(n.kind, n.title, n.message) for n in notifier.shown] == [
        ("role_failed", "worker:1 failed", "killed by SIGKILL")
    ]


@pytest.mark.slow
def test_open_in_tensorboard_and_it_stops_with_the_window(qtbot, tmp_path: Path) -> None:
    from gui.window.main_window import MainWindow
    from tests.helpers.clusters import TENSORBOARD_CLUSTER
    from tests.helpers.project import TRAINERS, run_cli

    cluster = tmp_path / "tb.toml"
    cluster.write_text(TENSORBOARD_CLUSTER.format(trainers=TRAINERS, p=free_ports(2)))
    run = tmp_path / "run"
    launched = run_cli("launch", str(cluster), "--run-dir", str(run), "--progress-every", "0")
    assert launched.returncode == 0, launched.stdout + launched.stderr

    window = MainWindow(None)
    qtbot.addWidget(window)
    window.show()
    assert window.open_run(run)
    action = window.tensorboard
    action.open_browser = False
    action.action.trigger()
    qtbot.waitUntil(lambda: action.server is not None or action.last_error is not None, timeout=90_000)
    assert action.last_error is None
    server = action.server
    assert server is not None and sorted(server.dirs.local) == ["worker-0", "worker-1"]
    assert f"TensorBoard on {server.url}" in window.statusBar().currentMessage()
    with socket.create_connection(("127.0.0.1", server.port), timeout=5):
        pass  # it answers on its port
    pid = server.pid
    window.close()
    qtbot.waitUntil(lambda: gone(pid), timeout=15_000)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", server.port), timeout=2)
