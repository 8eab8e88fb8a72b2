"""The GUI thread never waits while the window opens a day-long run, launches a cluster in its place
and closes: the run's close (a reader's join mid-pass, the control socket's) and the launch (a run
directory, its lock file, the socket's bind) run off the GUI thread, the status bar saying so.

What is measured is the GUI thread's own waiting: every call it makes into a function that can
block (a lock and so a join, a sleep, a file, socket or process call), timed by a profile of that
thread alone (tests/helpers/gui_waits.py), less the time this process's threads spent waiting for
a CPU meanwhile. Not the gaps between a timer's ticks, nor the wall time of the window's calls:
on a loaded 2-core machine both stretch with the other processes (the GUI thread waits for a CPU)
and with the reader thread (the GUI thread waits for the GIL between its bytecodes), and this
suite runs on such a machine beside others. A join, a lock held by another thread or a slow disk
is one long call whatever the load, and the joined thread's time on a CPU is not taken away, so
the bound can be tight: the longest such block, in all three phases, is under 50 ms. The old
window blocked 0.6 s in one join when a launch closed a reader in the middle of its pass over a
day-long run (0.5-4 s, with the run's size and the machine).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from core.cluster.spec import parse_text
from tests.helpers.gui_waits import GuiThreadWaits, see_locks
from tests.helpers.past_run import generate_run
from tests.helpers.ports import free_ports
from tests.helpers.procs import assert_nothing_left

WORKERS, DAY_S = 16, 86_400  # a day of 1 Hz metrics each (157 MB): the reader's first pass takes ~1 s
LONGEST_WAIT_S = 0.05


@pytest.mark.timeout(300)
def test_open_launch_and_close_never_wait_on_the_gui_thread(
    qtbot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from core.controller import connections as connections_module
    from core.controller import controller as controller_module
    from core.controller import roles as roles_module
    from core.run import inbox as inbox_module
    from core.run import reader as reader_module
    from gui.window.main_window import MainWindow

    # The locks the GUI thread shares with the run's threads: waits on them are timed too.
    see_locks(monkeypatch, inbox_module, reader_module, controller_module, roles_module, connections_module)

    run = generate_run(tmp_path / "day", workers=WORKERS, seconds=DAY_S, hosts=0)
    (port,) = free_ports(1)
    (tmp_path / "idle.py").write_text("import time\nwhile True:\n    time.sleep(0.1)\n")
    spec, problems = parse_text(
        f'strategy = "custom"\ncommand = ["python", "idle.py"]\nstop_grace_s = 2\n'
        f'[jobs.worker]\ntasks = ["127.0.0.1:{port}"]\n',
        tmp_path / "c.toml",
    )
    assert spec is not None, problems
    window = MainWindow(spec, runs_root=tmp_path / "runs")
    qtbot.addWidget(window)
    window.answer_close_question("stop")
    window.show()
    progress: list[str] = []
    window.binding.sig_progress_changed.connect(progress.append)
    waits = GuiThreadWaits()
    with waits:
        waits.phase = "open"
        assert window.open_run(run)
        reader = window.source
        # Its reader starts after the first frame and skims every worker's day: the launch below
        # lets go of it in the middle of that pass.
        qtbot.waitUntil(
            lambda: window.binding.inbox.pending() > 0 or bool(window.training.figures.loss), timeout=60_000
        )

        waits.phase = "launch"
        window.editor.set_spec(spec)  # the form: the cluster to launch in the past run's place
        qtbot.waitUntil(lambda: window.editor.is_valid and window.controls.launch.isEnabled(), timeout=30_000)
        window.launch()
        # Under way off the GUI thread: said, and nothing else that would replace the run can start.
        assert window.progress_label.text() == "launching..."
        assert not window.controls.launch.isEnabled() and not window.controls.open_run.isEnabled()
        assert not window.controls.attach.isEnabled() and window.source is reader
        qtbot.waitUntil(lambda: window.controller is not None, timeout=60_000)
        qtbot.waitUntil(lambda: window.roles.cell("worker:0", "State") == "running", timeout=60_000)
        assert window.controls.stop_all.isEnabled()
        qtbot.waitUntil(lambda: window.binding.progress() == "", timeout=30_000)  # the reader's close is over

        waits.phase = "close"
        window.close()  # stops the cluster first (the answer given ahead), then closes its session
        qtbot.waitUntil(lambda: not window.isVisible(), timeout=60_000)
        qtbot.waitUntil(lambda: window.binding.progress() == "", timeout=30_000)
    assert f"closing {run.name}..." in progress  # the reader let go of, off the GUI thread
    assert progress[-1] == ""
    assert waits.calls > 0, "the profile saw no waiting call: it did not watch the GUI thread"
    longest = waits.longest
    assert longest is not None and longest.blocked_s < LONGEST_WAIT_S, waits.describe()
    assert_nothing_left([port], marker=str(tmp_path))


@pytest.mark.timeout(60)
def test_the_probe_times_a_join_and_a_held_lock_in_a_slot_not_the_cpu(qtbot, monkeypatch) -> None:
    """The measurement above, checked: a slot that joins a thread, or enters a lock another thread
    holds, is timed as blocked; a slot that only computes is not."""
    import threading
    import time

    from PySide6 import QtCore

    from core.run import inbox as inbox_module

    see_locks(monkeypatch, inbox_module)
    shared = inbox_module.threading.Lock()
    done: list[str] = []

    def join() -> None:
        worker = threading.Thread(target=time.sleep, args=(0.2,))
        worker.start()
        worker.join()
        done.append("join")

    def held() -> None:
        with shared:
            done.append("lock")

    def compute() -> None:
        end = time.thread_time() + 0.2
        while time.thread_time() < end:
            pass
        done.append("compute")

    waits = GuiThreadWaits()
    with waits:
        for phase, slot in (("join", join), ("lock", held), ("compute", compute)):
            waits.phase = phase
            if phase == "lock":
                shared.acquire()
                threading.Timer(0.2, shared.release).start()
            QtCore.QTimer.singleShot(0, slot)
            qtbot.waitUntil(lambda phase=phase: phase in done, timeout=10_000)
    joined, locked, computed = (waits.longest_in(p) for p in ("join", "lock", "compute"))
    assert joined is not None and joined.blocked_s > 0.1, waits.describe()
    assert locked is not None and locked.blocked_s > 0.1, waits.describe()
    assert computed is None or computed.blocked_s < 0.05, waits.describe()
