"""Capture TensorFlow profiles of a run's roles, live, into ``RUN/profiles/<timestamp>/<job>-<task>/``.

Every ``tf.distribute.Server`` hosts TensorFlow's profiler service on its cluster port. Before
asking, each role is checked: it runs, on this machine, and its port is held by its own process
tree (a port taken by another process would be profiled, or refused, in its name). A role of a
host reached over SSH, or of a Slurm allocation's node, is traced there by that host's agent
instead, through the launcher's controller (its control socket), and its files brought back
(:mod:`core.profiling.remote`). The roles are traced at once, one profiler-environment subprocess
(or one request to the launcher) each (each role writes its own folder), all under one hard time
limit; a role that does not answer is killed out of the wait, never the run.
One capture per run at a time (a lock file), since TensorFlow refuses a second session anyway.

The folder is TensorBoard's layout (``plugins/profile/<session>/<host>_<port>.xplane.pb``) with
``profile.json`` beside the roles: what was asked and what came of it, per role.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Collection, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from core.cluster.locality import is_local_host
from core.cluster.spec import find_role, role_dir_name
from core.profiling.env import ProfileError, WorkerResult, finish_worker, profiler_python, start_worker
from core.profiling.files import RECORD_NAME, cannot_write, write_whole
from core.profiling.remote import ControllerTrace
from core.run.rundir import SPEC_FILE
from core.run.status import RoleStatus

PROFILES_DIR = "profiles"
LOCK_NAME = ".capture.lock"
# xprof waits 20 s for a server that accepts but does not answer; past the trace itself, this much
# more is allowed before the capture is given up.
DEFAULT_SLACK_S = 20.0
# A role traced by its host's agent is asked from a fresh python of the role's, which imports
# TensorFlow first: seen taking over 20 s on a loaded 2-core host (load 11), so the default limit
# of such a role allows this much more (an explicit --timeout is taken as given).
AGENT_IMPORT_S = 60.0
# What a trace may be asked: xprof refuses a trace shorter than a millisecond, and a 10 s trace
# wrote 121 MB with a 3.8 GiB peak in the role.
MIN_SECONDS = 0.1
MAX_SECONDS = 30.0
# A role silent for an hour is not answering; past this, timers overflow (inf) or never fire.
MAX_TIMEOUT_S = 3600.0
LIGHT_HOST_TRACER_LEVEL = 1  # step times and TF ops, ~2 MB, no per-op detail below TF ops
FULL_HOST_TRACER_LEVEL = 2


@dataclass(frozen=True)
class Target:
    """A role to profile, as the control socket's status names it."""

    role: str
    job: str
    index: int
    host: str
    port: int
    pid: int | None
    state: str
    by_agent: bool = False  # on an SSH host or a Slurm node: traced there by its agent, through the launcher

    @property
    def address(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host  # IPv6, as gRPC writes it
        return f"{host}:{self.port}"

    @property
    def dir_name(self) -> str:
        return role_dir_name(self.role)

    @classmethod
    def from_status(cls, role: RoleStatus) -> Target:
        port = int(role.address.rsplit(":", 1)[-1] or 0)
        return cls(
            role=role.role,
            job=role.job,
            index=role.index,
            host=role.host,
            port=port,
            pid=role.pid,
            state=str(role.state),
        )


@dataclass
class RoleCapture:
    """What came of one role's capture."""

    role: str
    address: str
    ok: bool = False
    error: str | None = None
    xplane: str | None = None  # relative to the capture folder
    xplane_bytes: int = 0
    elapsed_s: float = 0.0


@dataclass
class Capture:
    """One capture of one or several roles: its folder and each role's outcome."""

    path: Path
    seconds: float
    light: bool
    roles: list[RoleCapture] = field(default_factory=list)
    problem: str | None = None  # its record (profile.json) could not be written at the end

    def xplanes(self) -> dict[str, Path]:
        return {r.role: self.path / r.xplane for r in self.roles if r.ok and r.xplane}


def select(
    roles: Sequence[RoleStatus],
    names: Sequence[str],
    *,
    workers: bool,
    every: bool,
    agent_hosts: Collection[str] = (),
) -> list[Target]:
    """The roles asked for, from the run's roles; raises ProfileError naming an unknown one.
    Roles of ``agent_hosts`` (the status's ``agent_hosts``: SSH hosts, Slurm nodes) are traced by
    their host's agent."""
    by_name = {r.role: r for r in roles}
    if every:
        chosen = list(roles)
    elif workers:
        chosen = [r for r in roles if r.job == "worker"]
        if not chosen:
            raise ProfileError("this run has no worker roles; name the roles to profile")
    else:
        if not names:
            raise ProfileError("name the roles to profile (e.g. worker:0 ps:0), or give --workers or --all")
        found = {n: find_role(n, by_name) for n in names}  # worker/1 names worker:1, as in stop or kill
        unknown = [n for n, role in found.items() if role is None]
        if unknown:
            raise ProfileError(f"no role {', '.join(unknown)} in this run (its roles: {', '.join(by_name)})")
        chosen = [by_name[role] for role in dict.fromkeys(found.values()) if role is not None]
    return [replace(t, by_agent=t.host in agent_hosts) for t in map(Target.from_status, chosen)]


def check(target: Target, strategy: str = "", *, unsafe: bool = False) -> str | None:
    """Why ``target`` cannot be profiled now, in one line; None when it can."""
    if strategy == "multi_worker_mirrored" and target.job == "worker" and target.index > 0 and not unsafe:
        # Measured (TF 2.21 CPU, 2 workers): worker:1 died of "double free or corruption" in its
        # training step's collectives in 5 of 5 captures, full or light, with or without step
        # markers, TensorFlow's own client or xprof's; worker:0 survived 4 of 4.
        return (
            f"{target.role} not profiled: tracing a MultiWorkerMirroredStrategy worker other than worker:0 "
            "crashes it on TensorFlow 2.21 (double free); profile worker:0, or pass --unsafe to try anyway"
        )
    if target.state != "running":
        return f"{target.role} is {target.state or 'not running'}; only a running role can be profiled"
    if target.by_agent:
        return None  # its agent checks the rest on its host
    if not is_local_host(target.host):
        return (
            f"{target.role} runs on {target.host}, and the launcher names no agent there to trace it "
            "(a launcher of an older TowerDeck?); profile it from that host"
        )
    if target.pid is None:
        return f"{target.role} has no process id yet; try again in a moment"
    if target.port <= 0:
        return f"{target.role} has no port: not a TensorFlow server"
    return port_owner_problem(target)


def port_owner_problem(target: Target) -> str | None:
    """None when the role's own process tree listens on its port; otherwise who does, or nobody."""
    import psutil

    try:
        root = psutil.Process(target.pid)
        tree = [root, *root.children(recursive=True)]
    except psutil.Error:
        return f"{target.role} (pid {target.pid}) is gone"
    for proc in tree:
        with contextlib.suppress(psutil.Error):
            for conn in proc.net_connections(kind="tcp"):
                if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == target.port:
                    return None
    holder = _listener_of(target.port)
    if holder is not None:
        return (
            f"port {target.port} of {target.role} is held by another process ({holder}), not by "
            f"{target.role} (pid {target.pid}); it was not profiled"
        )
    return (
        f"{target.role} (pid {target.pid}) does not listen on port {target.port}: not a TensorFlow server, or "
        "not serving yet (a plain Keras process can call tf.profiler.experimental.server.start(PORT))"
    )


def _listener_of(port: int) -> str | None:
    import psutil

    with contextlib.suppress(psutil.Error, OSError):
        for conn in psutil.net_connections(kind="tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port:
                if conn.pid is None:
                    return "a process this user cannot see"
                with contextlib.suppress(psutil.Error):
                    return f"pid {conn.pid}, {psutil.Process(conn.pid).name()}"
                return f"pid {conn.pid}"
    return None


@contextlib.contextmanager
def capture_lock(run_path: Path) -> Iterator[None]:
    """One capture of a run at a time, across processes (the window and the CLI). ProfileError,
    naming the file, when the run's profiles folder cannot be written."""
    folder = run_path / PROFILES_DIR
    try:
        folder.mkdir(parents=True, exist_ok=True)
        # Unbuffered: a note the disk refused must not be retried (and raise) when the file closes.
        lock = open(folder / LOCK_NAME, "a+b", buffering=0)  # noqa: SIM115 - closed below
    except OSError as exc:
        raise cannot_write(folder / LOCK_NAME, exc) from None
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().decode("utf-8", "replace").strip() or "another process"
            raise ProfileError(f"another profile of this run is in progress ({holder}); wait for it") from None
        # Who holds the lock is a courtesy to the next one refused: a full disk must not stop a
        # capture here (it is said, with the file, where the capture's own files are written).
        with contextlib.suppress(OSError):
            lock.truncate(0)
            lock.write(f"pid {os.getpid()}, since {time.strftime('%H:%M:%S')}".encode())
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                lock.truncate(0)


def new_capture_dir(run_path: Path) -> Path:
    base = run_path / PROFILES_DIR / time.strftime("%Y%m%d-%H%M%S")
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    try:
        path.mkdir(parents=True)
    except OSError as exc:
        raise cannot_write(path, exc) from None
    return path


def run_strategy(run_path: Path) -> str:
    """The run's distribution strategy, from the cluster file it was launched with ('' unknown)."""
    import tomllib

    try:
        with open(run_path / SPEC_FILE, "rb") as f:
            return str(tomllib.load(f).get("strategy") or "")
    except (OSError, ValueError):
        return ""


def capture(
    run_path: Path,
    targets: Sequence[Target],
    *,
    seconds: float = 2.0,
    light: bool = False,
    timeout_s: float | None = None,
    unsafe: bool = False,
    control_socket: Path | None = None,
    purpose: str = "profile",
    origin: str = "",
) -> Capture:
    """Profile ``targets`` at once for ``seconds``; each role's outcome is in the result (and in
    ``profile.json``, with why it was taken: ``purpose`` "profile" or "why", ``origin`` "window" or
    "cli", which the capture lists show). Targets ``by_agent`` are traced through the launcher at
    ``control_socket``. Raises ProfileError only when nothing can be tried (another capture runs,
    no profiler environment, the run's profiles folder cannot be written)."""
    if not targets:
        raise ProfileError("no role to profile")
    if problem := limits_problem(seconds, timeout_s):
        raise ProfileError(problem)
    limit_s = timeout_s if timeout_s is not None else seconds + DEFAULT_SLACK_S
    agent_limit_s = timeout_s if timeout_s is not None else limit_s + AGENT_IMPORT_S
    with capture_lock(run_path):
        folder = new_capture_dir(run_path)
        result = Capture(folder, seconds, light)
        requested = {
            "t": round(time.time(), 3),
            "roles": [t.role for t in targets],
            "seconds": seconds,
            "light": light,
            "purpose": purpose,
            **({"origin": origin} if origin else {}),
            "timeout_s": limit_s,
            **({"agent_timeout_s": agent_limit_s} if any(t.by_agent for t in targets) else {}),
        }
        try:
            _write_record(folder, requested, result)
        except ProfileError:
            with contextlib.suppress(OSError):
                folder.rmdir()  # nothing was asked: no empty capture is left to list
            raise
        strategy = run_strategy(run_path)
        if any(not t.by_agent for t in targets):
            profiler_python()  # no environment: say so before any role is asked
        started = time.monotonic()
        running: list[tuple[Target, RoleCapture, subprocess.Popen[str] | ControllerTrace, float]] = []
        try:
            for target in targets:
                outcome = RoleCapture(target.role, target.address)
                result.roles.append(outcome)
                outcome.error = check(target, strategy, unsafe=unsafe)
                if outcome.error is None and target.by_agent and control_socket is None:
                    outcome.error = f"{target.role} runs on {target.host}: only its launcher can have it traced there"
                if outcome.error is None:
                    role_limit_s = agent_limit_s if target.by_agent else limit_s
                    try:
                        asked = _ask(
                            folder, target, seconds, light=light, limit_s=role_limit_s, control_socket=control_socket
                        )
                    except ProfileError as exc:  # its folder cannot be made: said for this role
                        outcome.error = f"{target.role} not profiled: {exc}"
                        continue
                    running.append((target, outcome, asked, role_limit_s))
            _collect(folder, running, started)
        finally:
            # Interrupted (Ctrl-C, a closing window): no trace process outlives the capture.
            for _, _, proc, _ in running:
                if isinstance(proc, subprocess.Popen) and proc.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
            try:
                _write_record(folder, requested, result)
            except ProfileError as exc:  # what was captured is still returned and shown
                result.problem = f"{exc} (this capture will not be listed)"
        return result


def limits_problem(seconds: float, timeout_s: float | None) -> str | None:
    """Why a trace of ``seconds`` given up after ``timeout_s`` cannot be asked (one line), or None."""
    if not (math.isfinite(seconds) and MIN_SECONDS <= seconds <= MAX_SECONDS):
        return f"a trace lasts {MIN_SECONDS:g} to {MAX_SECONDS:g} seconds, not {seconds:g}"
    if timeout_s is not None and not (math.isfinite(timeout_s) and 0 < timeout_s <= MAX_TIMEOUT_S):
        return f"the time limit is more than 0 and at most {MAX_TIMEOUT_S:g} seconds, not {timeout_s:g}"
    if timeout_s is not None and timeout_s < seconds:
        return (
            f"a time limit of {timeout_s:g} s ends a {seconds:g} s trace before it is done; give at least {seconds:g}"
        )
    return None


def _ask(
    folder: Path, target: Target, seconds: float, *, light: bool, limit_s: float, control_socket: Path | None
) -> subprocess.Popen[str] | ControllerTrace:
    """Start a trace of ``target``: here in the profiler environment, or by its host's agent."""
    # Absolute: the role writes the trace itself, relative to its own working directory otherwise
    # (and the launcher resolves a relative folder against its own).
    logdir = (folder / target.dir_name).absolute()
    try:
        logdir.mkdir()
    except OSError as exc:
        raise cannot_write(logdir, exc) from None
    if target.by_agent and control_socket is not None:
        return ControllerTrace(control_socket, target.role, logdir, seconds, light, limit_s)
    level = LIGHT_HOST_TRACER_LEVEL if light else FULL_HOST_TRACER_LEVEL
    return start_worker("capture", target.address, str(logdir), str(round(seconds * 1000)), str(level))


def _collect(
    folder: Path,
    running: list[tuple[Target, RoleCapture, subprocess.Popen[str] | ControllerTrace, float]],
    started: float,
) -> None:
    """Wait for every trace at once, each until its own deadline (its time limit from one start):
    a role that does not answer must not use up the time of the roles after it. Note each role's
    file or failure."""
    answers: list[WorkerResult | str | None] = [None] * len(running)
    failures: list[BaseException] = []

    def wait(i: int, proc: subprocess.Popen[str] | ControllerTrace, deadline: float) -> None:
        try:
            left_s = deadline - time.monotonic()
            if isinstance(proc, ControllerTrace):
                answers[i] = proc.result(left_s)
            else:
                answers[i] = finish_worker(proc, left_s, started)
        except BaseException as exc:  # raised on the caller's thread below
            failures.append(exc)

    waiters = [
        threading.Thread(
            target=wait, args=(i, proc, started + limit_s), name=f"profile-wait-{target.role}", daemon=True
        )
        for i, (target, _, proc, limit_s) in enumerate(running)
    ]
    for waiter in waiters:
        waiter.start()
    for waiter in waiters:
        waiter.join()  # each ends by its deadline: a trace past it is killed
    if failures:
        raise failures[0]
    for (target, outcome, _, limit_s), done in zip(running, answers, strict=True):
        if done is None:
            continue
        if isinstance(done, str):  # the launcher or the agent refused, in one line
            outcome.error = done
            continue
        outcome.elapsed_s = round(done.elapsed_s, 3)
        outcome.error = _failure(target, done, limit_s)
        if outcome.error is None:
            found = sorted((folder / target.dir_name).rglob("*.xplane.pb"))
            if not found:
                outcome.error = f"{target.role} answered but wrote no profile under {folder / target.dir_name}"
            else:
                outcome.ok = True
                outcome.xplane = str(found[-1].relative_to(folder))
                outcome.xplane_bytes = found[-1].stat().st_size


def _write_record(folder: Path, requested: dict[str, Any], result: Capture) -> None:
    """``profile.json``, whole or not at all; ProfileError naming it when the disk refuses."""
    record = {"requested": requested, "roles": [asdict(r) for r in result.roles]}
    write_whole(folder / RECORD_NAME, json.dumps(record, indent=2) + "\n")


_CAUSE = re.compile(r"returned (.+)$|\] (UNAVAILABLE: .+|.*Another profiling session.*)$")


def _failure(target: Target, done: WorkerResult, limit_s: float) -> str | None:
    """The real cause of a failed capture, from the worker's reply and xprof's stderr."""
    if done.returncode is None:
        if target.by_agent and not (isinstance(done.reply, dict) and done.reply.get("imported")):
            return (
                f"{target.role}: its python on {target.host} had not imported TensorFlow after {limit_s:g} s, "
                "so nothing was traced (a busy host? give a longer --timeout)"
            )
        return f"no answer from {target.role} at {target.address} in {limit_s:g} s (paused, or busy in one long op?)"
    if isinstance(done.reply, dict) and done.reply.get("ok"):
        return None
    text = done.stderr
    if "Another profiling session" in text:
        return (
            f"{target.role} is already being profiled by another tool (TensorBoard's Profile tab?); try again after it"
        )
    if "Connection refused" in text:
        return f"{target.role} refused the connection on {target.address}: nothing listens there now"
    if "http1" in text.lower() or "HTTP/2" in text or "Trying to connect an http1.x server" in text:
        return f"{target.address} does not speak gRPC: {target.role} is not a TensorFlow server"
    causes = [m.group(1) or m.group(2) for line in text.splitlines() if (m := _CAUSE.search(line.strip()))]
    if causes:
        return f"{target.role}: {causes[-1]}"
    error = done.reply.get("error") if isinstance(done.reply, dict) else None
    if error:
        return f"{target.role}: {error}"
    last = next((line for line in reversed(text.splitlines()) if line.strip()), "no output")
    return f"the profiler environment failed (exit {done.returncode}): {last.strip()}"


def list_captures(run_path: Path) -> list[Path]:
    """A run's capture folders, oldest first."""
    folder = run_path / PROFILES_DIR
    if not folder.is_dir():
        return []
    return sorted((p for p in folder.iterdir() if (p / RECORD_NAME).is_file()), key=lambda p: p.name)
