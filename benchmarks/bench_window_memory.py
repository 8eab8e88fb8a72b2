"""The window's memory over sped-up days (72 h by default): is it flat once the bounded buffers are full?

The real MainWindow (offscreen, shown, 1 ps + 64 workers on 8 hosts in its spec; WORKERS and HOSTS
may be set) is fed through
its real bridge (``window.binding.inbox.put``, the path the controller's events take) as fast as it
takes them: each frame carries FRAME_S simulated seconds of

- host samples, 1 Hz for each host, each with 8 GPUs (NVML figures as the agent sends
  them), the host's figures and its roles' figures (CPU, RSS, threads);
- metrics for every worker (step, loss, step time) at STEP_HZ steps a second each;
- a log line per worker every 10 simulated seconds;

then the window's own frame (``_on_frame``: drain, dispatch, refresh the tab on screen) and a Qt
event pass that paints it. The tab on screen alternates each simulated hour between Training and
GPUs so both are drawn. After each simulated hour: ``gc.collect()`` and the process's RSS (psutil).

Reports RSS per hour, its slope after WARMUP_H hours (least squares, MiB/h) and max, the number
of Python objects the collector tracks after each hour, and the speed-up over real time, as one
JSON line last. Settings from the environment: HOURS (72: a window left open over 3 days),
WARMUP_H (3), STEP_HZ (1), FRAME_S (60), LOGS (1; 0 sends no log lines), TRACEMALLOC (N: trace
Python's allocations and print the N places that grew most from WARMUP_H to the end; slower, so
not for the figures), TRIM (1: glibc's malloc_trim before each hour's RSS, to tell heap pages
Python freed but the allocator kept from memory in use). Run from the repo root:
`python benchmarks/bench_window_memory.py`.
"""

from __future__ import annotations

import gc
import json
import math
import os
import random
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil
from PySide6 import QtWidgets

from core.cluster.spec import load
from core.run.events import Event, Metrics, RoleOutput, Sample

# WORKERS and HOSTS from the environment: 64 on 8 by default (make bench); 256 on 32 for the
# simulated-scale figures (benchmarks/bench_sim_scale.py --memory).
WORKERS, HOSTS, GPUS_PER_HOST = int(os.environ.get("WORKERS", "64")), int(os.environ.get("HOSTS", "8")), 8
GIB = 2**30
LOGS = os.environ.get("LOGS", "1") != "0"  # LOGS=0 leaves the log lines out (to see what they weigh)


def cluster_file(folder: Path) -> Path:
    workers = ", ".join(f'"127.0.0.{i % HOSTS + 1}:{20001 + i}"' for i in range(WORKERS))
    path = folder / "day.toml"
    path.write_text(
        f"""name = "day"
strategy = "between_graph"
command = ["python", "light_trainer.py"]

[jobs.ps]
tasks = ["127.0.0.1:20000"]

[jobs.worker]
tasks = [{workers}]
gpus = [0]
"""
    )
    return path


