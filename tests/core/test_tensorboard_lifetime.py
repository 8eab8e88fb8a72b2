"""`runs tensorboard` ended by SIGHUP (a closed terminal) or SIGKILL leaves no TensorBoard behind,
and its private temp folder goes (at once on SIGHUP; at the next start after a SIGKILL).

Before: TensorBoard ran on with ppid 1, listening, and its folder stayed. The run is a copy of a
recorded one with a real event file written by the tensorboard package, served by the real
pinned TensorBoard."""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from core.run.tensorboard import HOME_PREFIX, clean_stale_homes
from tests.helpers.event_runs import run_with_events
from tests.helpers.project import ROOT
from tests.helpers.waits import wait_for


def _run_with_events(tmp_path: Path) -> Path:
    return run_with_events(tmp_path / "run")


class Served:
    """``runs tensorboard RUN`` in the background, its temp folders under ``tmp``."""

    def __init__(self, run: Path, tmp: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "main.py"), "runs", "tensorboard", str(run), "--no-browser"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "TMPDIR": str(tmp)},
            start_new_session=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        stdout = self.proc.stdout
        assert stdout is not None
        threading.Thread(target=lambda: [self.lines.put(line) for line in stdout], daemon=True).start()
        self.seen = ""

    def ready(self, timeout_s: float = 120) -> psutil.Process:
        """TensorBoard's process, once it answers."""
        deadline = time.monotonic() + timeout_s
        while "Ctrl-C stops it" not in self.seen:
            assert time.monotonic() < deadline and self.proc.poll() is None, self.seen
            try:
                self.seen += self.lines.get(timeout=0.5)
            except queue.Empty:
                continue
        m = re.search(r"TensorBoard on http://127\.0\.0\.1:(\d+)/ \(pid (\d+)\)", self.seen)
        assert m, self.seen
        return psutil.Process(int(m.group(2)))

    def end(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)


def _gone(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _kill_servers_of(run: Path) -> None:
    """After a test, a TensorBoard it failed to end (its command line names the run)."""
    for p in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            if any(str(run) in part for part in p.info["cmdline"] or []) and "tensorboard" in " ".join(
                p.info["cmdline"]
            ):
                p.kill()


def _homes(tmp: Path) -> list[Path]:
    return sorted(p for p in tmp.iterdir() if p.name.startswith(HOME_PREFIX))


@pytest.mark.timeout(600)
def test_sighup_stops_tensorboard_and_removes_its_folder(tmp_path: Path) -> None:
    run, tmp = _run_with_events(tmp_path), tmp_path / "tmp"
    tmp.mkdir()
    served = Served(run, tmp)
    try:
        tensorboard = served.ready()
        assert len(_homes(tmp)) == 1
        served.proc.send_signal(signal.SIGHUP)
        served.proc.wait(60)
        wait_for(lambda: _gone(tensorboard), 30, "TensorBoard to end")
        assert _homes(tmp) == []
    finally:
        served.end()
        _kill_servers_of(run)


@pytest.mark.timeout(600)
def test_sigkill_takes_tensorboard_down_and_the_next_start_removes_the_folder(tmp_path: Path) -> None:
    run, tmp = _run_with_events(tmp_path), tmp_path / "tmp"
    tmp.mkdir()
    first = Served(run, tmp)
    second: Served | None = None
    try:
        tensorboard = first.ready()
        (left,) = _homes(tmp)
        os.kill(first.proc.pid, signal.SIGKILL)
        first.proc.wait(30)
        wait_for(lambda: _gone(tensorboard), 30, "TensorBoard to end with its parent")
        assert _homes(tmp) == [left]  # no handler ran: the folder is there until the next start
        second = Served(run, tmp)
        second.ready()
        (mine,) = _homes(tmp)
        assert mine != left
        second.proc.send_signal(signal.SIGINT)
        assert second.proc.wait(60) == 0
        assert _homes(tmp) == []
    finally:
        first.end()
        if second is not None:
            second.end()
        _kill_servers_of(run)


def test_a_folder_in_use_or_just_made_is_not_cleaned(tmp_path: Path) -> None:
    import json

    mine = tmp_path / f"{HOME_PREFIX}mine"
    mine.mkdir()
    (mine / "owner.json").write_text(json.dumps({"pid": os.getpid(), "started": None}))
    fresh = tmp_path / f"{HOME_PREFIX}fresh"  # made moments ago, its owner not yet written
    fresh.mkdir()
    dead = tmp_path / f"{HOME_PREFIX}dead"
    dead.mkdir()
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    (dead / "owner.json").write_text(json.dumps({"pid": child.pid, "started": 1.0}))
    zombie = tmp_path / f"{HOME_PREFIX}zombie"  # its TensorBoard killed, not yet reaped: it has ended
    (zombie / ".tensorboard-info").mkdir(parents=True)
    unreaped = subprocess.Popen([sys.executable, "-c", "pass"])
    wait_for(lambda: psutil.Process(unreaped.pid).status() == psutil.STATUS_ZOMBIE, 30, "a zombie")
    (zombie / "owner.json").write_text(json.dumps({"pid": unreaped.pid, "started": None}))
    (zombie / ".tensorboard-info" / f"pid-{unreaped.pid}.info").write_text("{}")
    other = tmp_path / "not-ours"
    other.mkdir()
    try:
        assert sorted(clean_stale_homes(tmp_path)) == [dead, zombie]
    finally:
        unreaped.wait()
    assert mine.is_dir() and fresh.is_dir() and other.is_dir() and not dead.exists()
