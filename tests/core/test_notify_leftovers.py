"""A `[notify]` command leaves nothing running: not its own process at its timeout or at exit,
nor a daemon it forked out of its session (once one per notification), and a timeout that
cannot be waited for is refused by `validate`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from core.cluster.notify_table import NotifyConfig
from core.notify import Notification, Notifier
from tests.helpers.ports import free_ports
from tests.helpers.project import ROOT, run_cli
from tests.helpers.waits import wait_for

SINK = ROOT / "tests" / "helpers" / "notify_sink.py"


def _daemons(out: Path) -> list[int]:
    return [int(p.read_text()) for p in out.parent.glob(f"{out.name}.daemon-*") if p.read_text()]


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _cleanup(out: Path) -> None:
    """After a test, what it failed to end: the daemons, and a hanging command (OUT.pid)."""
    command = Path(f"{out}.pid")
    pids = _daemons(out) + ([int(command.read_text())] if command.exists() and command.read_text() else [])
    for pid in pids:
        if not _gone(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("timeout", ["1e9", "601", "inf"])
def test_validate_bounds_the_notify_timeout(tmp_path: Path, timeout: str) -> None:
    """Before: 1e9 passed, then every notification failed with OverflowError and its command
    was left running after `launch` exited."""
    ps, worker = free_ports(2)
    path = tmp_path / "c.toml"
    path.write_text(
        f'command = ["python", "-c", "pass"]\n[jobs.ps]\ntasks = ["127.0.0.1:{ps}"]\n[jobs.worker]\n'
        f'tasks = ["127.0.0.1:{worker}"]\n[notify]\ncommand = ["true"]\ntimeout_s = {timeout}\n'
    )
    result = run_cli("validate", str(path), "--no-ports", timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if ": error: " in line]
    assert len(errors) == 1 and f"{path}:8: error: notify.timeout_s: must be " in errors[0], result.stderr
    assert "Traceback" not in result.stderr
    path.write_text(path.read_text().replace(f"timeout_s = {timeout}", "timeout_s = 600"))
    assert run_cli("validate", str(path), "--no-ports", timeout=120).returncode == 0


@pytest.mark.timeout(120)
def test_a_daemon_a_command_forks_ends_with_the_command(tmp_path: Path) -> None:
    out = tmp_path / "got.jsonl"
    notifier = Notifier(NotifyConfig((sys.executable, str(SINK), str(out), "--daemon")), {"run": "r1"})
    notifier.start()
    try:
        notifier.offer(Notification("role_failed", "worker:0 failed", "", time.time()))
        notifier.offer(Notification("stalled", "worker:1 stalled", "", time.time()))
        wait_for(lambda: out.exists() and len(out.read_text().splitlines()) == 2, 60, "both notifications")
        wait_for(lambda: len(_daemons(out)) == 2, 30, "the daemons' pids")
        # Delivered (journalled) only once the command and all it started have been ended.
        wait_for(lambda: len(notifier.sent) == 2 and all(_gone(pid) for pid in _daemons(out)), 30, "no daemon left")
    finally:
        notifier.close(30)
        _cleanup(out)


@pytest.mark.timeout(120)
def test_a_command_that_times_out_is_ended_with_its_daemon(tmp_path: Path) -> None:
    out = tmp_path / "hang"
    reports: list[str] = []
    notifier = Notifier(NotifyConfig((sys.executable, str(SINK), str(out), "--daemon", "--hang"), timeout_s=2), {})
    notifier.subscribe(lambda event: reports.append(str(getattr(event.payload, "message", ""))))
    notifier.start()
    try:
        notifier.offer(Notification("run_finished", "run failed", "", time.time()))
        wait_for(lambda: any("timed out after 2 s (killed)" in m for m in reports), 60, "the timeout's report")
        command = int(Path(f"{out}.pid").read_text())
        (daemon,) = _daemons(out)
        wait_for(lambda: _gone(command) and _gone(daemon), 15, "the command and its daemon to end")
    finally:
        notifier.close(30)
        _cleanup(out)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["exit", "SIGKILL"])
def test_a_running_command_and_its_daemon_end_when_towerdeck_does(tmp_path: Path, how: str) -> None:
    out = tmp_path / "hang"
    script = f"""
import os, signal, sys, time
sys.path.insert(0, {str(ROOT)!r})
from core.cluster.notify_table import NotifyConfig
from core.notify import Notification, Notifier
notifier = Notifier(NotifyConfig(({sys.executable!r}, {str(SINK)!r}, {str(out)!r}, "--daemon", "--hang"), timeout_s=600), {{}})
notifier.start()
notifier.offer(Notification("run_finished", "run failed", "", time.time()))
deadline = time.time() + 60
while not os.path.exists({str(out) + ".pid"!r}):
    assert time.time() < deadline
    time.sleep(0.05)
if {how!r} == "SIGKILL":
    os.kill(os.getpid(), signal.SIGKILL)
notifier.close(0)
"""
    try:
        subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
        command = int(Path(f"{out}.pid").read_text())
        wait_for(lambda: _daemons(out), 30, "the daemon's pid")
        (daemon,) = _daemons(out)
        wait_for(lambda: _gone(command) and _gone(daemon), 15, "the command and its daemon to end")
    finally:
        _cleanup(out)