def host_sample(host: int, t: float, rng: random.Random) -> dict[str, object]:
    gpus = [
        {
            "index": g,
            "name": "NVIDIA H100 80GB HBM3",
            "pci_bus_id": f"0000:{16 * host + g:02x}:00.0",
            "utilization_gpu_percent": rng.randint(40, 100),
            "utilization_memory_percent": rng.randint(10, 60),
            "memory_used_bytes": int(rng.uniform(20, 70) * GIB),
            "memory_total_bytes": 80 * GIB,
            "temperature_c": rng.randint(40, 85),
            "power_w": rng.uniform(150, 700),
            "power_limit_w": 700.0,
            "sm_clock_mhz": 1980,
            "processes": [
                {"pid": 1000 + g, "used_memory_bytes": 20 * GIB, "role": f"worker:{(host + HOSTS * g) % WORKERS}"}
            ],
        }
        for g in range(GPUS_PER_HOST)
    ]
    roles = {
        f"worker:{host + HOSTS * k}": {
            "alive": True,
            "pids": [1000 + k],
            "cpu_percent": rng.uniform(50, 150),
            "rss_bytes": rng.randint(1, 4) * GIB,
            "threads": 40,
        }
        for k in range(WORKERS // HOSTS)
    }
    return {
        "t": t,
        "host": f"127.0.0.{host + 1}",
        "figures": {
            "cpu_percent": rng.uniform(20, 90),
            "memory_used_bytes": 200 * GIB,
            "memory_total_bytes": 512 * GIB,
        },
        "roles": roles,
        "gpus": gpus,
    }


def feed_frame(window: object, t0: float, sim_s: float, frame_s: float, step_hz: float, rng: random.Random) -> None:
    """Put ``frame_s`` simulated seconds from ``sim_s`` on into the window's inbox."""
    inbox = window.binding.inbox  # type: ignore[attr-defined]
    for s in range(int(frame_s)):
        t = t0 + sim_s + s
        for host in range(HOSTS):
            inbox.put(Event(t, None, Sample.from_record(host_sample(host, t, rng))))
    steps = int(frame_s * step_hz)
    first = int(sim_s * step_hz)
    for w in range(WORKERS):
        role = f"worker:{w}"
        slow = 1.6 if w == 13 else 1.0  # a straggler, so the spread view draws one on top
        samples = [
            {
                "t": t0 + (first + k) / step_hz,
                "step": first + k,
                "loss": 2.0 / (1 + (first + k) / 5000) + rng.random() * 0.05,
                "step_time_s": slow * rng.uniform(0.08, 0.12),
                "steps_per_sec": None,
                "extra": {},
                "source": "classic",
            }
            for k in range(steps)
        ]
        inbox.put(Event(t0 + sim_s, role, Metrics(samples)))
        lines = "".join(
            f"INFO step {first + k} loss {samples[k]['loss']:.4f} ({role})\n"
            for k in range(0, steps, int(10 * step_hz) or 1)
        )
        if LOGS:
            inbox.put(Event(t0 + sim_s, role, RoleOutput(lines)))


def rss_mib() -> float:
    gc.collect()
    if os.environ.get("TRIM") == "1":  # experiment: give free heap pages back first (glibc)
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    return psutil.Process().memory_info().rss / 2**20


def slope_mib_per_h(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (hour, MiB)."""
    n = len(points)
    if n < 2:
        return math.nan
    mx = sum(h for h, _ in points) / n
    my = sum(m for _, m in points) / n
    den = sum((h - mx) ** 2 for h, _ in points)
    return sum((h - mx) * (m - my) for h, m in points) / den


def main() -> int:
    hours = float(os.environ.get("HOURS", "72"))
    warmup_h = float(os.environ.get("WARMUP_H", "3"))
    step_hz = float(os.environ.get("STEP_HZ", "1"))
    frame_s = float(os.environ.get("FRAME_S", "60"))
    from gui.window.main_window import MainWindow

    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication([])
    with tempfile.TemporaryDirectory() as tmp:
        spec, problems = load(cluster_file(Path(tmp)))
        assert spec is not None, problems
        window = MainWindow(spec, runs_root=Path(tmp) / "runs")
        window.frame.timer.stop()  # the frames are driven here, back to back
        window.resize(1400, 900)
        window.show()
        window.pages.setCurrentWidget(window.monitor)
        app.processEvents()
        rng = random.Random(11)
        t0 = time.time() - hours * 3600
        per_hour: list[tuple[float, float]] = [(0.0, rss_mib())]
        objects: list[int] = []
        start = time.monotonic()
        frames_per_hour = int(3600 / frame_s)
        trace_top = int(os.environ.get("TRACEMALLOC") or 0)
        warm_snapshot = None
        for hour in range(int(hours)):
            if trace_top and hour == int(warmup_h):  # what is allocated from here on and stays
                gc.collect()
                tracemalloc.start(8)
                warm_snapshot = tracemalloc.take_snapshot()
            window.tabs.setCurrentWidget(window.training if hour % 2 == 0 else window.gpus)
            for f in range(frames_per_hour):
                feed_frame(window, t0, hour * 3600 + f * frame_s, frame_s, step_hz, rng)
                window.frame._on_frame()
                # A frame here carries frame_s of simulated time, ~600x what a real frame gets,
                # and the window drains at most 40 ms of telemetry a frame (FRAME_TELEMETRY_S):
                # let it take what it was given before the next feed, as it would at real time,
                # so RSS measures what the window keeps, not a backlog of this feed's making.
                # A backlog past a frame's slice goes on between frames on the catch-up timer
                # (gui/window/frame.py): turn the event loop for it, as the window's own loop does.
                while window.binding.inbox.pending():
                    app.processEvents()
                    if not window.frame.catch_up_timer.isActive():
                        window.frame._on_frame()
                window.frame._refresh_visible(force=True)
                app.processEvents()
            per_hour.append((hour + 1.0, rss_mib()))
            # Python objects the collector tracks (rss_mib collected first): flat while RSS
            # steps says the steps are the allocator's or Qt's, not something of ours piling up.
            objects.append(len(gc.get_objects()))
            print(f"hour {hour + 1:>4.0f}: RSS {per_hour[-1][1]:7.1f} MiB, {objects[-1]} objects", flush=True)
        wall_s = time.monotonic() - start
        if warm_snapshot is not None:
            gc.collect()
            grown = tracemalloc.take_snapshot().compare_to(warm_snapshot, "traceback")
            for stat in grown[:trace_top]:
                print(f"{stat.size_diff / 2**20:+8.2f} MiB {stat.count_diff:+8d} blocks")
                for line in stat.traceback.format()[-8:]:
                    print("    " + line)
        window.close()
    after = [p for p in per_hour if p[0] >= warmup_h]
    result = {
        "hours": hours,
        "warmup_h": warmup_h,
        "speedup": round(hours * 3600 / wall_s, 1),
        "rss_mib": [round(m, 1) for _, m in per_hour],
        "slope_mib_per_h": round(slope_mib_per_h(after), 3),
        "growth_after_warmup_mib": round(after[-1][1] - after[0][1], 1) if after else math.nan,
        "max_mib": round(max(m for _, m in per_hour), 1),
        "gc_objects": objects,
        "thinned_points": window.binding.inbox.thinned_points,
    }
    print(
        f"{hours:.0f} simulated hours at {result['speedup']}x real time: RSS max {result['max_mib']} MiB, "
        f"after {warmup_h:.0f} h warm-up {result['slope_mib_per_h']:+.2f} MiB/h "
        f"({result['growth_after_warmup_mib']:+.1f} MiB in all)"
    )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
