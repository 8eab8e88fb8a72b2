"""Work off the GUI thread (gui/offthread.py): each kind of job on a thread named for what it does,
jobs that must keep their order on one thread, outcomes back on the GUI thread, a launch nobody
took stopped rather than left, and a close still queued at exit finished before the process ends."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest
from PySide6 import QtCore

from tests.helpers.project import ROOT


@pytest.mark.timeout(60)
def test_each_kind_of_job_runs_on_a_thread_named_for_it(qtbot) -> None:
    from gui.offthread import Relay, run_off_thread

    owner = QtCore.QObject()
    relay = Relay(owner)
    seen: dict[str, tuple[str, bool]] = {}
    for kind in ("export-csv", "profile-capture", "editor-io"):

        def done(result: object, error: BaseException | None, kind: str = kind) -> None:
            assert error is None
            on_gui = threading.current_thread() is threading.main_thread()
            seen[kind] = (str(result), on_gui)

        run_off_thread(relay, lambda: threading.current_thread().name, done, name=kind)
    qtbot.waitUntil(lambda: len(seen) == 3, timeout=20_000)
    assert seen == {kind: (kind, True) for kind in ("export-csv", "profile-capture", "editor-io")}


@pytest.mark.timeout(60)
def test_serial_jobs_run_in_order_on_one_thread_and_answer_on_the_gui_thread(qtbot) -> None:
    from gui.offthread import Relay, SerialJobs

    owner = QtCore.QObject()
    jobs = SerialJobs(Relay(owner), "window-run-switch")
    gate = threading.Event()
    ran: list[tuple[int, str]] = []
    answered: list[tuple[int, bool]] = []

    def job(n: int) -> int:
        if n == 0:
            gate.wait(10)  # the first job is slow (a reader's join): the others wait behind it
        ran.append((n, threading.current_thread().name))
        return n

    for n in range(4):
        jobs.submit(
            lambda n=n: job(n), lambda r, e: answered.append((r, threading.current_thread() is threading.main_thread()))
        )
    assert ran == []
    gate.set()
    qtbot.waitUntil(lambda: len(answered) == 4, timeout=20_000)
    assert [n for n, _ in ran] == [0, 1, 2, 3]
    assert {name for _, name in ran} == {"window-run-switch"}
    assert answered == [(n, True) for n in range(4)]
    jobs.shutdown()


@pytest.mark.timeout(60)
def test_an_outcome_nobody_can_take_goes_to_undelivered(qtbot) -> None:
    """A launch that lands after its window was deleted: its session is handed to ``undelivered``
    (which stops it), not dropped with its roles running."""
    from shiboken6 import delete

    from gui.offthread import Relay, SerialJobs

    owner = QtCore.QObject()
    jobs = SerialJobs(Relay(owner), "window-run-switch")
    gate = threading.Event()
    abandoned: list[object] = []
    delivered: list[object] = []
    jobs.submit(lambda: gate.wait(10) and "session", lambda r, e: delivered.append(r), undelivered=abandoned.append)
    delete(owner)  # the window (and its relay) gone while the job runs
    gate.set()
    qtbot.waitUntil(lambda: abandoned == ["session"], timeout=20_000)
    qtbot.wait(50)
    assert delivered == []


@pytest.mark.timeout(120)
def test_jobs_still_queued_at_exit_finish_before_the_process_ends(tmp_path: Path) -> None:
    """A run's close (its lock, its control socket) queued as the window goes is done before the
    process exits, though the job thread is a daemon (one idle never holds the exit)."""
    marker = tmp_path / "closed"
    script = (
        "import sys, time\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from gui.offthread import JobThread\n"
        "jobs = JobThread('window-run-switch')\n"
        "jobs.submit(time.sleep, 0.5)\n"
        f"jobs.submit(lambda: open({str(marker)!r}, 'w').write('done'))\n"
        "idle = JobThread('window-reads')\n"
        "idle.submit(lambda: None)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert marker.read_text() == "done"
