"""Open a past day-long run: a finished 1 ps + 64 worker run of 24 h (1 Hz metrics per worker, 8
hosts x 8 GPUs sampled at 1 Hz: ~660 MB of metrics, ~1.5 GB of GPU samples), generated once by
tests/helpers/past_run.py into ``TOWERDECK_BENCH_RUN`` (default a folder under /tmp, kept for the
next run).

Timed: from ``MainWindow.open_run(DIR)`` (what ``--run DIR`` does) until both the Training and the
GPUs views are full, i.e. every worker's loss curve spans step 1 to its last step (86,400), every GPU
has its history to the last second, nothing is waiting in the inbox, and each tab has been drawn
once. Meanwhile a 5 ms QTimer records the longest gap between two turns of the event loop (target:
never more than 100 ms).

Baseline, in the same run and the same window code: the files loaded naively, each read line by line
from its start in chunks of 256 KiB per file and poll, every line parsed and handed to the views,
and everything that arrived handed over at the next frame (the reader and the inbox as they were
before skimming and bounded frames). It is stopped at ``BASELINE_CAP_S`` (default 120 s) with the
share of the points it had shown by then. Offscreen Qt. Run from the repo root:
``python benchmarks/bench_open_run.py`` (``WORKERS``, ``SECONDS``, ``HOSTS`` may be set; ``COMPACT=1``
writes the generated run's telemetry in today's compact encoding, as a run TowerDeck records now).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from PySide6 import QtCore, QtWidgets

from core.run import skim
from gui.window import frame
from gui.window.main_window import MainWindow
from tests.helpers.heartbeat import run_queue_s
from tests.helpers.past_run import START_T, generate_run

WORKERS = int(os.environ.get("WORKERS", "64"))
SECONDS = int(os.environ.get("SECONDS", "86400"))
HOSTS = int(os.environ.get("HOSTS", "8"))
COMPACT = os.environ.get("COMPACT", "") == "1"  # the telemetry as today's runs write it (core/run/compact.py)
BASELINE_CAP_S = float(os.environ.get("BASELINE_CAP_S", "120"))
TARGET_S, TARGET_GAP_MS = 2.0, 100.0


def run_dir() -> Path:
    default = (
        Path(tempfile.gettempdir())
        / f"towerdeck-bench-open-run-{WORKERS}x{SECONDS}x{HOSTS}{'-compact' if COMPACT else ''}"
    )
    path = Path(os.environ.get("TOWERDECK_BENCH_RUN", default))
    if not (path / "generated").exists():
        shutil.rmtree(path, ignore_errors=True)
        t0 = time.perf_counter()
        generate_run(path, workers=WORKERS, seconds=SECONDS, hosts=HOSTS, compact=COMPACT)
        (path / "generated").write_text("complete\n")
        print(f"(generated {path} in {time.perf_counter() - t0:.0f} s)", flush=True)
    return path


def shown_share(window: MainWindow) -> float:
    """How far the views are: the mean over series of (last x - first x) / the run's span."""
    shares = []
    for w in range(WORKERS):
        series = window.training.figures.loss.get(f"worker:{w}")
        last = series.last() if series is not None else None
        shares.append(last[0] / SECONDS if last else 0.0)
    for h in range(HOSTS):
        for i in range(8):
            pair = window.gpus.figures.history.get((f"gpu-{h}", i))
            last = pair[0].last() if pair is not None else None
            shares.append((last[0] - START_T + 1) / SECONDS if last else 0.0)
    return sum(shares) / len(shares)


def full(window: MainWindow) -> bool:
    if window.binding.inbox.pending() or shown_share(window) < 1.0:
        return False
    first = window.training.figures.loss["worker:0"].points()[0][0]
    return first <= SECONDS / 100  # the curve starts near step 1, not at the tail


