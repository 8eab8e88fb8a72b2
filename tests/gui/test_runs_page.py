"""The window's Runs page and compare view (issue 23), driven like a user, on real light-trainer runs."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import psutil
import pytest

from core.cluster.spec import load
from core.run import index as runs_index
from core.views.rates import GLOBAL, label, summary_rates
from tests.helpers.cli_launch import launching, role_pids
from tests.helpers.clusters import FLAG_NOTE, cluster_file, one_flag_apart
from tests.helpers.ports import free_ports
from tests.helpers.procs import assert_nothing_left, gone
from tests.helpers.project import run_cli

pytestmark = pytest.mark.slow


def shown(page) -> list[list[str]]:  # type: ignore[no-untyped-def]
    proxy = page.proxy
    return [[str(proxy.index(r, c).data()) for c in range(proxy.columnCount())] for r in range(proxy.rowCount())]


def column(page, name: str) -> list[str]:  # type: ignore[no-untyped-def]
    from gui.runs.runs_page import HEADERS

    return [row[HEADERS.index(name)] for row in shown(page)]


@pytest.fixture
def three_runs(tmp_path: Path) -> dict[str, str]:
    """Three finished runs: 2 workers, 3 workers, and one whose worker exits 3."""
    assert run_cli("launch", str(cluster_file(tmp_path, "two", 2))).returncode == 0
    assert run_cli("launch", str(cluster_file(tmp_path, "three", 3, steps=40))).returncode == 0
    bad = 'command = ["python", "-c", "import sys; print(\'Step: 1,  Cost: 2.5\', flush=True); sys.exit(3)"]'
    assert run_cli("launch", str(cluster_file(tmp_path, "broken", 1, worker_command=bad))).returncode == 1
    root = Path(os.environ["TOWERDECK_DATA_DIR"]) / "runs"
    return {p.name.split("-")[2]: p.name for p in root.iterdir()}


def window_on_runs(qtbot):  # type: ignore[no-untyped-def]
    from gui.window.main_window import MainWindow

    window = MainWindow(None, runs_root=Path(os.environ["TOWERDECK_DATA_DIR"]) / "runs")
    qtbot.addWidget(window)
    window.show()
    page = window.runs_page
    with qtbot.waitSignal(page.sig_loaded, timeout=30_000):
        window.pages.setCurrentWidget(page)  # showing the page reads the runs, off the GUI thread
    return window, page


def test_runs_page_sorts_filters_opens_compares_and_deletes(qtbot, three_runs: dict[str, str]) -> None:
    window, page = window_on_runs(qtbot)
    assert sorted(column(page, "Run")) == sorted(three_runs.values())
    assert column(page, "Run")[0] == three_runs["broken"]  # newest first
    outcomes = dict(zip(column(page, "Run"), column(page, "Outcome"), strict=True))
    assert outcomes[three_runs["broken"]] == "failed (worker:0 exit 3)"
    assert outcomes[three_runs["two"]] == "succeeded"

    page.table.sortByColumn(5, page.table.horizontalHeader().sortIndicatorOrder().AscendingOrder)  # Roles
    assert column(page, "Roles") == ["1 ps, 1 worker", "1 ps, 2 worker", "1 ps, 3 worker"]
    page.outcome_box.setCurrentIndex(page.outcome_box.findData("failed"))
    assert column(page, "Run") == [three_runs["broken"]]
    page.outcome_box.setCurrentIndex(0)
    qtbot.keyClicks(page.filter_edit, "THREE")  # case-insensitive, anywhere in the row
    assert column(page, "Run") == [three_runs["three"]] and "1 of 3 runs" in page.count_label.text()
    page.filter_edit.clear()

    # Compare needs 2-8 selected; the view overlays both runs and highlights what differs.
    page.select_ids([three_runs["two"]])
    assert not page.buttons["Compare"].isEnabled() and page.buttons["Open"].isEnabled()
    assert not page.buttons["Attach"].isEnabled()  # finished: nothing to attach to
    page.select_ids([three_runs["two"], three_runs["three"]])
    assert page.buttons["Compare"].isEnabled() and not page.buttons["Open"].isEnabled()
    page.buttons["Compare"].click()
    assert len(window.runs.compare_views) == 1
    view = window.runs.compare_views[0]
    qtbot.waitUntil(lambda: bool(view.rows), timeout=30_000)
    differing = view.differing_labels()
    assert "cluster shape" in differing and "worker:2 host" in differing and "strategy" not in differing
    assert view.table.columnCount() == 2
    # The 2-worker run draws a line per worker; the 3-worker one its median and min-max band.
    assert sorted(view.drawn["loss"]) == sorted(
        [(three_runs["two"], "worker:0"), (three_runs["two"], "worker:1"), (three_runs["three"], "band")]
    )
    assert view.drawn[label(GLOBAL)] and "median and min-max of 3" in view.key_text()
    view.x_box.setCurrentIndex(1)  # by time since start
    assert view.plots["loss"].getPlotItem().getAxis("bottom").labelText == "seconds since start"
    view.only_diff.setChecked(True)
    assert view.table.rowCount() == len(differing)
    view.close()

    # Open: the existing open-run path shows it on the Run page.
    page.select_ids([three_runs["two"]])
    page.buttons["Open"].click()
    assert window.source is not None and window.source.path.name == three_runs["two"]
    assert window.pages.currentWidget() is window.monitor

    # Delete asks first; "no" keeps the run.
    window.pages.setCurrentWidget(page)
    qtbot.waitUntil(lambda: not page._loading, timeout=30_000)
    broken = Path(os.environ["TOWERDECK_DATA_DIR"]) / "runs" / three_runs["broken"]
    asked: list[str] = []
    page.confirm = lambda title, text: asked.append(text) is not None
    page.select_ids([three_runs["broken"]])
    page.buttons["Delete"].click()
    assert asked and three_runs["broken"] in asked[0] and broken.exists()
    page.confirm = lambda title, text: True
    with qtbot.waitSignal(page.sig_loaded, timeout=30_000):
        page.buttons["Delete"].click()
    assert not broken.exists() and three_runs["broken"] not in column(page, "Run")


def test_runs_page_columns_fit_and_compare_shows_the_one_flag(qtbot, tmp_path: Path) -> None:
    """At 1600 px the Runs page's columns fit their content on one line (no wrapped run id), a
    long value is elided in its middle with the whole in its tooltip, each hyperparameter is a
    column; the compare view of two runs one flag apart shows that flag as their one difference
    in what they were given, and never which run is which as a difference."""
    from PySide6 import QtCore

    from core.views.compare_table import CONFIG
    from gui.runs.runs_page import MAX_COLUMN_PX

    one_flag_apart(tmp_path)
    from gui.window.main_window import MainWindow

    window = MainWindow(None, runs_root=Path(os.environ["TOWERDECK_DATA_DIR"]) / "runs")
    qtbot.addWidget(window)
    window.resize(1600, 1000)
    window.show()
    page = window.runs_page
    with qtbot.waitSignal(page.sig_loaded, timeout=30_000):
        window.pages.setCurrentWidget(page)
    table, header, model = page.table, page.table.horizontalHeader(), page.model
    assert model.headers[-4:] == ["--steps", "--rate_hz", "--learning_rate", "[env] NOTE"]
    rates = [row[model.headers.index("--learning_rate")] for row in shown(page)]
    assert sorted(rates) == ["0.1", "0.3"]
    assert not table.wordWrap() and table.textElideMode() == QtCore.Qt.TextElideMode.ElideMiddle
    for c in range(model.columnCount()):
        needed = max(table.sizeHintForColumn(c), header.sectionSizeHint(c))
        assert header.sectionSize(c) >= min(needed, MAX_COLUMN_PX), model.headers[c]
    note = model.headers.index("[env] NOTE")
    assert header.sectionSize(note) == MAX_COLUMN_PX  # the long note: elided, whole in the tooltip
    cell = page.proxy.index(0, note)
    assert cell.data() == FLAG_NOTE and cell.data(QtCore.Qt.ItemDataRole.ToolTipRole) == FLAG_NOTE
    assert header.length() <= table.viewport().width()  # everything in view at 1600 px

    page.select_ids([r.id for r in model.runs])
    page.buttons["Compare"].click()
    view = window.runs.compare_views[-1]
    qtbot.waitUntil(lambda: bool(view.rows) or bool(view.error), timeout=30_000)
    assert not view.error
    assert [r.label for r in view.rows if r.differs and r.kind == CONFIG] == ["--learning_rate"]
    view.only_diff.setChecked(True)
    shown_rows = [view.table.verticalHeaderItem(i).text() for i in range(view.table.rowCount())]
    assert "* --learning_rate" in shown_rows
    assert not {"* started", "* duration", "* name", "* run", "started", "duration", "name"} & set(shown_rows)
    # Step times in ms, as people write them (40 steps a second: about 25 ms), never "s (x0.001)".
    step_plot = view.plots["step time"].getPlotItem()
    assert step_plot.getAxis("left").labelText == "ms" and not step_plot.getAxis("left").autoSIPrefix
    ys = np.concatenate([item.getData()[1] for item in step_plot.listDataItems()])
    assert 5 < float(np.nanmedian(ys)) < 500
    view.close()


@pytest.mark.timeout(420)  # the whole test took 3 minutes at load 13
def test_runs_page_opens_the_selected_runs_in_one_tensorboard(qtbot, tmp_path: Path) -> None:
    """The Runs page's *TensorBoard*: the selected runs in one real TensorBoard, each role named
    ``<run name>/<role>``; stopped with the window's TensorBoard, nothing is left."""
    import json
    import urllib.request

    from tests.helpers.event_runs import run_with_events
    from tests.helpers.waits import wait_for

    root = tmp_path / "runs"
    run_with_events(root / "exp-a", name="exp-a")
    run_with_events(root / "exp-b", name="exp-b")
    from gui.window.main_window import MainWindow

    window = MainWindow(None, runs_root=root)
    qtbot.addWidget(window)
    window.show()
    page = window.runs_page
    with qtbot.waitSignal(page.sig_loaded, timeout=30_000):
        window.pages.setCurrentWidget(page)
    assert not page.buttons["TensorBoard"].isEnabled()
    page.select_ids(["exp-a", "exp-b"])
    assert page.buttons["TensorBoard"].isEnabled()
    action = window.tensorboard
    action.open_browser = False
    page.buttons["TensorBoard"].click()
    qtbot.waitUntil(lambda: action.server is not None or action.last_error is not None, timeout=120_000)
    assert action.server is not None, action.last_error
    server = action.server
    pid, home = server.pid, server.home

    def runs() -> list[str]:
        with urllib.request.urlopen(server.url + "data/runs", timeout=10) as reply:  # 127.0.0.1 only
            return sorted(json.loads(reply.read()))

    wait_for(lambda: runs() == ["exp-a/worker-0", "exp-b/worker-0"], timeout_s=60, what="both runs in TensorBoard")
    assert server.url in window.statusBar().currentMessage()
    action.stop()
    qtbot.waitUntil(lambda: gone(pid), timeout=30_000)
    qtbot.waitUntil(lambda: not home.exists(), timeout=30_000)
    assert (root / "exp-a" / "roles" / "worker-0" / "tensorboard").is_dir()  # the links went, not the files


