"""``python main.py launch`` run in the background as a user runs it, and what a run directory
says about its roles (their states, their pids)."""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.helpers.project import ROOT, run_cli


def run_dir_of(result: subprocess.CompletedProcess[str]) -> Path:
    m = re.search(r"run directory: (\S+)", result.stdout)
    assert m, result.stdout
    return Path(m.group(1))


def journal(run_dir: Path, kind: str) -> list[dict[str, Any]]:
    """The run's journal records of ``kind`` so far (none before its first event)."""
    path = run_dir / "events.jsonl"
    lines = path.read_text().splitlines() if path.is_file() else []
    return [r for r in map(json.loads, lines) if r.get("kind") == kind]


def states(run_dir: Path, role: str) -> list[str]:
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    return [e["state"] for e in events if e["kind"] == "role_state" and e["role"] == role]


class Launch:
    """``python main.py launch`` running in the background, controlled like a user would."""

    def __init__(self, cluster: Path, run_dir: Path) -> None:
        self.run_dir = run_dir
        self._journal_at = 0  # bytes of events.jsonl read so far
        self._journal_states: dict[str, tuple[str, int]] = {}
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
        # What it prints, read as it prints it (wait_said), all of it returned by finish().
        self._said: list[str] = []
        self._reader = threading.Thread(target=self._read_stdout, name="launch-stdout", daemon=True)
        self._reader.start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._said.append(line)

    def said(self) -> str:
        """What the launch printed so far."""
        return "".join(list(self._said))

    def wait_said(self, pattern: str, timeout_s: float = 30) -> re.Match[str]:
        """The first match of ``pattern`` in what the launch printed, once it printed it."""
        deadline = time.time() + timeout_s
        while True:
            found = re.search(pattern, self.said())
            if found is not None:
                return found
            if time.time() > deadline or (self.proc.poll() is not None and not self._reader.is_alive()):
                raise AssertionError(f"the launch never printed {pattern!r}:\n{self.said()[-3000:]}")
            time.sleep(0.1)

    def status(self) -> dict[str, Any]:
        result = run_cli("ctl", str(self.run_dir), "status", "--json", timeout=30)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    def role(self, name: str) -> dict[str, Any]:
        return next(r for r in self.status()["roles"] if r["role"] == name)

    def journal_state(self, name: str) -> tuple[str, int] | None:
        """``name``'s newest (state, attempt) in the run's journal (None before its first record),
        read on from where the last call stopped: a file read, not a CLI process."""
        path = self.run_dir / "events.jsonl"
        try:
            with path.open("rb") as journal:
                if journal.seek(0, 2) < self._journal_at:  # a new journal: read it from its start
                    self._journal_at, self._journal_states = 0, {}
                journal.seek(self._journal_at)
                chunk = journal.read()
        except FileNotFoundError:
            return None
        complete = chunk[: chunk.rfind(b"\n") + 1]  # a line still being written is read next time
        self._journal_at += len(complete)
        for line in complete.splitlines():
            record = json.loads(line)
            if record.get("kind") == "role_state":
                self._journal_states[record["role"]] = (record["state"], record["attempt"])
        return self._journal_states.get(name)

    def wait_role(self, name: str, state: str, timeout_s: float = 60, attempt: int | None = None) -> dict[str, Any]:
        """The role's status (``ctl status``) once it is in ``state`` (and ``attempt``). Waits on the
        journal, which the controller flushes at each state change, and asks ``ctl`` only once the
        journal says the role got there (or says nothing of it yet): a ``ctl`` process every poll
        took ~0.5 s of CPU each and, through a TensorFlow start of 30 s, most of a core on a
        2-core machine, slowing the very roles the test waits for."""
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            asked = False
            if (self.run_dir / "run.json").exists() and "control_socket" in (self.run_dir / "run.json").read_text():
                newest = self.journal_state(name)
                if newest is None or (newest[0] == state and (attempt is None or newest[1] == attempt)):
                    asked = True
                    role = self.role(name)
                    if role["state"] == state and (attempt is None or role["attempt"] == attempt):
                        return role
            time.sleep(0.3 if asked else 0.1)
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
        self.proc.wait(timeout=timeout_s)
        self._reader.join(timeout=30)  # its stdout's end: the last lines read
        return self.proc.returncode, self.said()

    def kill(self) -> None:
        """Ctrl-C, as a user ends a launch; a launcher that has not ended 30 s later is killed, and
        with it the run's host agents and what they started: serve agents outlive their launcher
        by design (for ``attach``), so a SIGKILLed launcher alone left a whole cluster training
        (seen under load 39: a module's cluster ran on 27 minutes after its tests)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                kill_run_agents(self.run_dir)
        self._reader.join(timeout=30)


def kill_run_agents(run_dir: Path) -> None:
    """SIGKILL each of ``run_dir``'s host agents (``agents/*.sock.pid``, checked to be this run's by
    its command line) and every process under it."""
    for pid_file in sorted((run_dir / "agents").glob("*.sock.pid")):
        try:
            agent = psutil.Process(int(pid_file.read_text().split()[0]))
            if str(run_dir) not in " ".join(agent.cmdline()):
                continue  # the pid was reused by another process
            procs = [*agent.children(recursive=True), agent]
        except (ValueError, IndexError, OSError, psutil.Error):
            continue
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        psutil.wait_procs(procs, timeout=10)


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
