"""``launch`` and ``attach``: start or take over a run and follow it to its end, printing what a
person can follow (state changes, progress, warnings, why a role waits)."""

from __future__ import annotations

import argparse
import math
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from core.cli.exits import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, resolve_run
from core.cli.exits import print_problems as _print_problems
from core.cli.interrupts import on_signals
from core.cli.progname import PROG
from core.diagnosis.wording import waiting_lines
from core.run import journal, rundir
from core.run.events import (
    CheckpointsChanged,
    ClusterStateChanged,
    Event,
    GpuStatus,
    Metrics,
    RecoveryChanged,
    RoleCrashLoop,
    RoleOutput,
    RoleStalled,
    RoleStateChanged,
    RoleStraggler,
    RoleWaiting,
    Sample,
    Scalars,
    SlurmChanged,
    WarningMessage,
)
from core.run.status import TERMINAL, ClusterPhase, ClusterStatus, RoleState
from core.textsafe import terminal, terminal_lines
from core.views.conditions import short_exit, trouble_text
from core.views.rates import BATCHES, cluster_text, rate_text, status_rates
from core.views.slurm_text import slurm_lines

if TYPE_CHECKING:  # launching needs these; `ctl`, `runs`, `validate` do not wait for their imports
    from core.cluster.spec import ClusterSpec
    from core.controller.controller import Controller
    from core.controller.session import LaunchSession


# ------------------------------------------------------------------------------------------
# Launch

# An attempt is over in these states: no more output comes from it (a restart is a new attempt).
ENDED_STATES = frozenset({*(str(s) for s in TERMINAL), str(RoleState.BACKOFF)})


