"""`launch` keeps supervising while nobody reads its stdout (issue 19): a paused pager or a stalled
SSH terminal blocked the printer, which ran on the controller thread, and with it every restart."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Any

from tests.helpers.ports import free_ports
from tests.helpers.procs import assert_nothing_left
from tests.helpers.project import ROOT, run_cli

F_SETPIPE_SZ, F_GETPIPE_SZ = 1031, 1032  # Linux fcntl commands

CLUSTER = """
name = "chatty"
strategy = "between_graph"
launch_style = "flags"
workdir = "{trainers}"
command = ["{python}", "-u", "light_trainer.py", "--steps=0", "--rate_hz=100", "--test_marker={marker}"]
stop_grace_s = 3
[jobs.ps]
tasks = ["127.0.0.1:{p[0]}"]
[jobs.worker]
tasks = ["127.0.0.1:{p[1]}", "127.0.0.1:{p[2]}"]
restart = {{ policy = "OnFailure", max_restarts = 2, backoff_s = 0.5 }}
"""


def _status(run_dir: Path) -> dict[str, Any] | None:
    if not (run_dir / "run.json").exists() or "control_socket" not in (run_dir / "run.json").read_text():
        return None
    result = run_cli("ctl", str(run_dir), "status", "--json", timeout=30)
    return json.loads(result.stdout) if result.returncode == 0 else None


def _wait_role(run_dir: Path, role: str, condition, timeout_s: float, what: str) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = _status(run_dir)
        found = next((r for r in (status or {}).get("roles", []) if r["role"] == role), None)
        if found is not None and condition(found):
            return found
        time.sleep(0.3)
    raise AssertionError(f"{role}: {what} never happened: {_status(run_dir)}")


def test_a_role_is_restarted_while_nobody_reads_launch_s_stdout(tmp_path: Path) -> None:
    ports = free_ports(3)
    marker = tmp_path.name
    cluster = tmp_path / "chatty.toml"
    trainers = ROOT / "resources" / "trainers"
    cluster.write_text(CLUSTER.format(trainers=trainers, python=sys.executable, marker=marker, p=ports))
    run_dir = tmp_path / "run"
    read_end, write_end = os.pipe()
    fcntl.fcntl(read_end, F_SETPIPE_SZ, 4096)  # fills in well under a second of --follow all
    capacity = fcntl.fcntl(read_end, F_GETPIPE_SZ)
    argv = [sys.executable, str(ROOT / "main.py"), "launch", str(cluster), "--run-dir", str(run_dir)]
    with open(tmp_path / "stderr.txt", "wb") as err:
        launch = subprocess.Popen([*argv, "--follow", "all", "--progress-every", "1"], stdout=write_end, stderr=err)
    os.close(write_end)
    try:
        worker = _wait_role(run_dir, "worker:1", lambda r: r["state"] == "running", 60, "running")

        def pipe_full() -> bool:
            waiting = bytearray(4)
            fcntl.ioctl(read_end, termios.FIONREAD, waiting)
            return int.from_bytes(waiting, sys.byteorder) >= capacity - 512

        deadline = time.monotonic() + 30
        while not pipe_full():
            assert time.monotonic() < deadline, "launch's stdout never filled"
            time.sleep(0.1)

        os.kill(worker["pid"], signal.SIGKILL)  # stdout full and unread: the printer is stuck
        again = _wait_role(
            run_dir, "worker:1", lambda r: r["state"] == "running" and r["attempt"] == 2, 30, "a restart"
        )
        assert again["restarts"] == 1 and again["pid"] != worker["pid"]
        assert pipe_full()  # nobody read meanwhile
    finally:
        launch.send_signal(signal.SIGINT)
        with os.fdopen(read_end, "rb") as out:  # now read it all: the launch can print and end
            printed = out.read()
        assert launch.wait(60) is not None
    text = printed.decode(errors="replace")
    assert "worker:1" in text and "restart 1 of 2" in text, text[-2000:]
    assert_nothing_left(ports, f"--test_marker={marker}")
