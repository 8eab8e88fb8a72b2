"""The host agent on its own, through its JSON-lines protocol, with real processes."""

from __future__ import annotations

import itertools
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.agent_process import AgentProcess, start
from tests.helpers.ports import free_ports
from tests.helpers.procs import assert_nothing_left, listening
from tests.helpers.project import ROOT

STUBBORN = str(ROOT / "tests" / "helpers" / "stubborn.py")


@pytest.fixture
def agent():
    a = AgentProcess()
    yield a
    if a.proc.poll() is None:
        a.close()


def test_exit_code_and_output_reach_disk_and_stream(agent: AgentProcess, tmp_path: Path):
    log = tmp_path / "a" / "attempt-1.log"
    start(
        agent,
        "worker:0",
        [sys.executable, "-c", "import sys; print('hello'); print('oops', file=sys.stderr); sys.exit(3)"],
        log,
    )
    exited = agent.wait_for("exited", role="worker:0")
    assert exited["returncode"] == 3 and exited["signal"] is None and exited["stopped"] is False
    assert log.read_text() == "hello\noops\n"
    assert agent.output("worker:0") == "hello\noops\n"  # all output arrives before the exit


def test_invalid_utf8_and_carriage_returns_survive(agent: AgentProcess, tmp_path: Path):
    code = "import os; os.write(1, b'bad \\xff\\xfe bytes\\n10%\\r50%\\r100%\\n')"
    start(agent, "worker:0", [sys.executable, "-c", code], tmp_path / "l.log")
    agent.wait_for("exited", role="worker:0")
    # Each byte that is not UTF-8 travels as one lone surrogate: the original bytes come back exactly.
    assert agent.output("worker:0") == "bad \udcff\udcfe bytes\n10%\r50%\r100%\n"
    assert agent.output("worker:0").encode("utf-8", "surrogateescape") == (tmp_path / "l.log").read_bytes()
    assert (tmp_path / "l.log").read_bytes() == b"bad \xff\xfe bytes\n10%\r50%\r100%\n"


def test_env_and_cwd_are_passed(agent: AgentProcess, tmp_path: Path):
    agent.send(
        {
            "op": "start",
            "role": "ps:0",
            "argv": [sys.executable, "-c", "import os; print(os.getcwd(), os.environ['X'])"],
            "env": {"X": "a b;$c"},
            "cwd": str(tmp_path),
            "log": str(tmp_path / "l.log"),
        }
    )
    agent.wait_for("exited", role="ps:0")
    assert agent.output("ps:0").strip() == f"{tmp_path} a b;$c"


def test_missing_program_is_start_failed_with_reason(agent: AgentProcess, tmp_path: Path):
    agent.send({"op": "start", "role": "ps:0", "argv": ["/no/such/trainer"], "log": str(tmp_path / "l.log")})
    failed = agent.wait_for("start_failed", role="ps:0")
    assert "No such file" in failed["error"]
    assert "cannot start" in (tmp_path / "l.log").read_text()


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("not json", "not a JSON line"),
        ("[1, 2]", '"op"'),
        ('{"op": "fly"}', "unknown op"),
        ('{"op": "start", "role": "w:0"}', "bad start command"),
        ('{"op": "start", "role": "w:0", "argv": "ls", "log": "/tmp/x"}', "argv must be"),
        ('{"op": "start", "role": "w:0", "argv": ["ls"], "log": "/tmp/x", "output_period_s": 60}', "output_period_s"),
        ('{"op": "stop", "role": "nobody:0"}', "no running role"),
        ('{"op": "signal", "role": "nobody:0", "signal": "STOP"}', "no running role"),
    ],
)
def test_malformed_input_gets_an_error_not_a_crash(agent: AgentProcess, line: str, needle: str):
    agent.send(line)
    error = agent.wait_for("error")
    assert needle in error["message"]
    agent.send({"op": "ping", "id": 7})
    assert agent.wait_for("pong")["id"] == 7  # still alive