def test_a_live_run_is_attached_never_deleted(qtbot, tmp_path: Path) -> None:
    with launching(cluster_file(tmp_path, "forever", 1, steps=0)) as launcher:
        window, page = window_on_runs(qtbot)

        def live_listed() -> bool:
            page.refresh()
            return column(page, "Outcome")[:1] == [f"running (pid {launcher.pid})"]

        qtbot.waitUntil(live_listed, timeout=60_000)
        page.select_ids(column(page, "Run"))
        assert not page.buttons["Delete"].isEnabled() and not page.buttons["Archive"].isEnabled()
        page.confirm = lambda title, text: True
        page.delete_selected()  # even asked directly, a live run stays
        assert page.buttons["Attach"].isEnabled()
        page.buttons["Attach"].click()
        source = window.source
        assert source is not None and source.path.name == column(page, "Run")[0]
        # Its launcher holds it: the window controls it through the launcher's socket.
        qtbot.waitUntil(lambda: not source.done and source.control_socket() is not None, timeout=10_000)
        future = source.stop_all()
        qtbot.waitUntil(future.done, timeout=30_000)
        assert launcher.wait(60) is not None
        assert source.path.exists()


def test_a_left_run_is_taken_over_from_the_runs_page(qtbot, tmp_path: Path) -> None:
    path = cluster_file(tmp_path, "kept", 1, steps=0)
    with launching(path, "--on-disconnect", "keep") as launcher:
        root = Path(os.environ["TOWERDECK_DATA_DIR"]) / "runs"
        qtbot.waitUntil(lambda: any(root.glob("*/roles/worker-0/metrics.jsonl")), timeout=60_000)
        launcher.send_signal(signal.SIGKILL)  # the launcher dies; its agent keeps the roles
        launcher.wait()
    window, page = window_on_runs(qtbot)
    assert column(page, "Outcome") == ["left (launcher gone)"]
    page.select_ids(column(page, "Run"))
    assert page.buttons["Attach"].isEnabled() and page.buttons["Delete"].isEnabled()
    page.buttons["Attach"].click()  # opens it, then attaches once the reader knows it is left
    qtbot.waitUntil(lambda: window.session is not None, timeout=30_000)
    source = window.source
    assert source is not None and source.controls_here and source.path.parent == root
    qtbot.waitUntil(lambda: "running" in window.controls.phase_label.text(), timeout=30_000)
    window.stop_all()
    qtbot.waitUntil(lambda: source.done, timeout=60_000)
    spec, _ = load(path)
    assert spec is not None
    assert_nothing_left([t.port for t in spec.tasks()], str(tmp_path), timeout_s=20)  # the agent, the ports
    pids = role_pids(source.path)
    assert len(pids) == 2 and not any(psutil.pid_exists(p) for p in pids)
    window.pages.setCurrentWidget(window.monitor)
    with qtbot.waitSignal(page.sig_loaded, timeout=30_000):
        window.pages.setCurrentWidget(page)
    assert column(page, "Outcome") == ["stopped"]


