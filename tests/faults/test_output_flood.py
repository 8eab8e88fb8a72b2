"""Fault 4: roles that print 50 MB without a newline, binary garbage, and ~100 MB/s of lines.

Through the real CLI: the memory of the controller and of the agent stays bounded (measured), nothing
crashes, and every byte a role wrote is in its log.
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import psutil
import pytest

from tests.helpers.cli_launch import Launch
from tests.helpers.flood_role import payload
from tests.helpers.ports import free_ports
from tests.helpers.project import ROOT

pytestmark = pytest.mark.slow
FLOOD = ROOT / "tests" / "helpers" / "flood_role.py"
SIZES = {"noline": 50_000_000, "garbage": 20_000_000, "lines": 300_000_000}


class RssWatch:
    """Peak RSS of a process and of its agent child, sampled every 0.1 s on a thread."""

    def __init__(self, pid: int) -> None:
        self.proc = psutil.Process(pid)
        self.peak = {"controller": 0, "agent": 0}
        self.samples: list[tuple[float, int, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        start = time.monotonic()
        while not self._stop.wait(0.1):
            try:
                controller = self.proc.memory_info().rss
                agents = [c for c in self.proc.children() if "agent.py" in " ".join(c.cmdline())]
                agent = sum(a.memory_info().rss for a in agents)
            except psutil.Error:
                return
            self.samples.append((time.monotonic() - start, controller, agent))
            self.peak["controller"] = max(self.peak["controller"], controller)
            self.peak["agent"] = max(self.peak["agent"], agent)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def test_floods_of_output_keep_memory_bounded_and_every_byte_on_disk(tmp_path: Path, launches: list[Launch]):
    ports = free_ports(3)
    tasks = ", ".join(
        f'{{ address = "127.0.0.1:{port}", command = ["python", "{FLOOD}", "{kind}", "{size}"] }}'
        for port, (kind, size) in zip(ports, SIZES.items(), strict=True)
    )
    cluster = tmp_path / "cluster.toml"
    cluster.write_text(f'strategy = "custom"\n[jobs.worker]\ntasks = [{tasks}]\n')
    launch = Launch(cluster, tmp_path / "run")
    launches.append(launch)
    watch = RssWatch(launch.proc.pid)
    started = time.monotonic()
    code, out = launch.finish(timeout_s=280)
    elapsed_s = time.monotonic() - started
    watch.stop()
    assert code == 0, out[-3000:]
    assert "internal error" not in out and "Traceback" not in out, out[-3000:]
    for i, (kind, size) in enumerate(SIZES.items()):
        log = (tmp_path / "run" / "roles" / f"worker-{i}" / "attempt-1.log").read_bytes()
        expected = payload(kind, size)
        assert log[: len(expected)] == expected, kind  # every byte, in order
        assert re.fullmatch(rb"\nwrote \d+ bytes in [0-9.]+ s\n", log[len(expected) :]), log[len(expected) :][:200]
    rate = re.search(rb"wrote (\d+) bytes in ([0-9.]+) s", (tmp_path / "run/roles/worker-2/attempt-1.log").read_bytes())
    assert rate
    mb_per_s = int(rate.group(1)) / 1e6 / max(float(rate.group(2)), 1e-3)
    total_mb = sum(SIZES.values()) / 1e6
    report = (
        f"{total_mb:.0f} MB of output ({mb_per_s:.0f} MB/s of lines) in {elapsed_s:.0f} s: peak RSS controller "
        f"{watch.peak['controller'] / 2**20:.0f} MiB, agent {watch.peak['agent'] / 2**20:.0f} MiB"
    )
    print(report)
    (tmp_path.parent / "flood-figures.txt").write_text(report + "\n")
    # Bounded: a small fraction of what went through, not growing with it.
    assert watch.peak["controller"] < 250 * 2**20, report
    assert watch.peak["agent"] < 100 * 2**20, report
    # The last lines of the long-line role are what a terminal would show, cut, not 50 MB.
    assert "end of the long line" in out or "succeeded" in out
