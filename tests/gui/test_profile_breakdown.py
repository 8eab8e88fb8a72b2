"""One capture, one breakdown, in every view: ``ctl RUN profile``, ``ctl RUN why``,
``profile-summary``, the window's Profile tab and its verdict box show the same figures for a
recorded capture of a worker slowed in its tf.data pipeline (tests/helpers/captures.py; xprof in
the profiler environment, no TensorFlow). The tab lists the capture by why and how it was taken,
and opens it in TensorBoard's Profile tab (the profiler environment's TensorBoard, really started
and stopped)."""

from __future__ import annotations

import gzip
import io
import json
import re
import time
import urllib.request
from pathlib import Path

import pytest
from PySide6 import QtCore

from core.cli.profile import report_capture, why_lines
from core.profiling.capture import Capture, RoleCapture
from core.profiling.files import read_record
from core.profiling.summary import profile_notes, table_rows
from core.profiling.why import RoleFacts
from core.profiling.why_run import judge
from gui.run.tabs.profile import ProfilePanel
from tests.helpers.captures import recorded_capture
from tests.helpers.past_run import generate_run
from tests.helpers.procs import assert_nothing_left, gone
from tests.helpers.project import run_cli


def table(lines: list[str]) -> dict[str, list[str]]:
    """The CLI's side-by-side table: a row's label -> its cells, one per role."""
    rows: dict[str, list[str]] = {}
    for line in lines:
        label, cells = line[:40].strip(), line[40:].split("<-")[0].split()
        if label and cells and not label.endswith(":") and not re.match(r"\w+:\d+: ", line):
            rows[label] = cells
    return rows


def as_capture(folder: Path) -> Capture:
    """The capture in ``folder`` as :func:`core.profiling.capture.capture` returns it."""
    record = read_record(folder)
    roles = [
        RoleCapture(role, "127.0.0.1:2222", ok=True, xplane=str(path.relative_to(folder)))
        for role, path in record.xplanes.items()
    ]
    return Capture(folder, record.seconds or 0.0, False, roles)


@pytest.mark.timeout(300)
def test_every_view_of_one_capture_shows_the_same_breakdown(qtbot, tmp_path: Path) -> None:
    run = tmp_path / "run"
    folder = recorded_capture(run / "profiles" / "20261127-200405", ("worker:1", "worker:0"), purpose="why")
    # ctl RUN why, from its capture on: the breakdown computed and kept, the verdict given on it.
    answer = judge(as_capture(folder), RoleFacts("worker:1"), RoleFacts("worker:0"))
    assert answer.verdict is not None and answer.problem is None, answer.refusal()
    why_text = why_lines(answer)
    # ctl RUN profile, printing the same capture.
    out, err = io.StringIO(), io.StringIO()
    assert report_capture(as_capture(folder), out, err) == 0, err.getvalue()
    profile_text = out.getvalue().splitlines()
    # profile-summary, reopening it later in another process.
    summary = run_cli("profile-summary", str(folder), timeout=180)
    assert summary.returncode == 0 and summary.stderr == "", summary.stdout + summary.stderr
    summary_text = summary.stdout.splitlines()
    # The window's Profile tab, reopening it in a panel of its own.
    panel = ProfilePanel()
    qtbot.addWidget(panel)
    panel.set_run(run)
    qtbot.waitUntil(lambda: panel.shown is not None and panel.shown.folder == folder, timeout=120_000)

    stored = read_record(folder).breakdown
    assert stored is not None and [p.role for p in stored] == ["worker:1", "worker:0"]
    assert stored == answer.profiles  # the figures the verdict was given on are the ones kept
    roles = [p.role for p in stored]
    views = {"ctl why": table(why_text), "ctl profile": table(profile_text), "profile-summary": table(summary_text)}
    rows = [r for r in table_rows(stored) if r.values is not None]
    assert {"input", "other: Python, I/O, waiting", "Dataset"} <= {r.label for r in rows}
    for row in rows:
        assert row.values is not None
        expected = ["-" if v is None else f"{v:.2f}" for v in row.values]
        for view, cells in views.items():
            assert cells[row.label] == expected, (view, row.label)
        assert [panel.cell(row.label, role) for role in roles] == expected, ("Profile tab", row.label)
    assert float(views["profile-summary"]["input"][0]) > 50.0  # tf.data's wait, counted as input everywhere

    # The verdict: the same sentence and evidence in ctl why, profile-summary and the verdict box...
    verdict = [f"why is worker:1 slow? {answer.verdict.sentence}", *(f"  {e}" for e in answer.verdict.evidence)]
    assert why_text[-len(verdict) :] == verdict
    assert summary_text[-len(verdict) :] == verdict
    box = panel.verdict_text().splitlines()
    assert box == [f"Why is worker:1 slow? {answer.verdict.sentence}", *answer.verdict.evidence]
    # ...and its figures are the table's, to the precision it gives them.
    by_role = {p.role: p for p in stored}
    for line in answer.verdict.evidence:
        m = re.fullmatch(
            r"(input|host compute|other: Python, I/O, waiting): worker:1 ([\d.]+) ms .*, worker:0 ([\d.]+) ms .*", line
        )
        if m:
            assert m[2] == f"{by_role['worker:1'].breakdown_ms[m[1]]:.1f}"
            assert m[3] == f"{by_role['worker:0'].breakdown_ms[m[1]]:.1f}"
    share = re.search(r"spends (\d+)% of each step in input", answer.verdict.sentence)
    assert share and int(share[1]) == round(
        100 * by_role["worker:1"].breakdown_ms["input"] / by_role["worker:1"].mean_step_ms
    )
    # What is said under the table (whose input is tf.data's, each role's notes): the same everywhere.
    notes = profile_notes(stored)
    assert notes[0].startswith("input of worker:1, worker:0: the time of tf.data's ops")
    for text in (why_text, profile_text, summary_text):
        start = text.index(notes[0])
        assert text[start : start + len(notes)] == notes
    assert panel.notes_text() == notes


