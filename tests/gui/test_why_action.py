"""The window's *Why is this worker slow?*: its places (the Role menu, the roles table's and a
tile's context menu), its refusals, the verdict and its evidence above the Profile tab's table (fed
a verdict and profiles, no profiler needed), and (slow, real TensorFlow) a between-graph cluster
whose worker:1 sleeps in its input pipeline, asked from the window.

Set TOWERDECK_WHY_SHOT=PATH to save the window from the slow test (docs/why-slow.png)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from PySide6 import QtCore, QtGui

from core.profiling.capture import Capture, RoleCapture
from core.profiling.summary import RoleProfile
from core.profiling.why import Verdict
from core.profiling.why_run import WhyAnswer
from gui.run.tabs.profile import CaptureSummary, ProfilePanel
from tests.helpers.clusters import WHY_CLUSTER, WHY_TRAINER, toml_list
from tests.helpers.past_run import generate_run
from tests.helpers.role_profiles import profile
from tests.helpers.statuses import hosted_status

VERDICT = Verdict(
    "input",
    "worker:1 spends 61% of each step in input (median worker worker:0: 8%)",
    (
        "profiled step time: worker:1 100.0 ms, worker:0 40.0 ms (2.5x)",
        "input: worker:1 61.0 ms (61%), worker:0 3.2 ms (8%)",
    ),
)


def profiles() -> tuple[RoleProfile, RoleProfile]:
    return profile("worker:1", 100.0, input=61.0, host=30.0, other=9.0), profile("worker:0", 40.0, input=3.2, host=30.0)


def test_the_verdict_and_its_evidence_are_above_the_table_and_go_with_another_capture(qtbot) -> None:
    panel = ProfilePanel()
    qtbot.addWidget(panel)
    panel.show_summary(CaptureSummary(Path("/run/profiles/20261125-120000"), profiles(), verdict=VERDICT))
    assert panel.verdict_text().splitlines() == [
        "Why is worker:1 slow? worker:1 spends 61% of each step in input (median worker worker:0: 8%)",
        *VERDICT.evidence,
    ]
    assert "<b>Why is worker:1 slow? worker:1 spends 61%" in panel.verdict.text()
    assert panel.cell("input", "worker:1") == "61.00"
    panel.show_summary(CaptureSummary(Path("/run/profiles/20261125-120100"), profiles()))  # a plain capture
    assert panel.verdict_text() == "" and panel.verdict.isHidden()


@pytest.fixture
def window(qtbot, tmp_path):
    from gui.window.main_window import MainWindow

    window = MainWindow(None, runs_root=tmp_path / "runs")
    qtbot.addWidget(window)
    return window


def test_why_is_in_the_role_menu_the_table_and_a_tiles_menu_with_profile(window) -> None:
    why = window.why
    assert why.action in window.controls.role_menu.actions() and why.action in window.table.actions()
    assert why.action.text() == "Why is this worker slow?"
    assert why.action.shortcut().toString() == "Ctrl+Shift+Y"
    assert why.tile_menu().actions() == [window.profiler.action, why.action]


def test_a_right_click_on_a_tile_selects_its_role_and_asks_for_its_menu(qtbot) -> None:
    from gui.run.overview import ClusterOverview

    view = ClusterOverview()
    qtbot.addWidget(view)
    view.resize(600, 200)
    view.show()
    view.set_roles(
        [
            hosted_status("ps:0", "127.0.0.1"),
            hosted_status("worker:0", "127.0.0.1"),
            hosted_status("worker:1", "127.0.0.1"),
        ]
    )
    qtbot.waitUntil(lambda: view.cell_rect("worker:1") is not None)
    rect = view.cell_rect("worker:1")
    assert rect is not None
    asked: list[str] = []
    view.sig_role_menu.connect(lambda role, _pos: asked.append(role))
    selected: list[str] = []
    view.sig_role_selected.connect(selected.append)
    reason = QtGui.QContextMenuEvent.Reason.Mouse
    QtCore.QCoreApplication.sendEvent(
        view, QtGui.QContextMenuEvent(reason, rect.center(), view.mapToGlobal(rect.center()))
    )
    assert asked == ["worker:1"] and selected == ["worker:1"]
    QtCore.QCoreApplication.sendEvent(view, QtGui.QContextMenuEvent(reason, QtCore.QPoint(1, 1), QtCore.QPoint(1, 1)))
    assert asked == ["worker:1"]  # not on a tile: no menu


def test_why_is_refused_without_a_run_for_a_run_read_back_and_while_a_capture_runs(window, tmp_path) -> None:
    why = window.why
    why.action.trigger()
    assert why.last_message == "why: nothing to profile: launch the cluster first"
    assert window.statusBar().currentMessage() == why.last_message

    run = generate_run(tmp_path / "past", workers=2, seconds=60, hosts=1)
    assert window.open_run(run)
    why.action.trigger()  # no selection needed: the slowest worker is the default
    assert why.last_message.startswith("why: this run is read back from its directory")

    window.profiler.busy = "worker:3"
    why.action.trigger()
    assert why.last_message == "why: a profile of worker:3 is being captured; wait for it before asking another"


def test_an_answer_shows_its_verdict_in_the_profile_tab_and_the_status_bar(window, qtbot, tmp_path) -> None:
    run = generate_run(tmp_path / "past", workers=2, seconds=60, hosts=1)
    assert window.open_run(run)
    folder = run / "profiles" / "20261125-120000"
    folder.mkdir(parents=True)
    (folder / "profile.json").write_text('{"requested": {}, "roles": []}', encoding="utf-8")
    captured = [RoleCapture("worker:1", "127.0.0.1:1", ok=True), RoleCapture("worker:0", "127.0.0.1:2", ok=True)]
    answer = WhyAnswer("worker:1", "worker:0", Capture(folder, 2.0, False, captured), profiles(), VERDICT)
    window.profiler.busy = "worker:1, worker:0"
    window.why.show_answer(answer, None)
    assert window.profiler.busy is None
    assert window.why.last_message == f"why is worker:1 slow? {VERDICT.sentence}"
    panel = window.profiler.panel
    qtbot.waitUntil(lambda: panel.shown is not None and panel.shown.folder == folder, timeout=10_000)
    assert window.tabs.currentWidget() is panel
    assert panel.verdict_text().startswith(f"Why is worker:1 slow? {VERDICT.sentence}")

    lost = [RoleCapture("worker:1", "127.0.0.1:1", ok=False, error="worker:1 gave no trace in 22 s")]
    window.why.show_answer(WhyAnswer("worker:1", "worker:0", Capture(folder, 2.0, False, lost)), None)
    assert window.why.last_message == "why: worker:1 gave no trace in 22 s"


# ---------------------------------------------------------------- real TensorFlow


@pytest.mark.slow
def test_the_worker_with_a_slow_input_pipeline_is_explained_from_the_window(qtbot, tmp_path) -> None:
    from core.cluster.spec import load
    from gui.window.main_window import MainWindow
    from tests.helpers.ports import free_ports
    from tests.helpers.procs import assert_nothing_left
    from tests.helpers.project import TRAINERS

    ports = free_ports(3)
    dataset = [*WHY_TRAINER, "--input=dataset"]
    slow = toml_list([*dataset, "--input_sleep_s=0.05"])
    cluster = tmp_path / "cluster.toml"
    cluster.write_text(WHY_CLUSTER.format(trainers=TRAINERS, p=ports, command=toml_list(dataset), slow=slow))
    spec, _ = load(cluster)
    window = MainWindow(spec, runs_root=tmp_path / "runs")
    qtbot.addWidget(window)
    window.answer_close_question("stop")
    window.resize(1280, 900)
    window.show()
    try:
        window.controls.launch.trigger()
        for role in ("worker:0", "worker:1"):
            qtbot.waitUntil(lambda r=role: window.roles.cell(r, "State").startswith("running"), timeout=180_000)
            qtbot.waitUntil(lambda r=role: "AvgTime" in "".join(window.logs.last_lines(r, 50)), timeout=180_000)
        window.select_role("worker:1")
        window.why.action.trigger()
        assert window.profiler.busy == "worker:1, worker:0"
        window.profiler.action.trigger()  # a Profile while the question runs is refused
        assert "being captured" in window.profiler.last_message
        panel = window.profiler.panel
        qtbot.waitUntil(  # the verdict, or a refusal or failure in the status bar
            lambda: panel.verdict_text() != "" or window.why.last_message.startswith("why:"), timeout=240_000
        )
        text = panel.verdict_text()
        print(text, window.why.last_message)
        first = text.splitlines()[0] if text else window.why.last_message
        verdict = re.fullmatch(
            r"Why is worker:1 slow\? (worker:1 spends (\d+)% of each step in input \(median worker worker:0: (\d+)%\))",
            first,
        )
        assert verdict, first
        assert int(verdict[2]) >= 50 and int(verdict[3]) < int(verdict[2]) / 2, first
        assert window.why.last_message == f"why is worker:1 slow? {verdict[1]}"
        assert window.tabs.currentWidget() is panel
        assert panel.shown is not None and [p.role for p in panel.shown.profiles] == ["worker:1", "worker:0"]
        assert float(panel.cell("input", "worker:1")) > 0  # the table counts input as the verdict does
        if shot := os.environ.get("TOWERDECK_WHY_SHOT"):
            window.resize(1600, 1000)  # the README's screenshots' size
            window.split.setSizes([110, 100, 790])  # room for the verdict and the table
            qtbot.wait(300)
            window.grab().save(shot)
        for role in ("worker:0", "worker:1"):
            assert window.roles.cell(role, "State").startswith("running")  # unharmed
    finally:
        window.stop_all()
        qtbot.waitUntil(lambda: window.source is None or window.source.done, timeout=60_000)
        window.close()
    assert_nothing_left(ports, marker="\0never-matches\0", timeout_s=20)
