"""A reopened run's backlog goes into the views between frames, a bounded slice at a turn of the
event loop, not one slice a frame (issue 25: the window idled 60 ms of every 100 while thousands of
points waited); host samples reach the GPU panel in batches with the same result."""

from __future__ import annotations

from pathlib import Path

from core.run.status import Event

WORKERS, STEPS, HOSTS = 8, 20_000, 2


def metrics(first: int, count: int) -> list[dict[str, object]]:
    return [
        {
            "t": 1000.0 + s,
            "step": s,
            "loss": 2.0 / s,
            "step_time_s": 0.5,
            "steps_per_sec": 2.0,
            "extra": {},
            "source": "classic",
        }
        for s in range(first, first + count)
    ]


def host_sample(host: str, t: float) -> dict[str, object]:
    gpus = [
        {
            "index": i,
            "utilization_gpu_percent": (t + i) % 100,
            "memory_used_bytes": 1 << 30,
            "memory_total_bytes": 8 << 30,
        }
        for i in range(8)
    ]
    return {"host": host, "t": t, "figures": {"cpu_percent": t % 100}, "gpus": gpus}


def test_a_backlog_goes_in_between_frames(qtbot, tmp_path: Path) -> None:
    from gui.window.main_window import MainWindow

    window = MainWindow(None, runs_root=tmp_path / "runs")
    qtbot.addWidget(window)
    window.close_choice = "leave"
    window.timer.stop()  # no frames from here: whatever drains the backlog is the catch-up
    for first in range(1, STEPS + 1, 2000):
        for w in range(WORKERS):
            window.inbox.put(Event("metrics", 0.0, f"worker:{w}", {"samples": metrics(first, 2000)}))
    for t in range(600):
        for h in range(HOSTS):
            window.inbox.put(Event("sample", float(t), None, host_sample(f"gpu-{h}", float(t))))
    window._on_frame()  # one frame: its slice runs out long before the backlog does
    assert window.inbox.pending() > 0 and window.catch_up_timer.isActive()
    qtbot.waitUntil(lambda: window.inbox.pending() == 0, timeout=60_000)
    qtbot.waitUntil(lambda: not window.catch_up_timer.isActive())
    for w in range(WORKERS):
        series = window.training.loss[f"worker:{w}"]
        assert series.appended == STEPS and series.last() == (float(STEPS), 2.0 / STEPS)
    for h in range(HOSTS):
        utilization, memory = window.gpus.history[(f"gpu-{h}", 7)]
        assert utilization.appended == memory.appended == 600 and utilization.last() == (599.0, float((599 + 7) % 100))
    assert len(window.gpus.grid.board) == 8 * HOSTS
    window.close()
