"""Roles' output as the controller takes it in: parsed into metrics, shown, and where a reattach
resumes. A flood is coalesced: while the controller is far behind (or the run is stopping), only
the newest chunk of each role is kept and its last lines parsed a few times a second, so exits and
a stop are news in seconds whatever the backlog; every byte is in the role's log all the same."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from core.controller.roles import RoleMachine
from core.controller.stalls import StallWatch
from core.controller.supervised import SupervisedRole
from core.diagnosis.rules import Diagnoser
from core.remote.transport import output_bytes, readable
from core.run.events import Event, Metrics, RoleOutput, warning
from core.run.publish import Publisher
from core.run.rundir import RunDir
from core.telemetry.checkpoints import restored_from
from core.telemetry.live import sample_dict
from core.telemetry.metrics import SlowPattern
from core.telemetry.regex_risk import FIX as REGEX_FIX

LAG_S = 2.0  # output that waited this long in the controller's queue is coalesced
RECEIVED_KEY = "_received"  # an event's arrival in the queue (time.monotonic()), set by the controller
COALESCE_KEEP_CHARS = 4096  # of a coalesced chunk, what is parsed and shown (its last lines)
COALESCE_PERIOD_S = 0.5  # how often a coalesced role's newest lines are parsed
PARSED_NOTE_PERIOD_S = 1.0
COALESCE_WARNING_EVERY_S = 60.0


class OutputIntake:
    """``output`` and ``skipped`` events, on the controller's thread. ``behind_anyway``: true while
    the run stops or is over (or a stop was asked): a flood is then coalesced at once.
    ``on_restored``: told when a role's line says which checkpoint it restored."""

    def __init__(
        self,
        run: RunDir,
        roles: RoleMachine,
        stalls: StallWatch,
        publisher: Publisher,
        diagnoser: Diagnoser,
        *,
        behind_anyway: Callable[[], bool],
        on_restored: Callable[[SupervisedRole, str, int | None], None] = lambda _role, _name, _step: None,
    ) -> None:
        self._run = run
        self._roles = roles
        self._stalls = stalls
        self._publisher = publisher
        self._diagnoser = diagnoser
        self._behind_anyway = behind_anyway
        self._on_restored = on_restored
        self._coalesced: set[str] = set()  # roles whose output was coalesced
        self._coalesce_said_at: float | None = None

    def on_output(self, role: SupervisedRole, event: dict[str, Any]) -> None:
        data = str(event.get("data", ""))
        if len(data) > COALESCE_KEEP_CHARS and self._behind(event):
            role.held_output = event  # the newest chunk: older unparsed ones are dropped here
            self._say_coalescing(role)
            now = time.monotonic()
            if now >= role.held_due:
                role.held_due = now + COALESCE_PERIOD_S
                self.take_held(role)
            return
        if role.held_output is not None:  # unparsed chunks lie between: this one starts afresh
            role.held_output = None
            with self._roles.lock:
                role.partial = ""
                role.telemetry.break_stream()
        offset = event.get("offset")
        self._take_output(role, data, offset=offset if isinstance(offset, int) else None, t=float(event.get("t") or 0))

    def take_held(self, role: SupervisedRole) -> None:
        """Parse and show the last lines of a role's newest coalesced chunk, if one waits."""
        event, role.held_output = role.held_output, None
        if event is None:
            return
        data, end = str(event.get("data", "")), event.get("end")
        cut = data.rfind("\n", 0, len(data) - COALESCE_KEEP_CHARS)
        tail = data[cut + 1 :]
        with self._roles.lock:
            role.partial = ""  # what came before is not joined to these lines
            role.telemetry.break_stream()
        offset = end - len(output_bytes(tail)) if isinstance(end, int) else None
        self._take_output(role, tail, offset=offset, t=float(event.get("t") or 0))

    def _take_output(self, role: SupervisedRole, data: str, *, offset: int | None, t: float) -> None:
        text = readable(data)
        name = role.task.role_id
        with self._roles.lock:
            role.add_output(text)
            samples = role.telemetry.feed(text, t or time.time())
            slow = role.telemetry.take_slow_patterns()
        for pattern in slow:
            self._say_slow_pattern(role, pattern)
        self._publisher.publish(
            Event(round(time.time(), 3), name, RoleOutput(text, attempt=role.attempt, offset=offset))
        )
        # A chunk's steps before its lines: a step clears the waits of earlier chunks, and a wait
        # sign in this chunk stands. A worker that printed a step and then lost its ps, in one read,
        # is waiting; in the other order the step cleared the wait it printed after (seen in CI).
        # A step printed after a sign in the same chunk leaves the wait until the next step, one
        # read later; most signs are judged only after a long wait, so that shows nothing.
        self._stalls.progress(role, [s.step for s in samples if s.step is not None])
        self._roles.waits(self._diagnoser.on_output(name, text, time.time()))
        self._look_for_restores(role, text)
        if samples:
            records = [sample_dict(s) for s in samples]
            self._run.append_metrics(role.task, records)
            self._publisher.publish(Event(round(time.time(), 3), name, Metrics(records)))
        # Where a reattach resumes parsing: after this chunk's last whole line. Written with every
        # chunk that gave metrics (so none is recorded twice), else at most once a second.
        now = time.monotonic()
        if offset is not None and (samples or now - role.parsed_noted_at >= PARSED_NOTE_PERIOD_S):
            newline = output_bytes(data).rfind(b"\n")
            if newline >= 0:
                role.parsed_noted_at = now
                self._run.note_parsed(role.task, role.attempt, offset + newline + 1)

    def _look_for_restores(self, role: SupervisedRole, text: str) -> None:
        """A line that says which checkpoint the role restored (a cheap test first: a chunk of
        step lines has no "estor"/"esum" in it)."""
        lowered = text.lower()
        if "estor" not in lowered and "esum" not in lowered:
            return
        for line in text.splitlines():
            found = restored_from(line)
            if found is not None:
                self._on_restored(role, *found)

    def _say_slow_pattern(self, role: SupervisedRole, slow: SlowPattern) -> None:
        """One line: which pattern, on which line of which role, and what to do."""
        more = "..." if slow.line_chars > len(slow.line) else ""
        # repr(): the pattern and the trainer's line may hold escapes a terminal would act on.
        message = (
            f"{role.task.role_id}: metric pattern {slow.regex!r} took over {slow.timeout_s:g} s on the line "
            f"{slow.line!r}{more} ({slow.line_chars} characters) and is off for this role from now on (the run "
            f"goes on; every line is in {role.log_path}). Fix: {REGEX_FIX} in metric_patterns"
        )
        self._publisher.publish(warning(message, round(time.time(), 3), role.task.role_id))

    def on_skipped(self, role: SupervisedRole, event: dict[str, Any]) -> None:
        """The agent skipped a role's output backlog, far behind or stopping (it is all in the log)."""
        offset, end = event.get("offset"), event.get("end")
        if not isinstance(offset, int) or not isinstance(end, int):
            return
        role.held_output = None
        note = f"\n[towerdeck] {end - offset} bytes of output skipped here to catch up (all in {role.log_path})\n"
        with self._roles.lock:
            role.partial = ""
            role.telemetry.break_stream()
            role.add_output(note)
        output = RoleOutput(note, attempt=role.attempt, offset=offset)
        self._publisher.publish(Event(round(time.time(), 3), role.task.role_id, output))
        self._run.note_parsed(role.task, role.attempt, end)

    def _behind(self, event: dict[str, Any]) -> bool:
        received = event.get(RECEIVED_KEY)
        return (isinstance(received, float) and time.monotonic() - received > LAG_S) or self._behind_anyway()

    def _say_coalescing(self, role: SupervisedRole) -> None:
        """One warning for the run, not one per role, at most once a minute: coalescing is the
        controller's state (behind, or stopping), not something a role did, and at 1,024 workers a
        warning per role was 1,024 lines burying everything else."""
        self._coalesced.add(role.task.role_id)
        now = time.monotonic()
        if self._coalesce_said_at is not None and now - self._coalesce_said_at < COALESCE_WARNING_EVERY_S:
            return
        self._coalesce_said_at = now
        count = len(self._coalesced)
        roles = f"{count} roles so far" if count > 1 else role.task.role_id
        why = (
            "the run is stopping"
            if self._behind_anyway()
            else f"the controller is more than {LAG_S:g} s behind the roles' output"
        )
        message = (
            f"{why}: the newest lines of each role ({roles}) are parsed and shown a few times a second, "
            f"not every line, until it catches up; every byte is in the roles' logs (e.g. {role.log_path})"
        )
        self._publisher.publish(warning(message, round(time.time(), 3)))
