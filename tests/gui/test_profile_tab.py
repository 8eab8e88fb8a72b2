"""The Profile tab and the window's Profile action: roles side by side with the differences
highlighted (from a recorded xprof table, no profiler needed), stored captures summarised off the
GUI thread and kept, the action's refusals, and (slow) a real cluster profiled from the window."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import pytest

from core.profiling.files import read_record
from core.profiling.summary import OpTime, RoleProfile, format_profiles, parse
from gui.run.tabs.profile import CaptureSummary, ProfilePanel, marked_differences
from tests.helpers.captures import LIGHT, write_record
from tests.helpers.project import ROOT

FIXTURE = ROOT / "tests" / "core" / "fixtures" / "profile" / "tables_one_worker.json"


def recorded(role: str) -> RoleProfile:
    return parse(role, json.loads(FIXTURE.read_text()))


def slower(profile: RoleProfile, role: str, factor: float) -> RoleProfile:
    """The same profile on another role, every time ``factor`` times longer."""
    return dataclasses.replace(
        profile,
        role=role,
        step_times_ms=tuple(t * factor for t in profile.step_times_ms),
        breakdown_ms={k: v * factor for k, v in profile.breakdown_ms.items()},
        top_ops=tuple(OpTime(o.op_type, o.occurrences, o.self_time_ms * factor) for o in profile.top_ops),
    )


def test_two_roles_side_by_side_with_the_differences_the_cli_marks_highlighted(qtbot) -> None:
    panel = ProfilePanel()
    qtbot.addWidget(panel)
    fast = recorded("worker:0")
    slow = slower(fast, "worker:1", 3.0)
    panel.show_summary(CaptureSummary(Path("/run/profiles/20261125-120000"), (fast, slow)))

    assert panel.cell("steps captured", "worker:0") == panel.cell("steps captured", "worker:1") == "30"
    assert panel.cell("step time, mean (ms)", "worker:0") == f"{fast.mean_step_ms:.2f}"
    assert panel.cell("step time, median (ms)", "worker:1") == f"{slow.median_step_ms:.2f}"
    assert panel.cell("host compute", "worker:1") == f"{slow.breakdown_ms['host compute']:.2f}"
    assert panel.cell("_MklMatMul", "worker:0") == f"{fast.op_ms('_MklMatMul'):.2f}"
    # Exactly the rows the CLI's text marks, on the role it names, and nowhere else.
    cli_marked = [line for line in format_profiles([fast, slow]) if "<- 3.0x on worker:1" in line]
    highlighted = panel.highlighted()
    assert len(highlighted) == len(cli_marked) >= 4
    assert {"step time, mean (ms)", "host compute", "_MklMatMul"} <= {label for label, _ in highlighted}
    assert {role for _, role in highlighted} == {"worker:1"}
    assert set(marked_differences([fast, slow])) == {label for label, _ in highlighted}
    text = panel.bottlenecks.text()
    assert "<b>worker:0</b>: 92% of a step is other: Python, I/O, waiting (10.20 ms)" in text
    assert "<b>worker:1</b>: 92% of a step is other: Python, I/O, waiting (30.59 ms)" in text
    # xprof calls them "POTENTIALLY input-bound"; the breakdown puts nothing in input: not shown.
    assert "input-bound" in fast.bottleneck and "input-bound" not in text
    assert panel.message.text() == "profile 20261125-120000: worker:0, worker:1"


def test_equal_roles_have_nothing_highlighted(qtbot) -> None:
    panel = ProfilePanel()
    qtbot.addWidget(panel)
    panel.show_summary(CaptureSummary(Path("/p/x"), (recorded("worker:0"), slower(recorded("x"), "worker:1", 1.2))))
    assert panel.highlighted() == []


def test_stored_captures_are_listed_by_why_and_how_summarised_off_thread_once_and_failures_said(
    qtbot, tmp_path
) -> None:
    run = tmp_path / "run"
    xplane = "worker-0/plugins/profile/s/h_1.xplane.pb"
    refused = "ps:0 refused the connection on 127.0.0.1:9: nothing listens there now"
    asked = {"t": 1795809845.3, "roles": ["worker:0", "ps:0"], "seconds": 2.0, "purpose": "profile", "origin": "window"}
    first = write_record(
        run / "profiles" / "20261125-120000",
        [{"role": "worker:0", "ok": True, "xplane": xplane}, {"role": "ps:0", "ok": False, "error": refused}],
        requested=asked,
    )
    # A capture of an older TowerDeck: no purpose, no origin; its verdict says *why* made it.
    latest = write_record(run / "profiles" / "20261125-120100", [{"role": "worker:1", "ok": True, "xplane": xplane}])
    (latest / "why.json").write_text("{}", encoding="utf-8")
    for folder in (first, latest):  # a real capture: one role traced by xprof (light, step markers)
        (folder / xplane).parent.mkdir(parents=True)
        (folder / xplane).write_bytes(LIGHT.read_bytes())
    panel = ProfilePanel()
    qtbot.addWidget(panel)
    panel.set_run(run)
    qtbot.waitUntil(lambda: panel.shown is not None and panel.shown.folder == latest, timeout=60_000)
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(1795809845.3))
    assert panel.list_texts() == [f"{when}\nprofile, from the window, 2 s\nworker:0", "20261125-120100\nwhy\nworker:1"]
    assert panel.cell("steps captured", "worker:1") == "155"
    assert panel.tensorboard.isEnabled()

    panel.choose(first)
    qtbot.waitUntil(lambda: panel.shown is not None and panel.shown.folder == first, timeout=60_000)
    assert f"not captured: {refused}" in panel.message.text()
    assert panel.message.text().startswith("profile 20261125-120000 (profile, from the window, 2 s): worker:0")
    # Computed once and kept with each capture: what every other view reads back.
    for folder in (first, latest):
        assert read_record(folder).breakdown == panel.cache[folder].profiles
    panel.choose(latest)
    assert panel.shown is not None and panel.shown.folder == latest  # from the cache, at once


def test_a_capture_being_taken_is_listed_as_such_and_named_again_with_its_figures_once_over(qtbot, tmp_path) -> None:
    run = tmp_path / "run"
    folder = run / "profiles" / "20261125-120000"
    asked = {"t": 1795809845.3, "roles": ["worker:0"], "seconds": 2.0, "purpose": "profile", "origin": "cli"}
    write_record(folder, [], requested=asked)  # as a capture writes it when it begins: no outcome yet
    panel = ProfilePanel()
    qtbot.addWidget(panel)
    panel.set_run(run)
    qtbot.waitUntil(lambda: "being captured" in panel.message.text(), timeout=60_000)
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(1795809845.3))
    assert panel.list_texts() == [f"{when}\nprofile, from the CLI, 2 s\nbeing captured: worker:0"]
    assert panel.shown is None and folder not in panel.cache  # nothing kept of a capture not over
    # The capture ends: its role's file and outcome are written; the list is read again.
    xplane = "worker-0/plugins/profile/s/h_1.xplane.pb"
    (folder / xplane).parent.mkdir(parents=True)
    (folder / xplane).write_bytes(LIGHT.read_bytes())
    write_record(folder, [{"role": "worker:0", "ok": True, "xplane": xplane}], requested=asked)
    panel.set_run(run, show=folder)
    qtbot.waitUntil(lambda: panel.shown is not None and panel.shown.folder == folder, timeout=60_000)
    assert panel.list_texts() == [f"{when}\nprofile, from the CLI, 2 s\nworker:0"]
    assert panel.cell("steps captured", "worker:0") == "155"


def test_the_profile_tab_in_view_follows_each_run_the_window_opens(qtbot, tmp_path) -> None:
    from gui.window.main_window import MainWindow
    from tests.helpers.past_run import generate_run

    xplane = "worker-0/plugins/profile/s/h_1.xplane.pb"
    runs = []
    for name, role in (("first", "worker:0"), ("second", "worker:1")):
        run = generate_run(tmp_path / name, workers=2, seconds=60, hosts=1)
        write_record(
            run / "profiles" / "20261125-120000",
            [{"role": role, "ok": True, "xplane": xplane}],
            breakdown=[recorded(role)],  # kept with the capture: xprof is not asked
        )
        runs.append(run)
    window = MainWindow(None, runs_root=tmp_path / "runs")
    qtbot.addWidget(window)
    panel = window.profiler.panel
    window.tabs.setCurrentWidget(panel)  # where the last session left the window
    for run, role in zip(runs, ("worker:0", "worker:1"), strict=True):
        assert window.open_run(run)
        qtbot.waitUntil(
            lambda run=run: panel.shown is not None and panel.shown.folder.parent.parent == run, timeout=30_000
        )
        assert [p.role for p in panel.shown.profiles] == [role] and panel.list_texts()[0].endswith(f"\n{role}")
    window.tabs.setCurrentIndex(0)
    assert window.open_run(runs[0])  # out of view: nothing of the run shown before is left in it
    assert panel.list_texts() == [] and panel.shown is None


def test_an_unreadable_capture_is_one_line_in_the_tab(qtbot, tmp_path) -> None:
    run = tmp_path / "run"
    folder = run / "profiles" / "20261125-120000"
    folder.mkdir(parents=True)
    (folder / "profile.json").write_text("{not json", encoding="utf-8")
    panel = ProfilePanel()
    qtbot.addWidget(panel)
    panel.set_run(run)
    qtbot.waitUntil(lambda: "is unreadable" in panel.message.text(), timeout=10_000)
    assert "\n" not in panel.message.text() and "Traceback" not in panel.message.text()


def test_profile_is_refused_without_a_run_for_a_run_read_back_and_while_one_runs(qtbot, tmp_path) -> None:
    from gui.window.main_window import MainWindow
    from tests.helpers.past_run import generate_run

    window = MainWindow(None, runs_root=tmp_path / "runs")
    qtbot.addWidget(window)
    profiler = window.profiler
    assert profiler.action in window.table.actions() and profiler.action in window.controls.role_menu.actions()
    assert profiler.action.shortcut().toString() == "Ctrl+Shift+F"
    profiler.action.trigger()
    assert profiler.last_message == "profile: nothing to profile: launch the cluster first"
    assert window.statusBar().currentMessage() == profiler.last_message

    run = generate_run(tmp_path / "past", workers=2, seconds=60, hosts=1)
    assert window.open_run(run)
    window.select_role("worker:0")
    profiler.action.trigger()
    assert profiler.last_message == (
        "profile: this run is read back from its directory and not running: only a running role can be profiled"
    )

    profiler.busy = "worker:3"
    profiler.action.trigger()
    assert profiler.last_message == (
        "profile: a profile of worker:3 is being captured; wait for it before asking another"
    )
    window.tabs.setCurrentWidget(profiler.panel)  # the tab follows the run: no capture in it yet
    assert profiler.panel.run_path == run


@pytest.mark.slow
def test_a_worker_of_a_real_cluster_is_profiled_from_the_window(qtbot, tmp_path) -> None:
    from core.cluster.spec import load
    from gui.window.main_window import MainWindow
    from tests.helpers.clusters import between_graph
    from tests.helpers.procs import assert_nothing_left

    cluster, ports = between_graph(tmp_path, steps=100_000_000, sleep=0.005)
    spec, _ = load(cluster)
    window = MainWindow(spec, runs_root=tmp_path / "runs")
    qtbot.addWidget(window)
    window.answer_close_question("stop")
    window.show()
    try:
        window.controls.launch.trigger()
        qtbot.waitUntil(lambda: window.roles.cell("worker:1", "State").startswith("running"), timeout=120_000)
        qtbot.waitUntil(lambda: "Step:" in "".join(window.logs.last_lines("worker:1", 20)), timeout=120_000)
        window.select_role("worker:1")
        window.profiler.action.trigger()
        assert window.profiler.busy == "worker:1"
        window.profiler.action.trigger()  # a second one while the first runs
        assert "being captured" in window.profiler.last_message
        panel = window.profiler.panel
        # A 2 s trace took 2-7 s and the summary about 1 s here; the limit is the capture's own.
        qtbot.waitUntil(lambda: panel.shown is not None and bool(panel.shown.profiles), timeout=120_000)
        assert window.tabs.currentWidget() is panel
        assert panel.shown is not None
        profile = panel.shown.profiles[0]
        assert profile.role == "worker:1" and profile.steps > 0
        assert int(panel.cell("steps captured", "worker:1")) == profile.steps
        assert window.profiler.last_message.startswith("profiled worker:1 into ")
        assert window.roles.cell("worker:1", "State").startswith("running")  # unharmed
    finally:
        window.stop_all()
        qtbot.waitUntil(lambda: window.source is None or window.source.done, timeout=60_000)
        window.close()
    assert_nothing_left(ports, marker="\0never-matches\0", timeout_s=20)


def test_a_stored_why_capture_reopens_with_its_verdict_and_a_plain_one_without(qtbot, tmp_path) -> None:
    from core.profiling.why import Verdict
    from core.profiling.why_record import WhyRecord, save_why

    run = tmp_path / "run"
    xplane = "w/plugins/profile/s/h_1.xplane.pb"
    roles = [{"role": r, "ok": True, "xplane": xplane} for r in ("worker:0", "worker:1")]
    # Each capture's breakdown as kept with it, in the order the capture lists its roles.
    breakdown = [recorded("worker:0"), slower(recorded("x"), "worker:1", 3)]
    why = write_record(run / "profiles" / "20261125-120000", roles, breakdown=breakdown)
    verdict = Verdict("host compute", "worker:1 spends 90% of each step in host compute", ("profiled step time: x",))
    save_why(why, WhyRecord("worker:1", "worker:0", verdict))
    plain = write_record(run / "profiles" / "20261125-120100", roles, breakdown=breakdown)
    broken = write_record(run / "profiles" / "20261125-120200", roles, breakdown=breakdown)
    (broken / "why.json").write_text("{half", encoding="utf-8")
    panel = ProfilePanel()
    qtbot.addWidget(panel)
    panel.set_run(run)
    qtbot.waitUntil(lambda: panel.shown is not None and panel.shown.folder == broken, timeout=10_000)
    assert panel.verdict_text() == "" and panel.cell("steps captured", "worker:1") == "30"
    assert f"{broken / 'why.json'} is unreadable" in panel.message.text()

    panel.choose(plain)
    qtbot.waitUntil(lambda: panel.shown is not None and panel.shown.folder == plain, timeout=10_000)
    assert panel.verdict_text() == "" and panel.verdict.isHidden()
    assert panel.message.text() == "profile 20261125-120100 (profile): worker:0, worker:1"

    panel.choose(why)
    qtbot.waitUntil(lambda: panel.shown is not None and panel.shown.folder == why, timeout=10_000)
    assert panel.verdict_text().splitlines() == [
        "Why is worker:1 slow? worker:1 spends 90% of each step in host compute",
        "profiled step time: x",
    ]
    assert not panel.verdict.isHidden()
    assert panel.message.text() == "profile 20261125-120000 (why): worker:1, worker:0"  # the straggler first
