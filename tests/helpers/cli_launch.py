"""``python main.py launch`` run in the background as a user runs it, and what a run directory
says about its roles (their states, their pids)."""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.project import ROOT, run_cli


def run_dir_of(result: subprocess.CompletedProcess[str]) -> Path:
    m = re.search(r"run directory: (\S+)", result.stdout)
    assert m, result.stdout
    return Path(m.group(1))


def states(run_dir: Path, role: str) -> list[str]:
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    return [e["state"] for e in events if e["kind"] == "role_state" and e["role"] == role]


class Launch:
    """``python main.py launch`` running in the background, controlled like a user would."""

    def __init__(self, cluster: Path, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "main.py"),
                "launch",
                str(cluster),
                "--run-dir",
                str(run_dir),
                "--progress-every",
                "1",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def status(self) -> dict[str, Any]:
        result = run_cli("ctl", str(self.run_dir), "status", "--json", timeout=30)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    def role(self, name: str) -> dict[str, Any]:
        return next(r for r in self.status()["roles"] if r["role"] == name)

    def wait_role(self, name: str, state: str, timeout_s: float = 60, attempt: int | None = None) -> dict[str, Any]:
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            if (self.run_dir / "run.json").exists() and "control_socket" in (self.run_dir / "run.json").read_text():
                role = self.role(name)
                if role["state"] == state and (attempt is None or role["attempt"] == attempt):
                    return role
            time.sleep(0.3)
        raise AssertionError(f"{name} never reached {state}: {self.status()}")

    def wait_output(self, name: str, pattern: str, attempt: int = 1, timeout_s: float = 60) -> None:
        log = self.run_dir / "roles" / name.replace(":", "-") / f"attempt-{attempt}.log"
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            if log.exists() and re.search(pattern, log.read_text(errors="replace")):
                return
            time.sleep(0.2)
        raise AssertionError(f"{pattern!r} never appeared in {log}")

    def ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run_cli("ctl", str(self.run_dir), *args, timeout=30)

    def finish(self, timeout_s: float = 120) -> tuple[int, str]:
        out, _ = self.proc.communicate(timeout=timeout_s)
        return self.proc.returncode, out

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


@pytest.fixture
def launches() -> Iterator[list[Launch]]:
    """The launches a test started: each is ended after the test, passed or failed."""
    started: list[Launch] = []
    yield started
    for launch in started:
        launch.kill()


@contextlib.contextmanager
def launching(path: Path, *args: str) -> Iterator[subprocess.Popen[bytes]]:
    """``python main.py launch PATH ARGS`` in the background; killed after if still running."""
    launcher = subprocess.Popen(
        [sys.executable, str(ROOT / "main.py"), "launch", str(path), "--progress-every", "0", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield launcher
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()


def role_pids(run_dir: Path) -> list[int]:
    pids: list[int] = []
    journal = run_dir / "events.jsonl"
    if not journal.is_file():  # the run is listed (run.json, its lock) a moment before its first event
        return pids
    for line in journal.read_text().splitlines():
        record = json.loads(line)
        if record.get("kind") == "role_pid":
            pids.append(int(record["pid"]))
    return pids
