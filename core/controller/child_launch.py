"""A launch run by a child process that a view follows: for large clusters, the window's controller in
a process of its own.

The controller of a few hundred roles takes half a core and many threads; in the window's process it
shares the GIL with the GUI thread, and frames wait for it. :func:`launch_child` starts the CLI's own
``launch --quiet`` on the cluster in a new session (so the window's death does not end the run), and
:class:`ChildRunSource` follows its run directory as a :class:`~core.run.reader.RunReader` does, its
commands through the run's control socket, while saying ``controls_here`` (closing the view asks
stop or leave) and ``done`` once the child has exited. Every wait here (the run directory and the
control socket to appear, the child's exit) is on the caller's or a thread of its own, never the GUI's.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from core.cluster.spec import ClusterSpec
from core.cluster.spec.write import dumps
from core.controller.session import SessionError
from core.run.publish import Subscriber
from core.run.reader import RunReader
from core.run.rundir import RUN_FILE, read_run_json, runs_root
from core.run.status import ClusterStatus
from core.textsafe import terminal

# The smallest cluster whose window launch runs in a child process; the variable overrides it
# (1: every launch, 0: none), which is how tests take this path with a handful of roles.
ROLES_VARIABLE = "TOWERDECK_WINDOW_LAUNCH_PROCESS_ROLES"
DEFAULT_MIN_ROLES = 128
LOG_FILE = "launcher.log"
STARTUP_TIMEOUT_S = 120.0  # a loaded machine imports the CLI and binds the socket in seconds; never this long
_SUMMARY = re.compile(r": \d+ errors?$")  # load_checked's last line: the problem lines before it say what


def min_roles() -> int:
    """The smallest cluster launched in a child process (0: never), from :data:`ROLES_VARIABLE`."""
    value = os.environ.get(ROLES_VARIABLE, "").strip()
    try:
        return max(0, int(value)) if value else DEFAULT_MIN_ROLES
    except ValueError:
        return DEFAULT_MIN_ROLES


def in_child_process(spec: ClusterSpec) -> bool:
    """True when the window should run this cluster's launch in a child process."""
    threshold = min_roles()
    return threshold > 0 and len(spec.role_ids()) >= threshold


def cli_command() -> list[str]:
    """How this checkout or the installed package runs its CLI: ``main.py`` sits beside ``core/`` in
    both (the checkout's root, or ``towerdeck/`` in site-packages), run by this interpreter."""
    main_py = Path(__file__).resolve().parent.parent.parent / "main.py"
    return [sys.executable, "-u", str(main_py)]


