"""A role as the controller supervises it: the shared :class:`~core.run.role_view.RoleView` plus what only
supervision needs (restart budget, deadlines, the last lines of output, stall tracking)."""

from __future__ import annotations

import collections
import time
from pathlib import Path
from typing import Any, NamedTuple

from core.cluster.spec import Task
from core.run.role_view import RoleView
from core.run.status import RoleState
from core.telemetry.live import RoleTelemetry
from core.telemetry.tbevents import ScalarTailer

TAIL_LINES = 200
HISTORY_LIMIT = 1000


class StateChange(NamedTuple):
    """One entry of a role's state history: since when, the state, and how it came (an exit code)."""

    since: float
    state: RoleState
    detail: str


MAX_LINE_CHARS = 64 * 1024


class SupervisedRole(RoleView):
    """A role as the controller drives it: the shared view plus what only supervision needs."""

    def __init__(self, task: Task, host_key: str, run_path: Path, patterns: tuple[str, ...] = ()) -> None:
        super().__init__(task, run_path, since=time.time())
        self.host_key = host_key
        self.policy_restarts = 0
        self.stop_requested = False
        self.restart_after_stop = False
        self.held_for_recovery = (
            False  # a recovery holds it: when it ends it waits for its group (core.controller.recovery)
        )
        self.running_at: float | None = None
        self.backoff_until: float | None = None
        self.tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        self.partial = ""
        self.history: collections.deque[StateChange] = collections.deque(maxlen=HISTORY_LIMIT)
        self.telemetry = RoleTelemetry(patterns)
        self.stats = self.telemetry.stats  # the view's output figures are the parser's
        self.tensorboard: ScalarTailer | None = None
        # Stall detection: the last step seen and when it changed; reset by every (re)start.
        self.last_step: int | None = None
        self.progress_at: float | None = None
        self.output_blocked = False  # its log cannot be written (disk full): no news is not a stall
        self.parsed_noted_at = 0.0  # when parsed.json was last written (core.run.rundir.note_parsed)
        # A flood's newest output chunk left unparsed, and when it is next parsed (core.controller.output_intake).
        self.held_output: dict[str, Any] | None = None
        self.held_due = 0.0

    def add_output(self, text: str) -> None:
        """Keep the last lines as a terminal would show them (a carriage return redraws)."""
        text = self.partial + text
        lines = text.split("\n")
        self.partial = lines.pop()[-MAX_LINE_CHARS:]
        for line in lines:
            self.tail.append(line.rsplit("\r", 1)[-1] if "\r" in line.rstrip("\r") else line.rstrip("\r"))

    def last_lines(self, n: int) -> list[str]:
        lines = list(self.tail)
        if self.partial:
            lines.append(self.partial.rsplit("\r", 1)[-1])
        return lines[-n:]