def measure(window: MainWindow, path: Path, cap_s: float) -> tuple[float | None, float, float, float]:
    """(seconds until both views are full and drawn, or None past ``cap_s``; longest event-loop gap
    in ms; share shown at the end; CPU seconds of the process, all threads, meanwhile)."""
    gaps = [0.0]
    schedstat = Path(f"/proc/self/task/{threading.get_native_id()}/schedstat")
    last = [time.perf_counter(), time.thread_time(), run_queue_s(schedstat)]
    long_gaps: list[str] = []

    def tick() -> None:
        now, cpu_now, queue_now = time.perf_counter(), time.thread_time(), run_queue_s(schedstat)
        gap = now - last[0]
        gaps[0] = max(gaps[0], gap)
        if gap > TARGET_GAP_MS / 1000:  # what the GUI thread did meanwhile: its own CPU, waiting for a
            # core; the rest is waiting for the GIL (the reader's thread) or blocked
            cpu_ms, queue_ms = (cpu_now - last[1]) * 1000, (queue_now - last[2]) * 1000
            long_gaps.append(f"{gap * 1000:.0f} ms at {now - t0:.1f} s ({cpu_ms:.0f} CPU, {queue_ms:.0f} for a core)")
        last[:] = [now, cpu_now, queue_now]

    probe = QtCore.QTimer()
    probe.setInterval(5)
    probe.timeout.connect(tick)
    loop = QtCore.QEventLoop()
    result: list[float | None] = [None]
    t0, cpu0 = time.perf_counter(), time.process_time()

    def check() -> None:
        if full(window):
            probe.stop()  # what follows is the benchmark drawing both tabs at once, not loading
            for tab in (window.training, window.gpus):
                window.tabs.setCurrentWidget(tab)
                window.frame._refresh_visible(force=True)
                tab.grab()
            result[0] = time.perf_counter() - t0
            loop.quit()
        elif time.perf_counter() - t0 > cap_s:
            loop.quit()

    checker = QtCore.QTimer()
    checker.setInterval(20)
    checker.timeout.connect(check)
    window.tabs.setCurrentWidget(window.training)
    last[:] = [
        time.perf_counter(),
        time.thread_time(),
        run_queue_s(schedstat),
    ]  # open_run runs on the GUI thread: a gap
    assert window.open_run(path)
    probe.start()
    checker.start()
    loop.exec()
    cpu = time.process_time() - cpu0
    probe.stop()
    checker.stop()
    share = shown_share(window)
    window.binding.let_go()
    if long_gaps:
        print(f"  ({len(long_gaps)} event-loop gaps over {TARGET_GAP_MS:g} ms: {', '.join(long_gaps[:8])})")
    return result[0], gaps[0] * 1000, share, cpu


def main() -> int:
    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication(sys.argv[:1])
    assert app is not None
    path = run_dir()
    load = os.getloadavg()[0]
    root = Path(tempfile.mkdtemp())
    window = MainWindow(None, runs_root=root)
    window.answer_close_question("leave")
    window.resize(1400, 800)
    window.show()
    ours, our_gap, our_share, our_cpu = measure(window, path, cap_s=60.0)
    skim_from, frame_points = skim.SKIM_FROM_BYTES, frame.FRAME_TELEMETRY_POINTS
    skim.SKIM_FROM_BYTES, frame.FRAME_TELEMETRY_POINTS = 1 << 62, None
    try:
        naive, naive_gap, naive_share, naive_cpu = measure(window, path, cap_s=BASELINE_CAP_S)
    finally:
        skim.SKIM_FROM_BYTES, frame.FRAME_TELEMETRY_POINTS = skim_from, frame_points
    window.close()
    shutil.rmtree(root, ignore_errors=True)

    def seconds(value: float | None, share: float, cap: float) -> str:
        return f"{value:6.2f} s" if value is not None else f"> {cap:.0f} s ({share:.0%} of the span shown)"

    print(
        f"open a past run: 1 ps + {WORKERS} workers x {SECONDS} s of 1 Hz metrics, {HOSTS} hosts x 8 GPUs "
        f"(load {load:.1f} at start, {os.getloadavg()[0]:.1f} at the end; {os.cpu_count()} CPUs):"
    )
    print(
        f"  TowerDeck (skimmed, bounded frames)   {seconds(ours, our_share, 60)}   CPU {our_cpu:5.1f} s   longest event-loop gap {our_gap:5.0f} ms"
    )
    print(
        f"  baseline (every line, chunked polls)  {seconds(naive, naive_share, BASELINE_CAP_S)}   CPU {naive_cpu:5.1f} s   longest event-loop gap {naive_gap:5.0f} ms"
    )
    if ours is not None:
        ratio = f"{(naive or BASELINE_CAP_S) / ours:.1f}x" + ("" if naive is not None else " at least")
        print(f"  ratio {ratio}; targets: full views within {TARGET_S:g} s, no gap over {TARGET_GAP_MS:g} ms")
    return 0 if ours is not None else 1


if __name__ == "__main__":
    sys.exit(main())
