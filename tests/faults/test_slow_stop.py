"""Issue 20, slow to stop and leftovers: a flood of output must not delay news of an exit nor a
stop (item 12); no empty temp folders, an orphaned agent ends, ``runs`` tells dead from live (13).
Through the real CLI, each with a hard limit that kills."""

from __future__ import annotations

import contextlib
import queue
import re
import signal
import threading
import time
from pathlib import Path

import psutil
import pytest

from tests.helpers.cli_process import Cli, launch_roles, role_cluster
from tests.helpers.waits import wait_for

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


def test_two_flooding_workers_are_reported_done_promptly(tmp_path: Path, clis: list[Cli]):
    cli, run = launch_roles(tmp_path, clis, ["flood", "10", "0"], ["flood", "10", "0"])
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
    cli, run = launch_roles(tmp_path, clis, ["flood", "0", "0"], ["flood", "0", "0"])
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


def agent_processes(run: Path) -> list[psutil.Process]:
    """The run's serving agent (its command line names the run directory's socket)."""
    found = []
    for p in psutil.process_iter(["cmdline", "status"]):
        with contextlib.suppress(psutil.Error):
            line = " ".join(p.info["cmdline"] or [])
            if p.info["status"] != psutil.STATUS_ZOMBIE and "--serve" in line and str(run) in line:
                found.append(p)
    return found


def test_a_deep_run_directory_leaves_no_temp_folder_and_ctl_reaches_it(tmp_path: Path, clis: list[Cli]):
    temp = tmp_path / "tmp"
    temp.mkdir()
    run = tmp_path / ("deep-" + "x" * 120) / "run"
    cluster = role_cluster(tmp_path, ["steps", "100", "0.05"])
    cli = Cli("launch", str(cluster), "--run-dir", str(run), env={"TMPDIR": str(temp)})
    clis.append(cli)
    lines = Lines(cli)
    lines.wait(r"worker:0 +running", 60)
    status = Cli("ctl", str(run), "status")
    code, out = status.finish(30)
    assert code == 0 and "worker:0" in out, out
    code, _ = cli.finish(60)
    assert code == 0
    assert not list(temp.iterdir()), list(temp.iterdir())


def test_an_orphaned_agent_ends_after_its_roles_and_runs_tells_a_dead_run(tmp_path: Path, clis: list[Cli]):
    root = tmp_path / "runs"
    run = root / "orphan"
    cluster = role_cluster(tmp_path, ["steps", "60", "0.05"])
    launch = Cli("launch", str(cluster), "--run-dir", str(run), env={"TOWERDECK_AGENT_LINGER_S": "2"})
    clis.append(launch)
    Lines(launch).wait(r"worker:0 +running", 60)
    code, out = Cli("runs", "--root", str(root)).finish(30)
    assert code == 0 and re.search(r"orphan .* running \(pid \d+\)", out) and " left " not in out, out
    launch.proc.kill()
    launch.finish(30)
    code, out = Cli("runs", "--root", str(root)).finish(30)
    assert code == 0 and re.search(r"orphan .* left ", out), out  # nobody holds it: `attach` it
    wait_for(lambda: agent_processes(run), 10, "the run's agent")  # it outlived its launcher
    wait_for(lambda: not agent_processes(run), 30, "the orphaned agent to end after its role")