class LaunchPrinter:
    """Prints the controller's events as lines a person can follow. Every line is escaped for the
    terminal (core.textsafe.terminal): details, reasons, warnings and followed output carry
    trainers', hosts' and users' text, and a trainer printing ``\x1b]0;...`` must not retitle
    or clear the user's terminal."""

    def __init__(
        self,
        out: TextIO,
        follow: list[str],
        status: Callable[[], ClusterStatus] | None = None,
        progress_s: float = 5.0,
        *,
        spec: ClusterSpec | None = None,
    ) -> None:
        """``spec``: the run's cluster (its strategy and batch sizes define the rates shown)."""
        self.out = out
        self.status = status
        self.spec = spec
        self.progress_s = progress_s
        self._next_progress = time.time() + progress_s
        self.follow_all = "all" in follow
        self.follow = set(follow)
        self._partial: dict[str, str] = {}
        # Roles whose attempt ended since the last batch: their last line, if it has no newline,
        # is printed once the batch's output is (an exit is published after the output before it).
        self._ended: set[str] = set()
        self._slurm_said: tuple[Any, ...] = ()
        self._lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        with self._lock:
            for line in self._lines(event):
                print(terminal(line), file=self.out)  # names, details and output are users' and trainers' text
            self.out.flush()

    def _lines(self, event: Event) -> Iterator[str]:
        """What ``event`` prints, a line at a time."""
        stamp = time.strftime("%H:%M:%S", time.localtime(event.t))
        p = event.payload
        match p:
            case RoleStateChanged():
                state = str(p.state).upper() if p.state == RoleState.FAILED else str(p.state)
                yield f"{stamp}  {event.role:<12} {state:<10} {p.detail}"
                if event.role and p.state in ENDED_STATES:
                    self._ended.add(event.role)
            case ClusterStateChanged():
                reason = f": {p.reason}" if p.reason and p.phase != ClusterPhase.DONE else ""
                yield f"{stamp}  cluster      {p.phase}{reason}"
            # Paced by this machine's clock: a sample's own time is its host's, which may be off.
            case Sample() if self.status is not None and self.progress_s > 0 and time.time() >= self._next_progress:
                self._next_progress = time.time() + self.progress_s
                for line in progress_lines(self.status(), self.spec):
                    yield f"{stamp}  {line}"
            case RecoveryChanged():
                yield f"{stamp}  cluster      {p.text()}"
            case CheckpointsChanged() if p.problem:  # the checkpoints themselves: `ctl RUN checkpoints`
                yield f"{stamp}  checkpoints  {p.problem}"
            case RoleCrashLoop() if p.looping:
                why = short_exit(p.exit) + (f" ({p.error})" if p.error else "")
                of = f" of {p.attempts}" if p.attempts else ""
                wait = f" in {max(0.0, p.next_attempt_at - event.t):.0f} s" if p.next_attempt_at is not None else ""
                yield f"{stamp}  {event.role:<12} CRASH-LOOP {why}; attempt {p.attempt}{of}{wait}"
            case RoleCrashLoop():
                yield f"{stamp}  {event.role:<12} crash loop over: {p.detail}"
            case RoleStraggler() if p.straggler:
                yield f"{stamp}  {event.role:<12} STRAGGLER  {p.detail}"
            case RoleStraggler():
                yield f"{stamp}  {event.role:<12} straggler no more: {p.detail}"
            case RoleStalled():
                if p.stalled and p.step is None:  # never printed a step
                    message = f"STALLED    {p.detail} (start_stall_after_s)"
                elif p.stalled:
                    message = (
                        f"STALLED    no new step for {p.stalled_for_s or 0:.0f} s (stall_after_s = "
                        f"{p.stall_after_s or 0:g}), last step {p.step}; kill it with `ctl RUN kill {event.role}`"
                    )
                else:
                    message = f"unstalled  {p.detail}"
                yield f"{stamp}  {event.role:<12} {message}"
            case RoleWaiting() if event.role:
                for line in waiting_lines(event.role, p.to_record()):
                    yield f"{stamp}  {line}"
            case SlurmChanged():
                said = (p.state, p.reason, bool(p.steps))
                if said != self._slurm_said:  # the record is republished as it fills in
                    self._slurm_said = said
                    for line in slurm_lines(p.to_record()):
                        yield f"{stamp}  {line}"
            case GpuStatus():
                yield f"{stamp}  {p.status}"
            case WarningMessage():
                yield f"{stamp}  warning: {p.message}"
            case RoleOutput() if event.role and (self.follow_all or event.role in self.follow):
                text = self._partial.get(event.role, "") + p.text
                *lines, rest = text.split("\n")
                self._partial[event.role] = rest[-4096:]
                for line in lines:
                    yield self._line(event.role, line)

    @staticmethod
    def _line(role: str, line: str) -> str:
        # A progress bar's redraws show as their last state; CRLF line ends are line ends.
        return f"{role:>12} | {line.rstrip(chr(13)).rsplit(chr(13), 1)[-1]}"

    def end_batch(self) -> None:
        """After a batch of events and output: the last line of each role that ended since, if
        it has no newline (``sys.stdout.write("FATAL ..."); exit 3``, or a UTF-8 sequence cut
        short, which the controller shows as U+FFFD), is printed now: no more output comes from
        that attempt. The role's log keeps the bytes as they were."""
        with self._lock:
            ended, self._ended = self._ended, set()
            shown = False
            for role in sorted(ended):
                rest = self._partial.pop(role, "")
                if rest and (self.follow_all or role in self.follow):
                    print(terminal(self._line(role, rest)), file=self.out)
                    shown = True
            if shown:
                self.out.flush()


