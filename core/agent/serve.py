"""Serve mode: the agent outlives its controller, on an owner-only Unix socket.

With ``--serve`` the agent runs detached from the process that started it and listens on an
owner-only Unix socket in its run directory. Whoever started it, and anyone who reattaches later
(``agent.pyz --attach SOCK``, locally or over SSH), speaks the same JSON lines through that
socket, relayed to stdin/stdout. The socket is bound by its base name from inside its directory,
as sun_path holds only 108 bytes and run directories can be deep.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import signal
import socket
import sys
from collections.abc import Callable
from typing import Any

from .processes import ignore_here
from .protocol import encode_event, now
from .supervisor import TICK_S, Agent

LINGER_S = 600.0  # an agent with no roles and no controller waits this long for a reattach
# A new agent waits this long for its first controller (the relay of the process that started it).
# Ending at the first tick without one made a launch under load lose hosts: the starter's relay,
# scheduled late after the fork, found the socket already gone ("no agent at ...sock: No such file
# or directory"). Bounded, so an agent whose starter died before connecting does not stay.
FIRST_CONNECT_S = 60.0
# A controller heard from within this long holds the agent: another connection is refused. The
# controller's link pings every few seconds; one silent longer is taken as gone (a dead network).
CONTROLLER_QUIET_S = 15.0
# What an agent's command line holds, for telling a live agent from a recycled pid.
AGENT_MARKERS = (b"agent.pyz", b"core.agent")


def bind_owner_only(sock_path: str) -> socket.socket:
    """Listen on ``sock_path`` (0600, its directory 0700); FileExistsError when an agent serves it."""
    directory, name = os.path.split(os.path.abspath(sock_path))
    os.makedirs(directory, mode=0o700, exist_ok=True)
    os.chmod(directory, 0o700)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)
    here = os.getcwd()
    try:
        os.chdir(directory)
        if os.path.exists(name):
            # Connecting to find out would take the place of the agent's controller: its pid says.
            if _pid_alive(name + ".pid"):
                raise FileExistsError(f"an agent already serves {os.path.join(directory, name)}")
            os.unlink(name)  # left by an agent that was killed: nobody serves it
        listener.bind(name)
        os.chmod(name, 0o600)
    finally:
        os.chdir(here)
        os.umask(old_umask)
    listener.listen(2)
    return listener


def _pid_alive(pid_file: str) -> bool:
    try:
        with open(pid_file) as f:
            pid = int(f.read().strip())
        os.kill(pid, 0)
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
        return any(marker in cmdline for marker in AGENT_MARKERS)
    except (OSError, ValueError):
        return False


def _process_alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, killed and not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rpartition(b")")[2].split()[0]
    except (OSError, IndexError):
        return True  # no /proc to ask: the signal said it is there
    return state not in (b"Z", b"X")


def _connect(sock_path: str) -> socket.socket:
    directory, name = os.path.split(os.path.abspath(sock_path))
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    here = os.getcwd()
    try:
        os.chdir(directory)
        conn.connect(name)
    except OSError:
        conn.close()
        raise
    finally:
        os.chdir(here)
    return conn


def serve(
    agent: Agent,
    listener: socket.socket,
    linger_s: float = LINGER_S,
    *,
    first_connect_s: float = FIRST_CONNECT_S,
    starter_alive: Callable[[], bool] = lambda: True,
) -> None:
    """Run ``agent`` for one controller at a time on ``listener`` until it has nothing left to do;
    until a first controller connects it waits ``first_connect_s`` for one, while ``starter_alive``
    (the process whose relay is to connect: a launch cancelled while connecting kills it)."""
    client: socket.socket | None = None
    heard_at = 0.0
    agent.connected = False
    idle_since = now()
    first_connect_by: float | None = idle_since + first_connect_s  # None once a controller came
    while not agent.finished:
        fds: list[Any] = [listener] + ([client] if client is not None else [])
        ready, _, _ = select.select(fds, [], [], 0 if agent.behind else TICK_S)
        if client is not None and client in ready:  # first: a controller that left says so here
            try:
                data = client.recv(1 << 16)
            except OSError:
                data = b""
            if data:
                heard_at = now()
                agent.feed(data)
            else:
                agent.disconnect()
        if client is not None and not agent.connected:
            _hang_up(client)
            client = None
        if listener in ready:
            new, _ = listener.accept()
            if client is not None and now() - heard_at < CONTROLLER_QUIET_S:
                _refuse(new, now() - heard_at)  # one controller at a time: no tug of war
            else:
                if client is not None:  # silent too long: that controller is gone
                    _hang_up(client)
                client, heard_at = new, now()
                first_connect_by = None
                agent.out = client.makefile("w", encoding="utf-8", newline="\n")
                agent.connected = True
                agent.awaiting_resume = True
                agent.hello(serving=True, run_dir=os.getcwd(), **agent.inventory())
        if client is not None and not agent.connected:
            _hang_up(client)
            client = None
        agent.tick()
        if agent.connected or agent.roles:
            idle_since = now()
        elif first_connect_by is not None and not agent.shutting_down:
            agent.finished = now() > first_connect_by or not starter_alive()
        elif agent.shutting_down or not agent.exits or now() - idle_since > linger_s:
            agent.finished = True
    if client is not None:
        _hang_up(client)
    listener.close()


def _refuse(conn: socket.socket, quiet_s: float) -> None:
    message = (
        f"another controller is connected to this agent (heard from {quiet_s:.0f} s ago); one controller "
        "at a time: leave that one (`ctl RUN detach`) or stop it first"
    )
    with contextlib.suppress(OSError):
        conn.settimeout(1.0)
        conn.sendall(encode_event("attach_failed", message=message, busy=True).encode())
    _hang_up(conn)


def _hang_up(conn: socket.socket) -> None:
    """Close for real: the agent's output file still holds the socket, so close() alone would
    leave the relay waiting for an end that never comes."""
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_RDWR)
    conn.close()


def relay(sock_path: str) -> int:
    """Copy stdin to the agent's socket and the socket to stdout, until either side ends."""
    try:
        conn = _connect(sock_path)
    except OSError as exc:
        sys.stdout.write(encode_event("attach_failed", message=f"no agent at {sock_path}: {exc}"))
        sys.stdout.flush()
        return 3
    stdin_fd, stdout_fd = sys.stdin.fileno(), sys.stdout.fileno()
    stdin_open = True
    while True:
        fds = [conn] + ([stdin_fd] if stdin_open else [])
        ready, _, _ = select.select(fds, [], [])
        if conn in ready:
            data = conn.recv(1 << 16)
            if not data:
                return 0
            try:
                while data:
                    data = data[os.write(stdout_fd, data) :]
            except OSError:
                return 0
        if stdin_open and stdin_fd in ready:
            data = os.read(stdin_fd, 1 << 16)
            if data:
                conn.sendall(data)
            else:
                stdin_open = False
                conn.shutdown(socket.SHUT_WR)


