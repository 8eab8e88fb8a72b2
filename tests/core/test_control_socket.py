"""The control socket under hostile clients, against a real launch (a controller, its local agent
and three real role processes): a line nested past the recursion limit, slow, idle and
half-open clients, a busy controller, a status whose roles print 30 KB lines, and a launch that
answers garbage. Each once killed the server, blocked every request, or made ``ctl`` say "not
running" about a run that ran."""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.cli.main import main as cli_main
from core.cluster.spec import load
from core.controller.control_server import ControlServer
from core.controller.session import LaunchSession
from core.run import control
from core.run.events import Event
from core.run.reader import RunReader
from core.run.status import RoleState
from tests.helpers.control_clients import Dripper, bad_listener, connect, exchange, read_reply, wait_for
from tests.helpers.ports import free_ports
from tests.helpers.procs import assert_nothing_left
from tests.helpers.project import run_cli

SCALE = int(os.environ.get("TOWERDECK_FUZZ_SCALE", "1"))

ROLE = """
import sys, time
lines, chars = int(sys.argv[1]), int(sys.argv[2])
for i in range(lines):
    print(f"line {i} " + "=" * chars + f" end {i}", flush=True)
print("ready", flush=True)
while True:
    time.sleep(0.2)
"""

CLUSTER = """
name = "ctl"
strategy = "between_graph"
launch_style = "flags"
workdir = "{workdir}"
command = ["python", "-u", "role.py", "{lines}", "{chars}", "{marker}"]
stop_grace_s = 3
start_s = 0.5
[jobs.ps]
tasks = ["127.0.0.1:{p[0]}"]
[jobs.worker]
tasks = ["127.0.0.1:{p[1]}", "127.0.0.1:{p[2]}"]
"""
ROLES = ("ps:0", "worker:0", "worker:1")


@contextlib.contextmanager
def live_run(folder: Path, *, lines: int = 0, chars: int = 0) -> Iterator[LaunchSession]:
    """A launch of three roles that print ``lines`` lines of ``chars`` characters, then wait;
    stopped and checked for leftovers at the end."""
    folder.mkdir(parents=True, exist_ok=True)
    ports = free_ports(3)
    marker = f"--ctl_test={folder.name}-{time.monotonic_ns()}"  # this launch's processes, no other's
    (folder / "role.py").write_text(ROLE)
    path = folder / "c.toml"
    path.write_text(CLUSTER.format(workdir=folder, lines=lines, chars=chars, marker=marker, p=ports))
    spec, problems = load(path)
    assert spec is not None, problems
    session = LaunchSession.launch(spec, path=folder / "run")
    controller = session.controller
    session.start()
    try:
        wait_for(
            lambda: (
                all(r.state == RoleState.RUNNING for r in controller.status().roles)
                and all("ready" in controller.last_lines(r, 2) for r in ROLES)
            ),
            60,
            "every role to run and print its lines",
        )
        yield session
    finally:
        controller.stop_all()
        controller.wait(60)
        session.close()
        controller.close()
        assert_nothing_left(ports, marker)


def sock_of(session: LaunchSession) -> Path:
    return Path(json.loads((session.run.path / "run.json").read_text())["control_socket"])


def one_answer(data: bytes) -> dict[str, Any]:
    """The server's reply: exactly one JSON object line."""
    assert data.endswith(b"\n") and data.count(b"\n") == 1, data[:200]
    reply = json.loads(data)
    assert isinstance(reply, dict) and isinstance(reply.get("ok"), bool), reply
    return reply