class PrinterThread:
    """Runs a :class:`LaunchPrinter` on its own thread, fed through the window's bounded inbox:
    the controller only drops events in the inbox, so a stdout nobody reads (a paused pager, a
    stalled SSH terminal) never stops restarts or stall detection. State events are all kept;
    telemetry and output are coalesced as the window's are."""

    def __init__(self, printer: Callable[[Event], None], interval_s: float = 0.1) -> None:
        from core.run.inbox import EventInbox

        self.inbox = EventInbox()
        self.printer = printer
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="launch-printer", daemon=True)
        self._thread.start()

    def put(self, event: Event) -> None:
        """Take ``event`` for the printer (on the controller's thread). What it prints nothing for
        is not kept: training metrics, TensorBoard scalars, and the output of a role it does not
        follow; at 256 simulated workers keeping them cost the controller a merge per event and
        the printer a pass over every role's pieces each period, to print nothing."""
        payload = event.payload
        if isinstance(payload, (Metrics, Scalars)):
            return
        printer = self.printer
        if (
            isinstance(payload, RoleOutput)
            and isinstance(printer, LaunchPrinter)
            and not printer.follow_all
            and event.role not in printer.follow
        ):
            return
        self.inbox.put(event)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._print_pending()
        self._print_pending()

    def _print_pending(self) -> None:
        events, output = self.inbox.drain()
        now = time.time()
        for event in [*events, *(Event(now, role, piece) for role, pieces in output.items() for piece in pieces)]:
            try:
                self.printer(event)
            except (OSError, ValueError):  # stdout closed (a pager quit): keep draining, print nothing
                self.printer = _discard
        if isinstance(self.printer, LaunchPrinter):
            try:
                self.printer.end_batch()
            except (OSError, ValueError):
                self.printer = _discard

    def close(self) -> None:
        """Print what is left, then return (waits on stdout as a printer must)."""
        self._stop.set()
        self._thread.join()


def _discard(_event: Event) -> None:
    pass


def progress_lines(status: ClusterStatus, spec: ClusterSpec | None = None) -> list[str]:
    """One compact line per running training role: step, loss, step time, its own batches/s, CPU,
    RSS, GPU; then the cluster's global steps/s and examples/s (core.views.rates, with ``spec``'s
    strategy and batch sizes). A straggler flag is said when it starts and ends, not here."""
    lines = []
    now = time.time()
    rates = status_rates(status.roles, spec)
    for r in status.roles:
        if r.crash_looping:  # between attempts, or in one that has not run healthily yet
            lines.append(f"{r.role:<12}  {trouble_text(r, now)}")
            continue
        if r.state != RoleState.RUNNING or r.job == "ps":
            continue
        parts = [f"{r.role:<12}"]
        parts.append(f"step {r.step}" if r.step is not None else "step -")
        tb = " (tb)" if r.loss_source == "tb" else ""  # read from TensorBoard files, not the output
        parts.append(f"loss{tb} {r.loss:.4f}" if r.loss is not None else "loss -")
        parts.append(f"{r.step_time_s * 1000:.1f} ms/step" if r.step_time_s is not None else "- ms/step")
        if r.role in rates.batches_per_s:
            parts.append(f"{rate_text(rates.of(r.role))} {BATCHES}")
        if r.cpu_percent is not None:
            parts.append(f"cpu {r.cpu_percent:.0f}%")
        if r.rss_bytes is not None:
            parts.append(f"rss {r.rss_bytes / 2**20:.0f} MiB")
        gpus = ",".join(str(g) for g in r.gpus) or "-"
        util = f" {r.gpu_utilization_percent:.0f}%" if r.gpu_utilization_percent is not None else ""
        parts.append(f"gpu {gpus}{util}")
        if r.stalled:
            parts.append(f"STALLED for {r.stalled_for_s or 0:.0f} s (`ctl RUN kill {r.role}` to kill it)")
        lines.append("  ".join(parts))
    if any(r.state == RoleState.RUNNING for r in status.roles) and (said := cluster_text(rates)):
        lines.append(f"{'cluster':<12}  {said}")
    return lines


