"""The agent's serve mode: it outlives its controller, and a reattach resumes by byte offset."""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from core.agent import artifact_file

AGENT = artifact_file()  # the zipapp, as shipped


@pytest.fixture(autouse=True)
def no_strays(tmp_path: Path) -> Iterator[None]:
    """A serving agent outlives its relay by design; a failed test must not leave one behind."""
    yield
    for p in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if p.cwd().startswith(str(tmp_path)):
                p.kill()


class Relay:
    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-u", str(AGENT), *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        self.buf = b""

    def send(self, command: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(command) + "\n").encode())
        self.proc.stdin.flush()

    def until(self, pred: Any, timeout_s: float = 20) -> list[dict[str, Any]]:
        """Events up to and including the first for which ``pred`` is true."""
        assert self.proc.stdout is not None
        events: list[dict[str, Any]] = []
        deadline = time.time() + timeout_s
        while True:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                events.append(json.loads(line))
                if pred(events[-1]):
                    return events
            assert time.time() < deadline, events
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if ready:
                data = os.read(self.proc.stdout.fileno(), 65536)
                assert data, events
                self.buf += data

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(10)


def test_serving_agent_keeps_a_role_after_disconnect_and_resume_sends_exactly_the_rest(tmp_path: Path):
    sock = tmp_path / "agents" / "a.sock"
    log = tmp_path / "roles" / "w.log"
    script = "import time\nfor i in range(30):\n    print('line %02d é' % i, flush=True)\n    time.sleep(0.05)\n"
    first = Relay("--serve", str(sock), "--on-disconnect", "keep", "--log", str(tmp_path / "agent.log"))
    hello = first.until(lambda e: e["ev"] == "hello")[-1]
    assert hello["serving"] and hello["run_dir"] == str(sock.parent)
    assert stat.S_IMODE(sock.stat().st_mode) == 0o600 and stat.S_IMODE(sock.parent.stat().st_mode) == 0o700
    first.send({"op": "resume", "seen": {}})
    first.send({"op": "start", "role": "w", "argv": [sys.executable, "-c", script], "log": str(log)})
    events = first.until(lambda e: e["ev"] == "output" and "line 03" in e["data"])
    got = "".join(e["data"] for e in events if e["ev"] == "output")
    end = [e for e in events if e["ev"] == "output"][-1]["end"]
    first.close()  # the controller goes away; the role runs on
    time.sleep(0.5)
    second = Relay("--attach", str(sock))
    hello = second.until(lambda e: e["ev"] == "hello")[-1]
    assert "w" in hello["roles"] or "w" in hello["ended"]
    second.send({"op": "resume", "seen": {"w": {"attempt": 1, "end": end}}})
    events = second.until(lambda e: e["ev"] == "exited")
    rest = "".join(e["data"] for e in events if e["ev"] == "output")
    assert (got + rest).encode() == log.read_bytes()
    assert [e["returncode"] for e in events if e["ev"] == "exited"] == [0]
    second.send({"op": "shutdown"})
    second.until(lambda e: e["ev"] == "bye")
    second.close()
    deadline = time.time() + 10
    while sock.exists():  # the agent removes its socket when it ends
        assert time.time() < deadline
        time.sleep(0.1)


def test_a_stale_socket_is_replaced_and_a_live_one_is_refused(tmp_path: Path):
    sock = tmp_path / "a.sock"
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(sock))
    stale.close()  # the file stays, nobody listens: as after a killed agent
    first = Relay("--serve", str(sock))
    first.until(lambda e: e["ev"] == "hello")
    second = Relay("--serve", str(sock))
    refused = second.until(lambda e: e["ev"] == "attach_failed")[-1]
    assert "already serves" in refused["message"]
    assert second.proc.wait(10) == 3
    first.send({"op": "shutdown"})
    first.until(lambda e: e["ev"] == "bye")
    first.close()
    missing = Relay("--attach", str(tmp_path / "nobody.sock"))
    assert missing.until(lambda e: e["ev"] == "attach_failed")[-1]["message"].startswith("no agent at")
    assert missing.proc.wait(10) == 3


