"""Issue 20, slow to stop and leftovers: a flood of output must not delay news of an exit nor a
stop (item 12); no empty temp folders, an orphaned agent ends, ``runs`` tells dead from live (13).
Through the real CLI, each with a hard limit that kills."""

from __future__ import annotations

import queue
import re
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.harness import Cli, role_cluster, wait_for

pytestmark = pytest.mark.slow


class Lines:
    """A CLI's output lines as they come, each with when it came (a reader thread)."""

    def __init__(self, cli: Cli) -> None:
        self.queue: queue.Queue[tuple[float, str]] = queue.Queue()
        self.seen: list[tuple[float, str]] = []
        assert cli.proc.stdout is not None
        stdout = cli.proc.stdout
        threading.Thread(
            target=lambda: [self.queue.put((time.monotonic(), line)) for line in stdout], daemon=True
        ).start()

    def text(self) -> str:
        return "".join(line for _, line in self.seen)

    def wait(self, pattern: str, timeout_s: float) -> float:
        """When a line matching ``pattern`` came (fails after ``timeout_s``)."""
        deadline = time.monotonic() + timeout_s
        for t, line in self.seen:
            if re.search(pattern, line):
                return t
        while time.monotonic() < deadline:
            try:
                t, line = self.queue.get(timeout=0.1)
            except queue.Empty:
                continue
            self.seen.append((t, line))
            if re.search(pattern, line):
                return t
        raise AssertionError(f"no line matching {pattern!r} in {timeout_s:g} s:\n{self.text()[-3000:]}")


@pytest.fixture
def clis() -> Iterator[list[Cli]]:
    started: list[Cli] = []
    yield started
    for cli in started:
        cli.end()


def test_two_flooding_workers_are_reported_done_promptly(tmp_path: Path, clis: list[Cli]):
    cluster = role_cluster(tmp_path, ["flood", "10", "0"], ["flood", "10", "0"])
    run = tmp_path / "run"
    cli = Cli("launch", str(cluster), "--run-dir", str(run))
    clis.append(cli)
    lines = Lines(cli)
    lines.wait(r"worker:1 +running", 60)
    logs = [run / "roles" / f"worker-{i}" / "attempt-1.log" for i in range(2)]
    # The workers end once their last block is written: the logs stop growing.
    sizes: list[int] = []

    def still() -> bool:
        sizes.append(sum(p.stat().st_size for p in logs))
        return len(sizes) > 20 and sizes[-1] == sizes[-21]

    wait_for(still, 60, "the floods to end")
    ended = time.monotonic() - 1.0  # the sizes were still for 20 polls of 0.05 s
    total_mb = sizes[-1] / 1e6
    said = lines.wait(r"worker:1 +succeeded", 60)
    lines.wait(r"worker:0 +succeeded", 60)
    late_s = said - ended
    print(f"{total_mb:.0f} MB of lines from 2 workers: `worker:1 succeeded` {late_s:.1f} s after they ended")
    code, _ = cli.finish(60)
    assert code == 0
    assert late_s < 15, f"{late_s:.1f} s late"


def test_ctrl_c_stops_two_flooding_workers_in_seconds(tmp_path: Path, clis: list[Cli]):
    cluster = role_cluster(tmp_path, ["flood", "0", "0"], ["flood", "0", "0"])
    run = tmp_path / "run"
    cli = Cli("launch", str(cluster), "--run-dir", str(run))
    clis.append(cli)
    lines = Lines(cli)
    lines.wait(r"worker:1 +running", 60)
    time.sleep(10)  # ten seconds of flood: a backlog, whatever this machine's speed
    interrupted = time.monotonic()
    cli.signal(signal.SIGINT)
    lines.wait(r"stopped after", 60)
    elapsed_s = time.monotonic() - interrupted
    mb = sum((run / "roles" / f"worker-{i}" / "attempt-1.log").stat().st_size for i in range(2)) / 1e6
    print(f"{mb:.0f} MB of lines: stopped {elapsed_s:.1f} s after Ctrl-C")
    code, _ = cli.finish(30)
    assert code == 130
    assert elapsed_s < 15, f"{elapsed_s:.1f} s to stop"