def cmd_launch(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from core.controller.session import LaunchSession, load_checked, needs_preflight

    spec = load_checked(args.file, err)
    if spec is None:
        return EXIT_USAGE
    if not follows_known_roles(args.follow, spec.role_ids(), err):
        return EXIT_USAGE
    if not args.no_preflight and needs_preflight(spec):
        from core.preflight.runner import PreflightRun, format_table, preflight

        checking = PreflightRun()
        with on_signals(lambda signum: checking.cancel()):  # Ctrl-C, SIGTERM, SIGHUP end a hung ssh at once
            results = preflight(spec, run=checking)
        if checking.cancelled:
            print("interrupted during the pre-flight: nothing was launched", file=err)
            return EXIT_INTERRUPTED
        if not all(r.ok for r in results):
            print(terminal_lines(format_table(results).split("\n")), file=err)
            print(
                terminal(f"{args.file}: a host cannot launch (see above); fix it, or --no-preflight to try anyway"),
                file=err,
            )
            return EXIT_USAGE
    try:
        session = LaunchSession.launch(
            spec, path=args.run_dir.resolve() if args.run_dir else None, on_disconnect=args.on_disconnect
        )
    except OSError as exc:
        if args.run_dir:
            print(terminal(f"--run-dir: cannot create the run directory: {exc}"), file=err)
        else:  # the default place: the data directory is at fault, not an option the user did not give
            print(
                terminal(
                    f"cannot create a run directory under {rundir.runs_root()}: {exc.strerror or exc}; "
                    "give --run-dir, or set TOWERDECK_DATA_DIR to a folder you can write"
                ),
                file=err,
            )
        return EXIT_USAGE
    print(terminal(f"run directory: {session.run.path}"), file=out, flush=True)
    if spec.slurm is not None:
        where = f"partition {spec.slurm.partition}" if spec.slurm.partition else "the default partition"
        print(terminal(f"Slurm: submitting one allocation in {where}"), file=out, flush=True)
    return _supervise(session, args, out=out, err=err, started=time.time())


def cmd_attach(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    path = resolve_run(args.run, args.root, err)
    if path is None:
        return EXIT_USAGE
    info = rundir.read_info(path)
    if info is None:
        print(terminal(f"run: {path / 'run.json'} is damaged (not a JSON object); nothing to attach to"), file=err)
        return EXIT_USAGE
    if info.state == "done":
        print(terminal(f"run {info.id} is over ({info.result}); see its logs in {path}"), file=err)
        return EXIT_FAILED
    ended = _ended_roles(path, info.role_ids)
    if ended is not None:
        # Its launcher died after the last role ended (run.json still says `completing` or
        # `running`): there is nothing left to attach to, and the record is left as it is.
        print(
            terminal(f"run {info.id} had ended when its launcher stopped ({ended}); see its logs in {path}"), file=err
        )
        return EXIT_FAILED
    spec, problems = rundir.read_run_spec(path)
    if spec is None:
        _print_problems(problems, str(path / rundir.SPEC_FILE), err)
        return EXIT_USAGE
    if not follows_known_roles(args.follow, list(info.role_ids) or spec.role_ids(), err):
        return EXIT_USAGE
    from core.controller.session import LaunchSession, SessionError

    try:
        session = LaunchSession.attach(path, spec)
    except SessionError as exc:
        print(terminal(f"run: {exc}"), file=err)
        return EXIT_USAGE
    controller = session.controller
    print(terminal(f"run directory: {path}"), file=out, flush=True)
    slurm = controller.slurm_state()
    if slurm and slurm.get("job_id"):
        print(
            terminal(f"Slurm job {slurm['job_id']} on {slurm.get('nodelist') or '?'}: reattaching"),
            file=out,
            flush=True,
        )
    return _supervise(session, args, out=out, err=err, started=time.time())


def follows_known_roles(follow: list[str], role_ids: list[str], err: TextIO) -> bool:
    """Whether every ``--follow`` names a role of the run (or ``all``); one line when not."""
    unknown = [name for name in follow if name != "all" and name not in role_ids]
    if unknown:
        shown = ", ".join(role_ids[:8]) + (", ..." if len(role_ids) > 8 else "")
        print(terminal(f"--follow {unknown[0]}: no such role; the roles are {shown} (or 'all')"), file=err)
    return not unknown


def _ended_roles(path: Path, role_ids: tuple[str, ...]) -> str | None:
    """``ps:0 succeeded, worker:0 failed`` when the journal has every role ended, else None."""
    if not role_ids:
        return None
    last = journal.last_role_states(path, frozenset(role_ids))
    states = [(role, str(last.get(role, {}).get("state"))) for role in role_ids]
    if not all(state in {str(s) for s in TERMINAL} for _, state in states):
        return None
    return ", ".join(f"{role} {state}" for role, state in states)


def _run_duration_s(path: Path) -> float | None:
    """How long the run took, by its journal: from its first record to the cluster's ``done``.
    An ``attach`` takes over a run that started long before it (and may end at once): the time
    it watched is not the run's. None when the journal does not say (then the caller's clock)."""
    first = done = None
    try:
        for record in journal.iter_journal(path):
            t = record.get("t")
            if not isinstance(t, (int, float)) or isinstance(t, bool) or not math.isfinite(t):
                continue
            first = t if first is None else first
            if record.get("kind") == "cluster_state" and record.get("phase") == "done":
                done = t
    except OSError:
        return None
    return done - first if first is not None and done is not None and done >= first else None


def _print_summary(
    status: ClusterStatus, controller: Controller, elapsed_s: float, *, path: Path, tail: int, out: TextIO
) -> None:
    print("\n" + terminal(f"{status.result or 'ended'} after {elapsed_s:.1f} s: {status.reason}"), file=out)
    rates = status_rates(status.roles, controller.spec)
    if said := cluster_text(rates):
        print(f"  speed at the end: {said}", file=out)
    for role in status.roles:
        extra = f" ({role.restarts} restart{'s' if role.restarts != 1 else ''})" if role.restarts else ""
        # A role Slurm ended says so (its detail), not only the signal that ended it.
        how = role.detail if "by Slurm" in role.detail else role.exit_text
        own = f", {rate_text(rates.of(role.role))} {BATCHES}" if rates.of(role.role) is not None else ""
        print(terminal(f"  {role.role:<12} {role.state!s:<10} {how}{extra}{own}"), file=out)
    for role in status.roles:
        if role.state == RoleState.FAILED:
            print("\n" + terminal(f"last output of {role.role} ({role.log_path}):"), file=out)
            for line in controller.last_lines(role.role, tail):
                print(f"  {terminal(line)}", file=out)
    print("\n" + terminal(f"run directory: {path}"), file=out, flush=True)


def _supervise(session: LaunchSession, args: argparse.Namespace, *, out: TextIO, err: TextIO, started: float) -> int:
    """Wait for a launched or reattached run to end: Ctrl-C or SIGTERM stops it, twice kills."""
    controller, run = session.controller, session.run
    # --quiet: nobody reads these lines (a window follows the run directory), so none are made.
    printer = (
        None
        if getattr(args, "quiet", False)
        else PrinterThread(
            LaunchPrinter(out, args.follow, controller.status, args.progress_every, spec=controller.spec)
        )
    )
    if printer is not None:
        session.subscribe(printer.put)
    interrupts = 0

    def on_signal(signum: int, frame: object) -> None:
        nonlocal interrupts
        interrupts += 1
        if interrupts == 1:
            print(f"\n{signal.Signals(signum).name}: stopping every role (again to kill)", file=err, flush=True)
            controller.stop_all()
        else:
            controller.kill_all()

    is_main = threading.current_thread() is threading.main_thread()
    previous: dict[int, Any] = {}
    if is_main:
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, on_signal)
    try:
        session.start()
        while not controller.wait(0.2):
            pass
        controller.close()
    finally:
        session.close()
        if printer is not None:
            printer.close()
        if is_main:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
    status = controller.status()
    if status.phase == "detached":
        print("\n" + terminal(f"left running; reattach with: {PROG} attach {run.path}"), file=out, flush=True)
        return EXIT_OK
    elapsed_s = _run_duration_s(run.path)
    _print_summary(
        status,
        controller,
        time.time() - started if elapsed_s is None else elapsed_s,
        path=run.path,
        tail=args.tail,
        out=out,
    )
    if interrupts:
        return EXIT_INTERRUPTED
    return EXIT_OK if status.result == "succeeded" else EXIT_FAILED
