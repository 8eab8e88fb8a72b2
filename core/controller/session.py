"""One launch session for the CLI and the window, and the one protocol both views watch.

:class:`LaunchSession` wires a run directory, a :class:`~core.controller.controller.Controller` and the
owner-only :class:`~core.controller.control_server.ControlServer` (so ``ctl`` and other windows can act on the run),
for a new launch or for attaching to a run whose launcher is gone. :class:`RunSource` is what a view
(the CLI printer, the window) reads: the live controller, or a :class:`~core.run.reader.RunReader`
following a run directory; both satisfy it, so views need no ``isinstance``.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Protocol, TextIO

from core.cluster.problems import ERROR
from core.cluster.spec import ClusterSpec, load
from core.controller.control_server import ControlServer
from core.controller.controller import Controller
from core.notify import Notifier
from core.preflight.checks import check_local
from core.run import index as runs_index
from core.run.lock import RunLock, RunLocked
from core.run.publish import Subscriber
from core.run.reader import RunReader
from core.run.rundir import SPEC_FILE, RunDir, read_run_spec
from core.run.status import ClusterStatus
from core.textsafe import terminal


class SessionError(Exception):
    """A session cannot start; the message names what and the fix."""


class RunSource(Protocol):
    """A run as a view sees it, live or read back: the live :class:`Controller` and the
    :class:`~core.run.reader.RunReader` both implement all of it (mypy checks that each is one), so
    a view never asks which it has. Both publish through :class:`~core.run.publish.Publisher`'s one
    rule, and both answer :meth:`status` from a snapshot without waiting."""

    spec: ClusterSpec

    @property
    def path(self) -> Path:
        """The run directory."""
        ...

    @property
    def done(self) -> bool:
        """True when nothing can be controlled any more (the run is over, or its launcher gone)."""
        ...

    @property
    def controls_here(self) -> bool:
        """True when this process runs the cluster (closing the view must stop or leave it)."""
        ...

    @property
    def attachable(self) -> bool:
        """True for a run read back whose launcher is gone but which did not end (its roles may run on)."""
        ...

    def subscribe(self, callback: Subscriber) -> None: ...
    def status(self) -> ClusterStatus:
        """The latest status, an immutable snapshot: never waits on the thread that builds it."""
        ...

    def placement(self, role: str) -> dict[str, Any]:
        """The role's device placement summary (may take a while on a large graph: not on the GUI thread)."""
        ...

    def control_socket(self) -> Path | None:
        """The run's control socket while its launch runs (``ctl`` and profiles go there), else None."""
        ...

    def agent_hosts(self) -> frozenset[str]:
        """The hosts whose roles the launcher reaches through their agent (SSH hosts, Slurm nodes)."""
        ...

    def stop_role(self, role: str) -> Future[str]: ...
    def kill_role(self, role: str) -> Future[str]: ...
    def restart_role(self, role: str) -> Future[str]: ...
    def signal_role(self, role: str, signal_name: str) -> Future[str]: ...
    def stop_all(self) -> Future[str]: ...
    def kill_all(self) -> Future[str]: ...
    def restart_all(self) -> Future[str]: ...

    def release(self) -> None:
        """Stop following; a live cluster is left to its session."""
        ...


def load_checked(path: Path, err: TextIO, *, check_ports: bool = True) -> ClusterSpec | None:
    """Load and check a cluster file for launching here; prints problems to ``err``; None on errors."""
    # Every problem in one pass: this machine's checks (command, script, workdir, ports) run on
    # what could be read even when the file has errors, so a missing script is not found only
    # after every typo is fixed.
    spec, problems = load(path, partial=True)
    if spec is not None:
        partial = any(p.severity == ERROR for p in problems)
        problems = problems + check_local(
            spec, path.read_text(encoding="utf-8"), check_ports=check_ports, partial=partial
        )
    for problem in problems:
        print(problem.format(str(path)), file=err)
    if spec is None or any(p.severity == ERROR for p in problems):
        count = sum(p.severity == ERROR for p in problems)
        print(terminal(f"{path}: {count} error{'s' if count != 1 else ''}"), file=err)
        return None
    return spec


def needs_preflight(spec: ClusterSpec) -> bool:
    """The rule both views apply: a cluster with a remote host is pre-flighted before launching."""
    if spec.slurm is not None:
        return False  # its hosts are Slurm nodes, reached by srun steps, not SSH (`validate --remote`)
    return any(spec.host_config(h).remote for h in {t.host for t in spec.tasks()})