TB_ONLY = """
name = "{name}"
strategy = "multi_worker_mirrored"
launch_style = "tf_config"
workdir = "{trainers}"
command = ["python", "-u", "tb_only_trainer.py", "--logdir={{tb_dir}}", "--steps=40", "--step_sleep=0.01"]
stop_grace_s = 3
[jobs.worker]
tasks = [{tasks}]
"""


def test_tensorboard_only_runs_compare_on_their_scalars(qtbot, tmp_path: Path) -> None:
    """Real TensorFlow runs that print no loss line (TF2's usual way): their loss and speed come
    from their TensorBoard scalars, and the compare view offers every tag they wrote."""
    from gui.runs.compare import SCALAR_PLOT, CompareView
    from tests.helpers.project import TRAINERS

    ids = []
    for name, workers in (("tb1", 1), ("tb2", 2)):
        path = tmp_path / f"{name}.toml"
        tasks = ", ".join(f'"127.0.0.1:{p}"' for p in free_ports(workers))
        path.write_text(TB_ONLY.format(name=name, trainers=TRAINERS, tasks=tasks))
        result = run_cli("launch", str(path), "--run-dir", str(tmp_path / "runs" / name), "--progress-every", "0")
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
        ids.append(tmp_path / "runs" / name)
    for run in ids:
        summary = runs_index.summarize(run)
        assert summary is not None and summary.outcome == "succeeded"
        assert summary.last_loss is not None and summary.best_loss is not None
        assert summary_rates(summary).global_steps_per_s
        assert summary.role_figures["worker:0"].steps is not None and summary.role_figures["worker:0"].steps >= 30

    view = CompareView(ids)
    qtbot.addWidget(view)
    view.show()
    qtbot.waitUntil(lambda: bool(view.rows) or bool(view.error), timeout=30_000)
    assert not view.error
    tags = [view.tag_box.itemText(i) for i in range(view.tag_box.count())]
    # The loss plot is drawn from the "loss" tag: a "TensorBoard: loss" plot would repeat it.
    assert "loss" not in tags and "learning_rate" in tags
    assert sorted(run for run, _ in view.drawn["loss"]) == ["tb1", "tb2", "tb2"]  # from the scalars
    assert view.plots[SCALAR_PLOT].getPlotItem().titleLabel.text == "TensorBoard: learning_rate"
    view.tag_box.setCurrentIndex(tags.index("learning_rate"))
    assert sorted(view.drawn[SCALAR_PLOT]) == [("tb1", "worker:0"), ("tb2", "worker:0"), ("tb2", "worker:1")]
    assert "cluster shape" in view.differing_labels()