def client_threads() -> int:
    return sum(t.name == "control-client" for t in threading.enumerate())


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli_main(list(args), out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def talkative(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LaunchSession]:
    """One launch for the module: each role's last ten lines are 30 KB each (Keras progress bars,
    placement logs), ~900 KB of last_lines in all."""
    with live_run(tmp_path_factory.mktemp("talkative"), lines=12, chars=30_000) as session:
        yield session


# ------------------------------------------------------------------------------------------
# 1. One line killed the server for the rest of the run


HOSTILE_LINES = [
    b"[" * 60000 + b"\n",  # RecursionError in json.loads
    b'{"a": ' * 60000 + b"\n",
    b"\xff\xfe{}\n",  # not UTF-8
    b'{"action": "status"\xc3}\n',
    b"[1, 2]\n",
    b'"status"\n',
    b"null\n",
    b"1" * 5000 + b"\n",  # an integer of more digits than Python converts
    b"{" + b" " * 70_000 + b"}\n",  # past the request limit
    b"\n",
    b'{"action": "stop"',  # half-open: the line never ends, the client says no more
    b"",  # connected, said nothing, half-closed
]


@pytest.mark.timeout(120, method="thread")
def test_a_line_nested_past_the_recursion_limit_is_a_bad_request_and_the_server_goes_on(
    talkative: LaunchSession,
) -> None:
    """Before: ``"[" * 60000`` raised RecursionError in the control thread, which died; every ctl
    after it said "not running" while the run went on."""
    sock = sock_of(talkative)
    for line in HOSTILE_LINES:
        reply = one_answer(exchange(sock, line))
        assert reply["ok"] is False and reply["error"].startswith("bad request: "), (line[:40], reply)
        assert control.request(sock, {"action": "status"}, timeout_s=10)["ok"], line[:40]
    assert one_answer(exchange(sock, b"[" * 60000 + b"\n"))["error"] == "bad request: JSON nested too deep"
    assert one_answer(exchange(sock, b"\xff\n"))["error"] == "bad request: not UTF-8 (byte 0: b'\\xff')"
    code, out, err = cli("ctl", str(talkative.run.path), "status")
    assert code == 0 and "worker:1" in out, err


# ------------------------------------------------------------------------------------------
# 2. One slow client blocked every request; a stop reported failed ran later


@pytest.mark.timeout(180, method="thread")
def test_a_slow_client_and_two_hundred_idle_ones_delay_no_request_and_stop_all_is_done(tmp_path: Path) -> None:
    """Before: the server read one connection at a time with a 5 s timeout per recv, so a client
    sending a byte now and then held it for good, 200 idle connects queued behind an 8-deep
    backlog, and ``ctl stop-all`` said "not running" (rc 1) while its stop stayed queued."""
    with live_run(tmp_path) as session:
        sock = sock_of(session)
        dripper = Dripper(sock, every_s=0.5)
        idle: list[socket.socket] = []
        try:
            for _ in range(3):
                assert control.request(sock, {"action": "status"}, timeout_s=5)["ok"]
            idle += [connect(sock) for _ in range(200)]
            for _ in range(3):
                assert control.request(sock, {"action": "status"}, timeout_s=5)["ok"]
            result = run_cli("ctl", str(session.run.path), "stop-all", timeout=60)
            assert result.returncode == 0 and result.stdout.strip() == "stopping every role", result.stderr
            assert session.controller.wait(60), "stop-all was answered, the roles did not stop"
            # Over, its socket still open (a window keeps it until it closes): refused at once, with why.
            reply = control.request(sock, {"action": "stop", "role": "worker:0"}, timeout_s=5)
            assert reply == {"ok": False, "error": "this launch controls the run no more (it is over, or was detached)"}
            # The slow one is told why within its deadline, and so is each idle one.
            assert dripper.done.wait(30)
            reply = one_answer(dripper.reply)
            assert reply["error"] == "bad request: no whole request line in time; send one JSON line at once"
            assert one_answer(read_reply(idle[0], 30))["error"].startswith("bad request: no whole request")
        finally:
            dripper.close()
            for s in idle:
                s.close()
        wait_for(lambda: client_threads() == 0, 30, "every connection's thread to end")


@pytest.mark.timeout(120, method="thread")
def test_past_its_connection_cap_the_server_says_busy_at_once(talkative: LaunchSession, tmp_path: Path) -> None:
    server = ControlServer(talkative.controller, tmp_path, request_deadline_s=60, max_connections=4)
    path = server.start()
    idle = [connect(path) for _ in range(4)]
    try:
        wait_for(lambda: client_threads() >= 4, 10, "the idle connections to be served")
        reply = control.request(path, {"action": "status"}, timeout_s=5)
        assert reply == {"ok": False, "error": "busy: 4 requests at once; try again"}
        idle.pop().close()  # one leaves: its slot is free again
        wait_for(lambda: control.request(path, {"action": "status"}, timeout_s=5)["ok"], 10, "a free slot")
    finally:
        for s in idle:
            s.close()
        server.close()


class Blocker:
    """A listener of the controller's events that holds the controller's thread while asked:
    a controller busy with something else (a slow disk, a stuck transport)."""

    def __init__(self) -> None:
        self.hold = threading.Event()
        self.holding = threading.Event()
        self.release = threading.Event()

    def __call__(self, event: Event) -> None:
        if self.hold.is_set() and not self.release.is_set():
            self.holding.set()
            self.release.wait(120)


@pytest.mark.timeout(180, method="thread")
def test_a_command_the_busy_controller_does_not_take_is_refused_and_never_done(tmp_path: Path) -> None:
    """Before: the server waited 10 s for the controller, answered ``{"ok": false, "error": ""}``
    (ctl: "refused: "), and the stop stayed queued: done once the controller was free."""
    with live_run(tmp_path) as session:
        controller = session.controller
        blocker = Blocker()
        controller.subscribe(blocker)
        blocker.hold.set()
        wait_for(blocker.holding.is_set, 30, "the controller's thread to be held")
        try:
            result = run_cli("ctl", str(session.run.path), "stop", "worker:0", timeout=60)
            assert result.returncode == 1, result.stdout + result.stderr
            assert result.stderr.strip() == (
                "refused: the controller has not taken stop for 8 s (it is busy); withdrawn, nothing was done: try again"
            )
            # stop-all acts at once, so it is never withdrawn: answered under way, done once free
            # (asked through a second server of the same controller, with a shorter wait).
            quick = ControlServer(controller, tmp_path, command_wait_s=0.5)
            try:
                reply = control.request(quick.start(), {"action": "stop_all"})
            finally:
                quick.close()
            assert reply["ok"] and reply["message"].endswith("every role is stopped when it is free"), reply
        finally:
            blocker.release.set()
        assert controller.wait(60), "the stop-all answered as under way was not done"
        journal = (session.run.path / "events.jsonl").read_text().splitlines()
        commands = [r.get("command") for r in map(json.loads, journal) if r.get("kind") == "command"]
        assert commands == ["launch", "stop_all"], commands  # the withdrawn stop never ran
        history = [state for _, state, _ in controller.history("worker:0")]
        assert RoleState.STOPPING in history  # stopped by the stop-all, as every role


# ------------------------------------------------------------------------------------------
# 3. A status past 64 KiB was "not running"


@pytest.mark.timeout(180, method="thread")
def test_the_status_of_roles_printing_30_kb_lines_is_bounded_and_read(talkative: LaunchSession) -> None:
    """Before: the client read the reply with the 64 KiB request limit; three roles printing 30 KB
    lines made a ~1 MB status, and ``ctl status``, ``profile`` and ``why`` said "not running"."""
    run = str(talkative.run.path)
    code, out, err = cli("ctl", run, "status")
    assert code == 0 and not err, err
    assert all(f"  {r:<12} running" in out for r in ROLES), out
    code, out, err = cli("ctl", run, "status", "--json")
    assert code == 0, err
    reply = json.loads(out)
    for role in reply["roles"]:
        lines = role["last_lines"]
        assert len(json.dumps(lines)) <= control.STATUS_TAIL_BYTES
        assert lines[-1] == "ready" and lines[-2].startswith("line 11 ===") and lines[-2].endswith("= end 11")
        assert "characters cut ...]" in lines[-2]
    assert len(json.dumps(reply)) < 64 * 1024  # three roles: far under the documented bound
    # profile and why read the same status first: they get past it to their own answer.
    code, _, err = cli("ctl", run, "why", "worker:0")
    assert "not running" not in err and err.startswith("why: "), err
    reader = RunReader(talkative.run.path)
    reader.start()
    try:
        wait_for(lambda: reader.live, 30, "a window following the run to take its live status")
    finally:
        reader.close()


@settings(max_examples=100 * SCALE, deadline=None)
@given(
    lines=st.lists(st.text(max_size=3000) | st.integers(0, 20_000).map(lambda n: "é" * n), max_size=12),
    budget=st.integers(0, 20_000),
    roles=st.integers(1, 100_000),
)
def test_last_lines_fit_their_budget_newest_first(lines: list[str], budget: int, roles: int) -> None:
    """Each role's last lines fit its budget, and all roles' budgets the status's."""
    assert 0 < control.status_tail_budget(roles) * roles <= control.STATUS_LINES_BYTES
    kept = control.fit_lines(lines, budget)
    assert len(json.dumps(kept)) <= max(budget, 2)
    for shown, line in zip(reversed(kept), reversed(lines), strict=False):  # the newest, in order
        assert shown == line or ("characters cut ...]" in shown and len(shown) < len(line) + 40)
    if lines and budget >= 300:
        assert kept, "a budget of a few hundred bytes shows at least the newest line, cut"


# ------------------------------------------------------------------------------------------
# The client tells "not running" from "no answer" from "garbled or too long"


def _say(data: bytes) -> Any:
    def answer(conn: socket.socket) -> None:
        conn.recv(65536)
        conn.sendall(data)

    return answer


def _silent(conn: socket.socket) -> None:
    conn.recv(65536)
    time.sleep(2)


def _huge(conn: socket.socket) -> None:
    conn.recv(65536)
    block = b"x" * (1 << 20)
    for _ in range((control.REPLY_LIMIT_BYTES >> 20) + 2):
        conn.sendall(block)


@pytest.mark.timeout(120, method="thread")
@pytest.mark.parametrize(
    ("answer", "error", "message"),
    [
        (_say(b""), control.BadReply, "the launch closed the connection without answering"),
        (_say(b'{"ok": tr'), control.BadReply, "the launch closed the connection after 9 bytes of its reply"),
        (_say(b"\xff\xfe\n"), control.BadReply, "the launch's reply is not UTF-8 (byte 0: b'\\xff')"),
        (_say(b"[" * 60000 + b"\n"), control.BadReply, "the launch's reply is JSON nested too deep"),
        (_say(b"[1]\n"), control.BadReply, "the launch's reply is a JSON list, not an object"),
        (_huge, control.BadReply, "the launch's reply is longer than 64 MiB; not read"),
        (_silent, control.NoAnswer, "the launch did not answer within 1 s; it may be busy or stuck"),
    ],
)
def test_the_client_says_which_way_a_request_failed(
    tmp_path: Path, answer: Any, error: type[Exception], message: str
) -> None:
    """Before: every one of these was "run X is not running" (or a traceback, for the nested
    reply), and a reply past 64 KiB too."""
    path = tmp_path / "control.sock"
    (tmp_path / "run.json").write_text(json.dumps({"id": "r1", "state": "running", "control_socket": str(path)}))
    with bad_listener(path, answer):
        with pytest.raises(error) as caught:
            control.request(path, {"action": "status"}, timeout_s=1)
        assert str(caught.value) == message
        code, out, err = cli("ctl", str(tmp_path), "stop", "worker:0")
    assert code == 1 and not out and len(err.splitlines()) == 1, err
    assert err.startswith("run r1: ") and "not running" not in err, err


def test_nothing_listening_is_not_running(tmp_path: Path) -> None:
    path = tmp_path / "control.sock"
    (tmp_path / "run.json").write_text(json.dumps({"id": "r1", "state": "running", "control_socket": str(path)}))
    with pytest.raises(control.NotRunning):
        control.request(path, {"action": "status"}, timeout_s=1)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as gone:  # a launcher killed: its file stays
        gone.bind(str(path))
    with pytest.raises(control.NotRunning, match="Connection refused"):
        control.request(path, {"action": "status"}, timeout_s=1)
    code, _, err = cli("ctl", str(tmp_path), "status")
    assert code == 1 and err == "run r1 is not running (state: running, result: None); nothing to control\n"


# ------------------------------------------------------------------------------------------
# Fuzzing: many hostile clients at once, the server always answers, and goes on


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
HARMLESS = st.fixed_dictionaries(
    {"action": st.sampled_from(["status", "nope", "", "profile", "stop", "kill", "restart", "signal"])},
    optional={
        # Never a role of this run ("x" before it), so a stop or kill fuzzed here is refused.
        "role": st.text(max_size=300).map(lambda t: "x" + t) | JSON_VALUES,
        "signal": st.text(max_size=300) | JSON_VALUES,
        "dest": st.text(max_size=50),
        "seconds": JSON_VALUES,
        "timeout_s": JSON_VALUES,
    },
)
PAYLOAD = st.one_of(
    st.integers(1, 100_000).map(lambda n: b"[" * n),  # nested
    st.integers(1, 100_000).map(lambda n: b'{"a":' * n),
    st.integers(60_000, 300_000).map(lambda n: b"x" * n),  # huge
    st.binary(max_size=2000),  # anything, UTF-8 or not
    JSON_VALUES.map(lambda v: json.dumps(v).encode()),
    HARMLESS.map(lambda v: json.dumps(v).encode()),
)
CLIENT = st.tuples(
    PAYLOAD,
    st.integers(1, 4),  # sent in this many pieces
    st.sampled_from([0.0, 0.05, 0.3]),  # apart by this long (a slow client)
    st.sampled_from(["line", "half-close", "abort", "idle"]),  # how it ends
)


def _run_client(path: Path, client: tuple[bytes, int, float, str], replies: dict[int, bytes], index: int) -> None:
    payload, pieces, apart_s, end = client
    with connect(path) as sock:
        if end == "line":
            payload += b"\n"
        step = max(1, len(payload) // pieces)
        try:
            for i in range(0, len(payload), step):
                sock.sendall(payload[i : i + step])
                time.sleep(apart_s)
            if end == "half-close":
                sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass  # it answered a line past the limit and closed: the answer is read below
        if end == "abort":
            return  # gone without reading: the server's answer goes nowhere
        replies[index] = read_reply(sock, 30)


def _is_request(payload: bytes, end: str) -> bool:
    """Whether the server reads a JSON object line from what this client sends."""
    data = payload + (b"\n" if end == "line" else b"")
    if b"\n" not in data:
        return False
    line = data.split(b"\n", 1)[0]
    try:
        return len(line) <= control.REQUEST_LIMIT_BYTES and isinstance(json.loads(line.decode()), dict)
    except (ValueError, RecursionError):
        return False


@pytest.mark.timeout(600, method="thread")
@settings(max_examples=30 * SCALE, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(clients=st.lists(CLIENT, min_size=1, max_size=6))
def test_hostile_clients_at_once_each_get_one_answer_and_the_server_goes_on(
    talkative: LaunchSession, tmp_path: Path, clients: list[tuple[bytes, int, float, str]]
) -> None:
    """Nested, huge, slow and half-open clients at once, on a server of the real controller with
    a short request deadline and a small connection cap: each that reads gets one JSON object line
    ("bad request: ..." or "busy: ..." for anything but a request), status is answered meanwhile,
    nothing the fuzz sends stops a role, and no connection's thread is left."""
    folder = tmp_path / f"fuzz-{time.monotonic_ns()}"
    folder.mkdir()
    server = ControlServer(talkative.controller, folder, request_deadline_s=0.5, max_connections=4)
    path = server.start()
    replies: dict[int, bytes] = {}
    threads = [
        threading.Thread(target=_run_client, args=(path, c, replies, i), daemon=True) for i, c in enumerate(clients)
    ]
    try:
        for thread in threads:
            thread.start()
        assert control.request(sock_of(talkative), {"action": "status"}, timeout_s=10)["ok"]
        for thread in threads:
            thread.join(60)
            assert not thread.is_alive(), "a client never got its answer"
    finally:
        server.close()
    assert sorted(replies) == [i for i, (*_, end) in enumerate(clients) if end != "abort"]
    for i, data in replies.items():
        reply = one_answer(data)
        payload, _, _, end = clients[i]
        if reply["ok"]:
            assert "roles" in reply, reply  # only a status is ever done here
        elif not _is_request(payload, end):
            assert reply["error"].startswith(("bad request: ", "busy: ")), (payload[:80], end, reply)
        else:
            assert isinstance(reply["error"], str) and reply["error"], reply
    wait_for(lambda: client_threads() == 0, 30, "every connection's thread to end")
    assert all(r.state == RoleState.RUNNING for r in talkative.controller.status().roles)