class LaunchSession:
    """A run directory, its controller and its control socket, started and closed together.

    Subscribe to :attr:`controller` before :meth:`start`; :meth:`close` closes the socket once the
    controller is done (or left the roles running).
    """

    def __init__(self, controller: Controller, run: RunDir, server: ControlServer, lock: RunLock | None = None) -> None:
        self.controller = controller
        self.run = run
        self.server = server
        self.lock = lock  # one controller per run (core.run.lock), held until close()
        # [notify]: the user's command hears of the run's notifications, off this thread.
        self.notifier = notifier_for(controller.spec, run)
        if self.notifier is not None:
            controller.subscribe(self.notifier.on_event)

    def subscribe(self, callback: Subscriber) -> None:
        """``callback(event)`` for the controller's events and the notifier's reports (warnings)."""
        self.controller.subscribe(callback)
        if self.notifier is not None:
            self.notifier.subscribe(callback)

    @classmethod
    def launch(
        cls,
        spec: ClusterSpec,
        *,
        root: Path | None = None,
        path: Path | None = None,
        on_disconnect: str = "keep",
        who: str = "launch",
    ) -> LaunchSession:
        """A new run directory (under ``root``, or exactly ``path``) and its controller; raises
        OSError when the directory cannot be made."""
        run = RunDir.create(spec, root=root, path=path)
        try:
            lock = RunLock.acquire(run.path, who)
        except RunLocked as exc:  # a new directory: only a racing attach can hold it
            raise OSError(str(exc)) from None
        controller = Controller(spec, run, on_disconnect=on_disconnect)
        server = ControlServer(controller, run.path)
        run.update(control_socket=str(server.start()))
        return cls(controller, run, server, lock)

    @classmethod
    def attach(cls, path: Path, spec: ClusterSpec | None = None, who: str = "attach") -> LaunchSession:
        """Take over the run in ``path`` (its agents keep its roles); raises SessionError, also
        when another process controls it (naming that process)."""
        try:
            run = RunDir.open(path)
        except (OSError, ValueError) as exc:
            raise SessionError(f"cannot attach to {path}: {exc}") from exc
        try:
            lock = RunLock.acquire(path, who)
        except RunLocked as exc:
            raise SessionError(str(exc)) from None
        except OSError as exc:
            raise SessionError(f"cannot attach to {path}: {exc.strerror or exc}") from exc
        try:
            return cls._attached(run, path, spec=spec, lock=lock)
        except BaseException:
            lock.release()
            raise

    @classmethod
    def _attached(cls, run: RunDir, path: Path, *, spec: ClusterSpec | None, lock: RunLock) -> LaunchSession:
        if spec is None:
            spec, problems = read_run_spec(path)
            if spec is None:
                first = problems[0].format() if problems else "unreadable"
                raise SessionError(f"{path / SPEC_FILE} cannot be read back: {first}")
        controller = Controller(spec, run, attach=True)
        server = ControlServer(controller, run.path)
        run.update(control_socket=str(server.start()), pid=os.getpid())
        return cls(controller, run, server, lock)

    def start(self) -> None:
        """Launch (or reattach); returns at once."""
        if self.notifier is not None:
            self.notifier.start()
        self.controller.start()

    def close(self, notify_wait_s: float | None = None) -> None:
        """Close the control socket (the controller's own end is its business); let the notifier
        deliver what it has queued, each command within its timeout (at most ``notify_wait_s``
        here: the window passes 0 and its notifier thread finishes on its own)."""
        self.server.close()
        if self.controller.done:
            # The run is over: cache its summary, so that listing runs reads one small file. It reads the
            # run's metrics, so not on the caller's (maybe the GUI's) thread; not a daemon, so a
            # CLI exiting now still finishes it.
            threading.Thread(target=runs_index.write_summary, args=(self.run.path,), name="run-summary").start()
        if self.notifier is not None:
            self.notifier.close(notify_wait_s)
        if self.lock is not None:
            self.lock.release()


def notifier_for(spec: ClusterSpec, run: RunDir) -> Notifier | None:
    """The run's :class:`~core.notify.Notifier` when the cluster file has ``[notify]``."""
    if spec.notify is None:
        return None
    about = {"run": run.path.name, "run_dir": str(run.path), "cluster": spec.name}
    return Notifier(spec.notify, about, journal=run.record, cwd=spec.workdir if spec.workdir.is_dir() else None)


def _is_run_source(controller: Controller, reader: RunReader) -> tuple[RunSource, RunSource]:
    """Never called: mypy checks here that both sources implement the whole protocol."""
    return controller, reader
