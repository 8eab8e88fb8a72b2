"""How long the GUI thread's event loop ever stands still while the window follows a live run of
1 ps + 64 light workers on 8 loopback hosts (scripts/scale_cluster.py, the NVML double for 8 GPUs
a host), cycling through the Run page's tabs every few seconds so every panel draws. Also counts
Python's garbage collections by thread (all must be on the GUI thread, gui/window/collector.py).

Run from the repo root, in a real window under Xvfb (DURATION_S defaults to 120; with no DISPLAY
it starts itself under `xvfb-run`, as in `make bench`):

    DURATION_S=600 xvfb-run -a -s "-screen 0 1920x1200x24" .venv/bin/python benchmarks/bench_event_loop_gap.py

and, for a loaded machine, `stress-ng --cpu 2` beside it. PROFILE=N prints the N functions that
took the GUI thread longest (cProfile on it: slower, so not for the figures). STACKS=N prints the
N stacks the GUI thread was seen in most while its event loop stood still over 300 ms (sampled
every 20 ms from another thread: what the long gaps were spent on). The window starts
on the Training tab with settings of its own (a temporary TOWERDECK_SETTINGS_DIR), so runs compare.
"""

from __future__ import annotations

import collections
import cProfile
import os
import pstats
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TOWERDECK_NVML_MODULE", str(ROOT / "tests" / "helpers" / "fake_nvml.py"))
os.environ.setdefault("FAKE_NVML_GPUS", "8")
os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")

if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY") or os.environ.get("QT_QPA_PLATFORM")):
    # `make bench` runs every benchmark, on a machine that may have no display: this one measures a
    # real window, so it starts itself under Xvfb (Debian's xvfb, which `make sysdeps` installs).
    import shutil

    if shutil.which("xvfb-run") is None:
        print(
            "bench_event_loop_gap: no display and no xvfb-run; install Debian's xvfb (`sudo make sysdeps`) "
            "or set DISPLAY to an X server"
        )
        sys.exit(2)
    xvfb = ["xvfb-run", "-a", "-s", "-screen 0 1920x1200x24"]
    os.execvp("xvfb-run", [*xvfb, sys.executable, str(Path(__file__).resolve()), *sys.argv[1:]])

from PySide6 import QtCore, QtWidgets  # noqa: E402

from core.cluster.spec import load  # noqa: E402
from tests.helpers.gcwatch import collection_threads  # noqa: E402
from tests.helpers.heartbeat import Heartbeat  # noqa: E402


def main() -> int:
    duration_s = float(os.environ.get("DURATION_S", "120"))
    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication([])
    from gui.window import collector
    from gui.window.main_window import MainWindow

    # ignore_cleanup_errors: the run's summary.json can land while the folder is removed
    with tempfile.TemporaryDirectory(prefix="towerdeck-gap-", ignore_cleanup_errors=True) as tmp:
        os.environ["TOWERDECK_SETTINGS_DIR"] = str(Path(tmp) / "settings")  # not yours: the same start
        cluster = Path(tmp) / "scale.toml"
        from scripts.scale_cluster import main as write_cluster

        write_cluster([str(cluster)])
        spec, problems = load(cluster)
        assert spec is not None, problems
        window = MainWindow(spec, runs_root=Path(tmp) / "runs")
        window.resize(1920, 1200)
        window.tabs.setCurrentIndex(0)
        window.show()
        window.answer_close_question("stop")
        beat = Heartbeat()
        gaps: list[float] = []
        long_gaps: list[str] = []  # over 0.5 s: when, and on which tab
        first = last = [time.monotonic()]
        first = [last[0]]

        def note() -> None:  # after the beat's own slot (connected first): beat.last_gap is this gap
            now = time.monotonic()
            gap, cpu_s, queue_s = beat.last_gap
            gaps.append(gap)
            if gap > 0.5:
                long_gaps.append(
                    f"{gap * 1000:.0f} ms at {now - first[0]:.0f} s on {window.tabs.tabText(window.tabs.currentIndex())}"
                    f" (GUI thread on CPU {cpu_s * 1000:.0f} ms, waiting for a CPU {queue_s * 1000:.0f} ms)"
                )
            last[0] = now

        beat.timer.timeout.connect(note)
        stalls: collections.Counter[str] = collections.Counter()
        sampling = threading.Event()
        gui_ident = threading.get_ident()

        def sample_stalls() -> None:  # a poor man's py-spy: where the GUI thread is while it stalls
            while not sampling.wait(0.02):
                if time.monotonic() - last[0] > 0.3:
                    frame = sys._current_frames().get(gui_ident)
                    if frame is not None:
                        stack = traceback.extract_stack(frame)[-12:]
                        stalls[
                            " <- ".join(f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in reversed(stack))
                        ] += 1

        if os.environ.get("STACKS"):
            threading.Thread(target=sample_stalls, name="stall-sampler", daemon=True).start()
        # Counted while the window holds the collector: app.quit() closes the window, which gives
        # automatic collection back (gui/window/collector.py), and the run's summary writer, still
        # running then, may collect on its own thread by design.
        with collection_threads(while_=collector.active) as threads:
            window.launch()
            state = {"running": ""}
            switch = QtCore.QTimer()
            switch.timeout.connect(lambda: window.tabs.setCurrentIndex((window.tabs.currentIndex() + 1) % 4))
            switch.start(5000)

            def stop() -> None:
                state["running"] = window.overview.legend_text()
                switch.stop()
                window.stop_all()
                done = QtCore.QTimer(window)
                done.timeout.connect(lambda: app.quit() if window.source is None or window.source.done else None)
                done.start(100)

            QtCore.QTimer.singleShot(int(duration_s * 1000), stop)
            profile = cProfile.Profile() if os.environ.get("PROFILE") else None
            if profile is not None:
                profile.enable()
            app.exec()
            if profile is not None:
                profile.disable()
                pstats.Stats(profile).sort_stats("cumulative").print_stats(int(os.environ["PROFILE"]))
            running = state["running"]
        beat.stop()
        sampling.set()
        window.close()
        app.processEvents()
        for thread in threading.enumerate():  # closing the run writes its summary.json on its own thread
            if thread.name == "run-summary":
                thread.join(10)
    gaps.sort()
    by_thread = collections.Counter(threads)
    print(f"followed {duration_s:.0f} s; at the end: {running}")
    print(
        f"event loop turns: {beat.turns}; longest gap {beat.longest_gap_s * 1000:.0f} ms; "
        f"p99 {gaps[int(len(gaps) * 0.99)] * 1000:.0f} ms; median {gaps[len(gaps) // 2] * 1000:.0f} ms"
    )
    print(beat.describe_longest())
    print("gaps over 0.5 s: " + ("; ".join(long_gaps) or "none"))
    for stack, n in stalls.most_common(int(os.environ.get("STACKS") or 0)):
        print(f"{n * 20} ms stalled in: {stack}")
    print(f"garbage collections by thread: {dict(by_thread)} (GUI thread: {threading.current_thread().name})")
    return 0 if set(by_thread) <= {threading.current_thread().name} else 1


if __name__ == "__main__":
    sys.exit(main())