def test_a_second_controller_is_refused_while_the_first_is_heard(tmp_path: Path):
    sock = tmp_path / "agents" / "a.sock"
    first = Relay("--serve", str(sock), "--on-disconnect", "keep", "--log", str(tmp_path / "agent.log"))
    first.until(lambda e: e["ev"] == "hello")
    first.send({"op": "resume", "seen": {}})
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]  # keeps the agent for the third
    first.send({"op": "start", "role": "w", "argv": sleeper, "log": str(tmp_path / "w.log")})
    first.until(lambda e: e["ev"] == "started")
    second = Relay("--attach", str(sock))
    refused = second.until(lambda e: e["ev"] == "attach_failed")[-1]
    assert refused["busy"] is True and "another controller is connected" in refused["message"], refused
    assert second.proc.wait(10) == 0  # the agent hung up on it
    first.send({"op": "ping", "id": 2})  # the first one was not disturbed
    assert first.until(lambda e: e["ev"] == "pong")[-1]["id"] == 2
    first.close()  # gone: the next one is welcome
    third = Relay("--attach", str(sock))
    answer = third.until(lambda e: e["ev"] in ("hello", "attach_failed"))[-1]
    assert answer["ev"] == "hello", answer
    third.send({"op": "shutdown"})
    third.until(lambda e: e["ev"] == "bye")
    third.close()


# What a serving daemon runs (core/agent/serve.py's serve), its controller's relay held back: the
# test connects only after the agent has ticked SLOW_TICKS times alone, as a starter's relay that
# the scheduler runs late after the fork (a launch of 1,025 roles under load lost 3 hosts so).
SLOW_TICKS = 20
DAEMON = """
import os, sys
from core.agent.serve import bind_owner_only, serve
from core.agent.supervisor import Agent
listener = bind_owner_only(sys.argv[1])
agent = Agent(open(os.devnull, "w"))
ticks = 0
real_tick = agent.tick
def tick():
    global ticks
    ticks += 1
    if ticks == int(sys.argv[2]):
        print("ticked alone", flush=True)
    real_tick()
agent.tick = tick
options = {} if sys.argv[3] == "default" else {"first_connect_s": float(sys.argv[3])}
if sys.argv[4] != "none":  # the starter whose relay is to connect: a process of the test's
    from core.agent.serve import _process_alive
    options["starter_alive"] = lambda: _process_alive(int(sys.argv[4]))
serve(agent, listener, **options)
print("served", flush=True)
"""


def _daemon(sock: Path, first_connect_s: float | None, *, starter: int | None = None) -> subprocess.Popen[str]:
    root = Path(__file__).resolve().parents[2]
    argv = [
        sys.executable,
        "-c",
        DAEMON,
        str(sock),
        str(SLOW_TICKS),
        str(first_connect_s or "default"),
        str(starter or "none"),
    ]
    return subprocess.Popen(argv, cwd=root, stdout=subprocess.PIPE, text=True)


@pytest.mark.timeout(60)
def test_a_new_agent_waits_for_a_relay_that_connects_late(tmp_path: Path):
    sock = tmp_path / "agents" / "127.0.0.13.sock"
    daemon = _daemon(sock, None)  # serve's own wait for a first controller
    try:
        assert daemon.stdout is not None
        first = daemon.stdout.readline().strip()
        # Before: "served": the agent ended at its first tick without a controller, and the late
        # relay found no socket ("no agent at ...: No such file or directory").
        assert first == "ticked alone", first
        relay = Relay("--attach", str(sock))
        answer = relay.until(lambda e: e["ev"] in ("hello", "attach_failed"))[-1]
        assert answer["ev"] == "hello", answer
        relay.send({"op": "shutdown"})
        relay.until(lambda e: e["ev"] == "bye")
        relay.close()
        assert daemon.wait(20) == 0 and daemon.stdout.readline().strip() == "served"
    finally:
        daemon.kill()
        daemon.wait()


@pytest.mark.timeout(60)
def test_a_new_agent_nobody_connects_to_ends_by_itself(tmp_path: Path):
    sock = tmp_path / "agents" / "a.sock"
    daemon = _daemon(sock, 0.5)  # its starter died before connecting: it does not stay
    try:
        assert daemon.stdout is not None
        assert daemon.stdout.read().splitlines()[-1:] == ["served"]
        assert daemon.wait(20) == 0
    finally:
        daemon.kill()
        daemon.wait()


@pytest.mark.timeout(60)
def test_a_new_agent_whose_starter_died_before_connecting_ends_at_once(tmp_path: Path):
    starter = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    daemon = _daemon(tmp_path / "agents" / "a.sock", 3600.0, starter=starter.pid)  # an hour's wait, if alive
    try:
        assert daemon.stdout is not None
        assert daemon.stdout.readline().strip() == "ticked alone"  # waits while its starter lives
        starter.kill()  # a launch cancelled while connecting kills the relay, the starter
        starter.wait()
        assert daemon.stdout.readline().strip() == "served"  # gone, not lingering for the hour
        assert daemon.wait(20) == 0
    finally:
        for proc in (starter, daemon):
            proc.kill()
            proc.wait()