@pytest.mark.timeout(300)
def test_the_capture_list_names_roles_why_and_length_and_opens_the_capture_in_tensorboard(
    qtbot, tmp_path: Path
) -> None:
    from gui.window.main_window import MainWindow

    run = generate_run(tmp_path / "past", workers=2, seconds=60, hosts=1)
    first = recorded_capture(
        run / "profiles" / "20261127-200405", ("worker:0", "worker:1"), purpose="profile", origin="window", seconds=2
    )
    why = recorded_capture(
        run / "profiles" / "20261127-200419", ("worker:1", "worker:0"), purpose="why", origin="cli", seconds=1
    )
    window = MainWindow(None, runs_root=tmp_path / "runs")
    qtbot.addWidget(window)
    profiler = window.profiler
    profiler.open_browser = False
    assert window.open_run(run)
    window.tabs.setCurrentWidget(profiler.panel)
    panel = profiler.panel
    qtbot.waitUntil(lambda: panel.shown is not None and panel.shown.folder == why, timeout=120_000)
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(1795809845.3))
    assert panel.list_texts() == [
        f"{when}\nprofile, from the window, 2 s\nworker:0, worker:1",
        f"{when}\nwhy, from the CLI, 1 s\nworker:1, worker:0",
    ]
    panel.choose(first)
    assert panel.tensorboard.isEnabled() and panel.tensorboard.text() == "Open in TensorBoard"
    qtbot.mouseClick(panel.tensorboard, QtCore.Qt.MouseButton.LeftButton)
    assert not panel.tensorboard.isEnabled()  # while it starts
    qtbot.waitUntil(lambda: profiler.tensorboard is not None or profiler.tensorboard_error is not None, timeout=180_000)
    server = profiler.tensorboard
    assert server is not None, profiler.tensorboard_error
    url = f"http://127.0.0.1:{server.port}/#profile"
    assert panel.tensorboard_note.text() == f"TensorBoard: {url}" and profiler.last_message.endswith(url)
    with urllib.request.urlopen(f"{server.url}data/plugin/profile/runs", timeout=30) as reply:
        body = reply.read()
        runs = json.loads(gzip.decompress(body) if reply.headers.get("Content-Encoding") == "gzip" else body)
    assert sorted(r.split("/")[0] for r in runs) == ["worker-0", "worker-1"]  # this capture's roles, alone
    assert panel.tensorboard.isEnabled()
    pid, port = server.pid, server.port

    other = generate_run(tmp_path / "other", workers=2, seconds=60, hosts=1)
    assert window.open_run(other)  # another run: the capture's TensorBoard goes with the one it showed
    assert profiler.tensorboard is None and panel.tensorboard_note.text() == ""
    qtbot.waitUntil(lambda: gone(pid), timeout=30_000)
    assert_nothing_left([port], marker="\0never-matches\0", timeout_s=20)