def test_a_thousand_runs_load_off_the_gui_thread_and_sort(qtbot, tmp_path: Path) -> None:
    from PySide6 import QtCore

    from gui.window.main_window import MainWindow
    from tests.helpers.run_copies import make_runs

    template = tmp_path / "template"
    assert run_cli("launch", str(cluster_file(tmp_path, "tmpl", 2)), "--run-dir", str(template)).returncode == 0
    root = tmp_path / "many"
    make_runs(template, root, 1000)
    window = MainWindow(None, runs_root=root)
    qtbot.addWidget(window)
    window.show()
    page = window.runs_page
    ticks: list[int] = []
    timer = QtCore.QTimer(window)
    timer.timeout.connect(lambda: ticks.append(len(page.model.runs)))
    timer.start(20)
    with qtbot.waitSignal(page.sig_loaded, timeout=120_000):
        window.pages.setCurrentWidget(page)  # the first listing builds 1,000 summaries: off this thread
    timer.stop()
    assert ticks and ticks[0] == 0  # the GUI thread went on while they were read
    assert page.proxy.rowCount() == 1000 and column(page, "Run")[0] == "run-0999"
    page.outcome_box.setCurrentIndex(page.outcome_box.findData("stopped"))
    assert page.proxy.rowCount() == 333 and set(column(page, "Outcome")) == {"stopped"}
    page.table.sortByColumn(0, QtCore.Qt.SortOrder.AscendingOrder)
    assert column(page, "Run")[:2] == ["run-0002", "run-0005"]