def run_dir_name(spec: ClusterSpec) -> str:
    """A new run's directory name, as every launch names it (stamp, cluster, 4 hex digits)."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", spec.name).strip("-.") or "cluster"
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{slug[:40]}-{secrets.token_hex(2)}"


class ChildRunSource:
    """A run launched by a child process, followed through its run directory and control socket."""

    def __init__(self, child: subprocess.Popen[bytes], reader: RunReader) -> None:
        self.child = child
        self.reader = reader
        self.spec: ClusterSpec = reader.spec
        self._exited = threading.Event()
        # Reaps the child (no zombie) and marks the source done; a daemon: it must not hold a
        # closing window's process when the user left the run to the child.
        threading.Thread(target=self._wait_child, name="launch-child-wait", daemon=True).start()

    def _wait_child(self) -> None:
        self.child.wait()
        self._exited.set()

    def start(self) -> None:
        self.reader.start()

    def wait(self, timeout_s: float | None = None) -> bool:
        """True once the child has exited (within ``timeout_s``)."""
        return self._exited.wait(timeout_s)

    @property
    def path(self) -> Path:
        return self.reader.path

    @property
    def done(self) -> bool:
        return self._exited.is_set()

    @property
    def controls_here(self) -> bool:
        return True  # this window started it: closing asks stop or leave

    @property
    def attachable(self) -> bool:
        return False

    def subscribe(self, callback: Subscriber) -> None:
        self.reader.subscribe(callback)

    def status(self) -> ClusterStatus:
        return self.reader.status()

    def placement(self, role: str) -> dict[str, Any]:
        return self.reader.placement(role)

    def control_socket(self) -> Path | None:
        return self.reader.control_socket()

    def agent_hosts(self) -> frozenset[str]:
        return self.reader.agent_hosts()

    def stop_role(self, role: str) -> Future[str]:
        return self.reader.stop_role(role)

    def kill_role(self, role: str) -> Future[str]:
        return self.reader.kill_role(role)

    def restart_role(self, role: str) -> Future[str]:
        return self.reader.restart_role(role)

    def signal_role(self, role: str, signal_name: str) -> Future[str]:
        return self.reader.signal_role(role, signal_name)

    def stop_all(self) -> Future[str]:
        return self.reader.stop_all()

    def kill_all(self) -> Future[str]:
        return self.reader.kill_all()

    def restart_all(self) -> Future[str]:
        return self.reader.restart_all()

    def release(self) -> None:
        """Stop following; the child supervises the run on (stopped first if the user asked)."""
        self.reader.close()


def launch_child(
    spec: ClusterSpec, *, root: Path | None = None, timeout_s: float = STARTUP_TIMEOUT_S
) -> ChildRunSource:
    """Start ``launch --quiet`` on ``spec`` in a child process, into a new run directory under
    ``root``, and return its source once its control socket is up (not started: call
    :meth:`ChildRunSource.start`). Blocks: not on the GUI thread. Raises :class:`SessionError` with
    one line (the child's own last error, escaped) when the child ends before, or OSError."""
    base = root or runs_root()
    name = run_dir_name(spec)
    path = base / name
    # The cluster file and the child's output are staged beside the run directory: `launch` makes
    # that directory itself and wants it new. Both move in (or go) once it exists.
    staging = base / f".launching-{name}"
    staging.mkdir(parents=True, mode=0o700)
    cluster = staging / "cluster.toml"
    log = staging / LOG_FILE
    try:
        cluster.write_text(dumps(spec), encoding="utf-8")
        with log.open("wb") as out:
            child = subprocess.Popen(
                [*cli_command(), "launch", str(cluster), "--run-dir", str(path), "--quiet"],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # the window's death (or Ctrl-C in its terminal) leaves the run
                cwd=str(spec.workdir) if spec.workdir.is_dir() else None,
            )
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    try:
        _wait_for_control(child, path, deadline=time.monotonic() + timeout_s)
    except BaseException as exc:
        if child.poll() is None:  # timed out, or interrupted: nothing of it may be left running
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(signal.SIGTERM)  # the launcher stops every role it started, then exits
            child.wait(60)
        why = _last_error(log, cluster) if isinstance(exc, _ChildEnded) else str(exc)
        if path.is_dir():
            with contextlib.suppress(OSError):
                shutil.move(str(log), str(path / LOG_FILE))
        shutil.rmtree(staging, ignore_errors=True)
        raise SessionError(why) from None
    with contextlib.suppress(OSError):
        os.replace(log, path / LOG_FILE)  # the child keeps writing the same file, now in its run
    shutil.rmtree(staging, ignore_errors=True)
    return ChildRunSource(child, RunReader(path))


class _ChildEnded(Exception):
    pass


def _wait_for_control(child: subprocess.Popen[bytes], path: Path, *, deadline: float) -> None:
    """Until the run's control socket answers (run.json names it), the child's exit, or the deadline."""
    delay = 0.02
    while True:
        if child.poll() is not None:
            raise _ChildEnded()
        info = read_run_json(path) if (path / RUN_FILE).is_file() else None
        sock = info.get("control_socket") if info else None
        if isinstance(sock, str) and Path(sock).exists():
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"the launch process did not open its control socket in {STARTUP_TIMEOUT_S:.0f} s")
        time.sleep(delay)  # polling a file another process writes: no event to wait on
        delay = min(0.2, delay * 2)


def _last_error(log: Path, cluster: Path) -> str:
    """The child's own reason, one line: its last line, or for a cluster file with problems the
    first problem (the last line only counts them); the staged file's path is not the user's."""
    try:
        lines = [line.strip() for line in log.read_text(encoding="utf-8", errors="replace").splitlines()]
    except OSError:
        lines = []
    lines = [line for line in lines if line]
    if not lines:
        return "the launch process ended before its run started, and said nothing"
    line = lines[-1]
    if _SUMMARY.search(line) and len(lines) > 1:
        line = next((x for x in lines if "error" in x and not _SUMMARY.search(x)), lines[0])
    return terminal(line.replace(str(cluster), "cluster"))