def test_stop_escalates_and_leaves_no_process_or_port(agent: AgentProcess, tmp_path: Path):
    (port,) = free_ports(1)
    marker = f"{tmp_path}/stop"  # an extra argument, so the test can find every process of it
    start(agent, "worker:0", [sys.executable, STUBBORN, str(port), marker], tmp_path / "l.log")
    deadline = time.time() + 10
    while agent.output("worker:0").count("\n") < 3 and time.time() < deadline:
        agent.next_event()
    assert listening([port]), "the stubborn role should hold its port"
    t0 = time.time()
    agent.send({"op": "stop", "role": "worker:0", "grace_s": 1.0})
    exited = agent.wait_for("exited", role="worker:0")
    assert exited["signal"] == 9 and exited["stopped"] is True  # it ignored SIGTERM
    assert time.time() - t0 >= 0.9
    assert_nothing_left([port], marker, timeout_s=0.5)


def test_children_left_by_an_exited_role_are_cleaned_up(agent: AgentProcess, tmp_path: Path):
    (port,) = free_ports(1)
    marker = f"{tmp_path}/exits"
    start(
        agent,
        "worker:0",
        [sys.executable, STUBBORN, str(port), marker],
        tmp_path / "l.log",
        env={"STUBBORN_EXIT_AFTER": "1"},
    )
    exited = agent.wait_for("exited", role="worker:0", timeout_s=30)
    assert exited["returncode"] == 0 and exited["leftovers_killed"] == 2
    assert_nothing_left([port], marker, timeout_s=0.5)


def test_closing_stdin_stops_every_role(agent: AgentProcess, tmp_path: Path):
    ports = free_ports(2)
    marker = f"{tmp_path}/eof"
    for i, port in enumerate(ports):
        start(agent, f"worker:{i}", [sys.executable, STUBBORN, str(port), marker], tmp_path / f"{i}.log")
    time.sleep(0.5)
    assert agent.close() == 0
    assert_nothing_left(ports, marker, timeout_s=1.0)


def test_signal_stop_and_continue(agent: AgentProcess, tmp_path: Path):
    code = "import time\nfor i in range(1000):\n    print(i, flush=True); time.sleep(0.05)"
    started = start(agent, "worker:0", [sys.executable, "-c", code], tmp_path / "l.log")
    import psutil

    agent.send({"op": "signal", "role": "worker:0", "signal": "STOP"})
    time.sleep(0.3)
    assert psutil.Process(started["pid"]).status() == psutil.STATUS_STOPPED
    agent.send({"op": "signal", "role": "worker:0", "signal": "CONT"})
    time.sleep(0.3)
    assert psutil.Process(started["pid"]).status() != psutil.STATUS_STOPPED
    agent.send({"op": "kill", "role": "worker:0"})
    assert agent.wait_for("exited", role="worker:0")["signal"] == 9


@pytest.mark.parametrize("period_s", [None, 1.0])
def test_a_chatty_role_s_output_goes_in_a_few_events_a_second_not_one_a_tick(
    agent: AgentProcess, tmp_path: Path, period_s: float | None
):
    """Each output event costs the controller the same whatever its size: a role printing 50 lines a
    second is read to its end at most once a period (OUTPUT_PERIOD_S, 4 times a second, or the
    ``output_period_s`` its start asked for: a large cluster's), not at every 0.1 s tick (~2,600
    events a second at 256 workers before), and every line still arrives, in order."""
    from core.agent.protocol import OUTPUT_PERIOD_S

    period = OUTPUT_PERIOD_S if period_s is None else period_s
    # Silent for a period and a second before it exits: its last lines go in a periodic read, not
    # in the reads at its end, which come at once (a loaded machine's late read of the last lines
    # and the read at the end then made two events 1 ms apart).
    code = (
        "import time\nfor i in range(150):\n    print(f'line {i}', flush=True)\n    time.sleep(0.02)\n"
        f"time.sleep({period + 1.0})\n"
    )
    start(agent, "worker:0", [sys.executable, "-u", "-c", code], tmp_path / "l.log", output_period_s=period_s)
    agent.wait_for("exited", role="worker:0", timeout_s=60)
    events = [e for e in agent.events if e["ev"] == "output" and e["role"] == "worker:0"]
    assert agent.output("worker:0") == "".join(f"line {i}\n" for i in range(150))
    first, last = events[0]["t"], events[-1]["t"]
    # Read to the end, then again a period later: never closer than the period (a read that
    # stops at the budget, or the role's end, may come sooner; neither happens here).
    gaps = [b["t"] - a["t"] for a, b in itertools.pairwise(events)]
    assert min(gaps) >= period - 0.05, gaps
    assert len(events) <= (last - first) / period + 3, (len(events), last - first)
