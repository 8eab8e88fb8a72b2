"""Which run the window shows: :class:`RunBinding` holds the run's source (a live controller launched
or attached here, a large cluster's launch process that this window started and follows
(core/controller/child_launch.py), or a reader following a run directory), the launch session when
this window runs the cluster, and the inbox the source's events land in; it launches, attaches and
lets go of runs.

The GUI thread never waits here. A launch (a run directory, its lock file, the control socket's
bind) and an attach run on the ``window-run-switch`` thread, and the run they bring is bound on
the GUI thread once it is ready. A source that is let go (another run shown, the window closed) is
closed on that same thread: a reader's join (it stops after the file it is reading), the control
socket's, the run lock's release. One job at a time and in order, so a run is attached again only
after its last close. Each source has an inbox of its own: the last events of a source being closed
land in its inbox, which nobody reads any more, never in the next run's views.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

from PySide6 import QtCore

from core.cluster.spec import ClusterSpec
from core.controller.child_launch import ChildRunSource, in_child_process, launch_child
from core.controller.controller import Controller
from core.controller.session import LaunchSession, RunSource
from core.run.events import warning
from core.run.inbox import EventInbox
from core.run.reader import RunReader
from gui.offthread import Relay, SerialJobs, start_soon

ABANDON_WAIT_S = 30.0
Landed = Callable[[str | None], None]  # on the GUI thread: None once bound, else why not (one line)
# What a launch or attach brings: the source to bind, its session when this process runs the
# controller (None for a launch in a child process), the inbox its events land in.
_Started = tuple[RunSource, LaunchSession | None, EventInbox]


class RunBinding(QtCore.QObject):
    """The run a window shows, and the jobs that change it.

    ``pending`` says what is under way that will replace the source ("launching", "attaching"):
    nothing else may open, launch or attach meanwhile.

    Signals: ``sig_progress_changed(str)``: what runs off the GUI thread now ("launching...;
    closing RUN..."), "" once nothing does."""

    sig_progress_changed = QtCore.Signal(str)

    def __init__(self, parent: QtCore.QObject, *, runs_root: Path | None, say: Callable[[str], None]) -> None:
        super().__init__(parent)
        self.runs_root = runs_root
        self.source: RunSource | None = None
        self.session: LaunchSession | None = None  # when this window runs the cluster
        self.inbox = EventInbox()
        self.pending: str | None = None
        self._form_spec: ClusterSpec | None = None
        self._closing: list[str] = []  # the runs being closed off the GUI thread, by name
        self._reader_to_start: RunReader | None = None  # the reader of a run just opened
        self._say = say
        self._relay = Relay(self)
        self._jobs = SerialJobs(self._relay, "window-run-switch")

    @property
    def spec(self) -> ClusterSpec | None:
        """The cluster the window shows: the bound run's, else the form's."""
        return self.source.spec if self.source is not None else self._form_spec

    @property
    def child(self) -> ChildRunSource | None:
        """The launch this window runs in a child process, while it is the run shown."""
        return self.source if isinstance(self.source, ChildRunSource) else None

    @property
    def controller(self) -> Controller | None:
        """The live controller when this window launched (or attached) the cluster."""
        session = self.session
        return session.controller if session is not None and self.source is session.controller else None

    def set_form_spec(self, spec: ClusterSpec | None) -> None:
        """The form's cluster: what the window shows while no run is bound, and launches next."""
        self._form_spec = spec

    def progress(self) -> str:
        """What runs off the GUI thread now, for the status bar ("" when nothing does)."""
        parts = [f"{self.pending}..."] if self.pending else []
        parts += [f"closing {name}..." for name in self._closing]
        return "; ".join(parts)

    # ------------------------------------------------------------------ changing the run

    def launch(self, spec: ClusterSpec, *, landed: Landed) -> bool:
        """Launch ``spec`` off the GUI thread (a new run directory and its live controller); it is
        bound, then ``landed(None)``, once ready, or ``landed(why)``. False when another launch or
        attach is under way."""
        if self.pending is not None:
            return False
        root = self.runs_root
        if in_child_process(spec):
            # A large cluster's controller in a process of its own: in this one it would share the
            # GIL with the GUI thread, and every frame would wait for it. The window follows it.
            self._start("launching", lambda: _child_started(launch_child(spec, root=root)), landed)
        else:
            self._start("launching", lambda: _started(LaunchSession.launch(spec, root=root, who="window")), landed)
        return True

    def attach(self, *, landed: Landed) -> bool:
        """Take over the run the source reads (its launcher gone, its roles left running): the
        agents are reconnected off the GUI thread, and the live run is bound once they are; on a
        refusal the reader stays. False when there is nothing to attach to, or a job is under way."""
        source = self.source
        if self.pending is not None or source is None or not source.attachable:
            return False
        path, spec = source.path, source.spec
        self._start("attaching", lambda: _started(LaunchSession.attach(path, spec, who="window")), landed)
        return True

    def open(self, path: Path) -> RunReader:
        """Follow the run directory ``path`` (a past run, or one another process runs); raises
        :class:`~core.run.reader.RunDirError`. Only its ``run.json`` and cluster file are read
        here; the reader's thread starts after the next frame (:meth:`after_frame`)."""
        reader = RunReader(path)
        inbox = EventInbox()
        reader.subscribe(inbox.put)
        self._bind(reader, None, inbox)
        self._reader_to_start = reader
        return reader

    def let_go(self) -> None:
        """Show no run any more (the window is closing): the source is closed off the GUI thread."""
        self._bind(None, None, EventInbox())

    def after_frame(self) -> None:
        """A frame was drawn: the reader of a run just opened starts now, once the run's roles are
        on screen (its thread took half the GIL while the window drew them the first time)."""
        reader, self._reader_to_start = self._reader_to_start, None
        if reader is not None and reader is self.source:
            start_soon(reader.start)  # starting a thread waits until it runs: not on this thread

    def shutdown(self) -> None:
        """No more jobs; the closes already asked for still finish (before the process exits)."""
        self._jobs.shutdown()

    # ------------------------------------------------------------------ users' commands

    def act_on_source(self, fn: Callable[[RunSource], Future[str]]) -> None:
        """Ask the live run for ``fn`` (stop all, restart all...); a refusal becomes a warning."""
        if self.source is not None and not self.source.done:
            fn(self.source).add_done_callback(functools.partial(_report_refusal, self.inbox))

    def act_on_roles(self, command: Callable[[RunSource, str], Future[str]], roles: list[str]) -> None:
        """``command`` (stop, restart, kill...) on each of ``roles`` of the live run."""
        if self.source is None or self.source.done:
            return
        for role in roles:
            command(self.source, role).add_done_callback(functools.partial(_report_refusal, self.inbox))

    # ------------------------------------------------------------------ internals

    def _start(self, what: str, work: Callable[[], _Started], landed: Landed) -> None:
        self.pending = what
        self._progress()

        def done(result: object, error: BaseException | None) -> None:
            self.pending = None
            if error is not None or not isinstance(result, tuple):
                self._progress()
                landed(str(error) or type(error).__name__)
                return
            source, session, inbox = result
            self._bind(source, session, inbox)
            landed(None)

        # A launch's roles nobody watches are stopped; an attach leaves them as it found them.
        self._jobs.submit(work, done, undelivered=functools.partial(_abandon, stop_roles=what == "launching"))

    def _bind(self, source: RunSource | None, session: LaunchSession | None, inbox: EventInbox) -> None:
        old_source, old_session = self.source, self.session
        self.source, self.session, self.inbox = source, session, inbox
        self._reader_to_start = None
        if old_source is not None:
            name = old_source.path.name
            self._closing.append(name)

            def closed(_result: object, error: BaseException | None) -> None:
                self._closing.remove(name)
                self._progress()
                if error is not None:
                    self._say(f"closing {name}: {error}")

            self._jobs.submit(lambda: _close(old_source, old_session), closed)
        self._progress()

    def _progress(self) -> None:
        self.sig_progress_changed.emit(self.progress())


def _started(session: LaunchSession) -> _Started:
    """A new session (on the run-switch thread): its events go to an inbox of its own, then it starts."""
    inbox = EventInbox()
    session.subscribe(inbox.put)  # the controller's events and the [notify] reports
    session.start()
    return session.controller, session, inbox


def _child_started(source: ChildRunSource) -> _Started:
    """A launch in a child process (on the run-switch thread), its control socket up: the reader of
    its run directory sends its events to an inbox of its own, then starts."""
    inbox = EventInbox()
    source.subscribe(inbox.put)
    source.start()
    return source, None, inbox


def _close(source: RunSource, session: LaunchSession | None) -> None:
    """Let go of a source, on the run-switch thread: a reader's thread is joined, a session's
    control socket closed and its run lock released (its notifier thread finishes on its own)."""
    if session is not None:
        session.close(notify_wait_s=0)
    source.release()


def _abandon(result: object, *, stop_roles: bool) -> None:
    """A launch or attach that landed after its window was gone, on the run-switch thread: a
    launch's roles are stopped (nobody would see them, nor stop them), an attach lets go of the
    roles it took over as they were; then the session is closed."""
    if isinstance(result, tuple) and isinstance(result[0], ChildRunSource):
        child = result[0]
        if stop_roles:
            with contextlib.suppress(Exception):
                child.stop_all().result(ABANDON_WAIT_S)
            child.wait(ABANDON_WAIT_S)
        child.release()
    elif isinstance(result, tuple) and isinstance(result[1], LaunchSession):
        session = result[1]
        with contextlib.suppress(Exception):
            if stop_roles:
                session.controller.close()
            else:
                session.controller.detach()
                session.controller.wait(ABANDON_WAIT_S)
        session.close(notify_wait_s=0)


def _report_refusal(inbox: EventInbox, future: Future[str]) -> None:
    """A refused action, on the source's thread: to the GUI thread through the inbox. It holds the
    inbox only, never the window, so the future's last reference never releases a Qt object there."""
    exc = future.exception()
    if exc is not None:
        inbox.put(warning(str(exc), time.time()))