def serve_in_step(args: argparse.Namespace) -> int:
    """Serve on ``args.serve`` in this very process, relaying this process's stdio from a thread.

    For a Slurm step (``--in-step``): a daemon would leave the step's process tree, so Slurm's
    end of the job (scancel, time limit) would not reach it and its roles would outlive the
    allocation. Here the agent stays the step's task: the step lives while the agent does (a
    relay that ends, e.g. its controller was killed, does not end it), SIGTERM from Slurm stops
    the roles, and a later ``srun --overlap ... --attach SOCK`` step reattaches.
    """
    import threading

    try:
        listener = bind_owner_only(args.serve)
    except OSError as exc:
        sys.stdout.write(encode_event("attach_failed", message=f"cannot serve on {args.serve}: {exc}"))
        sys.stdout.flush()
        return 3
    os.chdir(os.path.dirname(os.path.abspath(args.serve)))  # the run dir: hello reports it
    if args.log:
        log = os.open(os.path.abspath(args.log), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(log, 2)
    agent = Agent(open(os.devnull, "w"), args.on_disconnect, args.sample_period)  # noqa: SIM115
    serve_here(
        agent,
        listener,
        args,
        before=lambda name: threading.Thread(target=relay, args=(name,), name="relay", daemon=True).start(),
    )
    return 0


def serve_here(
    agent: Agent,
    listener: socket.socket,
    args: argparse.Namespace,
    *,
    before: Callable[[str], None] | None = None,
    starter_pid: int | None = None,
) -> None:
    """Serve in this process, from the socket's directory: SIGTERM stops the roles, the pid file
    says who serves, and the socket and pid file go when it ends. ``before(name)`` runs once the
    pid file is written (the in-step agent starts its own relay there); ``starter_pid``: the
    process whose relay is to connect first (a daemon's starter), waited for while it lives."""
    signal.signal(signal.SIGTERM, lambda signum, frame: agent.shutdown(agent.shutdown_grace_s))
    ignore_here(signal.SIGINT, signal.SIGHUP)
    name = os.path.basename(args.serve)
    with open(name + ".pid", "w") as pid_file:
        pid_file.write(f"{os.getpid()}\n")
    if before is not None:
        before(name)
    try:
        alive = (lambda: _process_alive(starter_pid)) if starter_pid is not None else (lambda: True)
        serve(agent, listener, args.linger, starter_alive=alive)
    finally:
        for path in (name, name + ".pid"):
            with contextlib.suppress(OSError):
                os.unlink(path)


def start_detached(args: argparse.Namespace) -> int:
    """Start the serving agent as a daemon (its own session, parent init), then relay to it."""
    try:
        listener = bind_owner_only(args.serve)  # bound before forking: a relay can connect at once
    except OSError as exc:
        sys.stdout.write(encode_event("attach_failed", message=f"cannot serve on {args.serve}: {exc}"))
        sys.stdout.flush()
        return 3
    log_path = os.path.abspath(args.log) if args.log else None
    starter = os.getpid()  # relays to the daemon once it has forked it
    if os.fork() == 0:
        os.setsid()
        os.chdir(os.path.dirname(os.path.abspath(args.serve)))  # the run dir: hello reports it
        if os.fork() != 0:
            os._exit(0)
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        if log_path:
            log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            os.dup2(log, 2)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        agent = Agent(sys.stdout, args.on_disconnect, args.sample_period)
        serve_here(agent, listener, args, starter_pid=starter)
        os._exit(0)
    listener.close()
    os.wait()  # the first child exits at once; the daemon is init's
    return relay(args.serve)
