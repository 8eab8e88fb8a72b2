"""Step times from output read in bursts: a worker whose agent was held (stopped for seconds, as
a controller far behind holds its agents through full pipes, or a loaded machine starves them)
gets seconds of step lines in one read, every line with that read's time. The figures the
controller and the window show are those of the trainer's real rate, never the burst's spacing
(a worker stepping every 0.3 s read 6.7-8.2 s in a 1,024-worker run)."""

from __future__ import annotations

import itertools
import os
import signal
import statistics
import sys
from pathlib import Path

import pytest

from core.telemetry.live import RoleTelemetry, sample_dict
from core.telemetry.stragglers import StepTimes
from core.views.training import TrainingFigures
from tests.helpers.agent_process import AgentProcess, start
from tests.helpers.project import ROOT
from tests.helpers.waits import wait_for

RATE_HZ = 20.0  # the trainer's step lines a second: a step every 50 ms
HELD_LINES = 80  # lines printed while the agent is held: 4 s of them, one burst


def _steps_in(log: Path) -> int:
    return sum(line.startswith("Step:") for line in log.read_text().splitlines())


@pytest.mark.timeout(120)
def test_a_burst_of_held_output_gives_the_trainer_s_step_time_not_the_burst_s(tmp_path: Path) -> None:
    agent = AgentProcess()
    log = tmp_path / "worker-0.log"
    trainer = [sys.executable, "-u", str(ROOT / "resources" / "trainers" / "light_trainer.py")]
    argv = [*trainer, "--job_name=worker", "--task_index=0", "--steps=0", f"--rate_hz={RATE_HZ:g}"]
    start(agent, "worker:0", argv, log)
    telemetry = RoleTelemetry()  # what the controller keeps of the role (core/controller/output_intake.py)
    figures = TrainingFigures()  # what the window draws from the controller's metrics events
    reads: list[tuple[float, int]] = []  # each output event: its time, its last step

    def take_output_until(step: int) -> None:
        while telemetry.stats.step is None or telemetry.stats.step < step:
            event = agent.wait_for("output", role="worker:0")
            samples = telemetry.feed(event["data"], event["t"])  # as OutputIntake takes a chunk
            if samples:
                figures.add_samples("worker:0", [sample_dict(s) for s in samples])
                reads.append((event["t"], telemetry.stats.step or 0))

    try:
        take_output_until(60)  # 3 s of steady reads, four a second
        os.kill(agent.proc.pid, signal.SIGSTOP)  # the agent held; the role's log pump writes on
        try:
            held_from = _steps_in(log)
            wait_for(lambda: _steps_in(log) >= held_from + HELD_LINES, 60, f"{HELD_LINES} lines printed while held")
        finally:
            os.kill(agent.proc.pid, signal.SIGCONT)
        take_output_until(held_from + HELD_LINES + 60)  # the burst, then 3 s of steady reads again
    finally:
        agent.send({"op": "shutdown", "grace_s": 5})
        agent.close()

    burst = max(b[0] - a[0] for a, b in itertools.pairwise(reads))
    assert burst >= HELD_LINES / RATE_HZ * 0.9, f"no burst: the longest gap between reads was {burst:.2f} s"
    # The trainer's own rate, from the first read to the last (both ends are read times).
    real_s = (reads[-1][0] - reads[0][0]) / (reads[-1][1] - reads[0][1])
    series = figures.step_time["worker:0"]
    shown_ms = [float(v) for v in series.arrays()[1]]
    # Before: the burst's first line took the whole hold as its step time (4 s and more), and every
    # line of the burst kept it: the chart's band and the roles table read seconds.
    assert max(shown_ms) < 3 * real_s * 1000, (
        f"step times up to {max(shown_ms):.0f} ms for a {real_s * 1000:.0f} ms step"
    )
    assert statistics.median(shown_ms) == pytest.approx(real_s * 1000, rel=0.3)
    assert telemetry.stats.step_time_s == pytest.approx(real_s, rel=0.5)
    # The straggler judge's readings (each over a stretch of 2 s or more, between batch ends).
    times = StepTimes()
    for t, step in reads:
        times.take(t, step, None)
    assert all(value < 3 * real_s for _t, value in times.readings()), times.readings()
