"""Hands the controller's events to a view's thread without blocking the controller.

The controller calls :meth:`EventInbox.put` on its own thread. The window drains the inbox on a
QTimer at the screen's pace and redraws once per frame from what arrived, so a chatty role can
never make the window repaint per line; ``launch`` and ``attach`` drain it on a printer thread,
so a blocked stdout (a paused pager, a stalled SSH terminal) never stops supervision.

Nothing the window must show is dropped:

- state events (role states, phases, host states, warnings...) are kept, in order, all of them:
  they come at human rates (a few per role and restart), never per step;
- telemetry is coalesced per role (``metrics``, ``scalars``) or per host (``sample``): the batches
  that arrive between two frames are merged into one, point for point. Only when one key holds
  more than :data:`MAX_TELEMETRY_POINTS` points (the GUI far behind) are they thinned, every other
  point in the older half, keeping the first and the newest, and counted in
  :attr:`EventInbox.thinned_points`: the bounded series downsample so much anyway;
- output text is coalesced per role (a piece per attempt, so a view can say where an attempt
  begins) and bounded; the run directory has all of it.
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Any, cast

from core.run.events import Event, Metrics, RoleOutput, Sample, Scalars

MAX_OUTPUT_CHARS_PER_FRAME = 64 * 1024  # ~650 lines of 100 chars a frame: more than a screen shows
MAX_TELEMETRY_POINTS = 200_000  # per role or host between two drains: ~20 MB at worst
SAMPLE_POINTS = 16  # what a host sample costs a view against one metrics point: 8 GPUs x 2 series
TURN_POINTS = 16  # the least a key's turn at a drain takes, when many keys share it
METRICS, SCALARS, SAMPLE = "metrics", "scalars", "sample"  # the kinds of telemetry key


class EventInbox:
    """A thread-safe mailbox from the controller thread to the GUI thread; bounded for telemetry
    and output, lossless for state."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: collections.deque[Event] = collections.deque()
        # (kind, role or host) -> the points that arrived: metrics records, scalar points, or Sample events.
        self._telemetry: dict[tuple[str, str], list[object]] = {}
        self._served: set[tuple[str, str]] = set()  # the keys a bounded drain has handed points of
        self._output: dict[str, collections.deque[tuple[int | None, str]]] = {}
        self._output_chars: dict[str, int] = {}
        self._skipped_chars: dict[str, int] = {}
        self.dropped_output_chars = 0
        self.thinned_points = 0

    def put(self, event: Event) -> None:
        """Called on the controller thread; never blocks on the GUI."""
        payload = event.payload
        with self._lock:
            if isinstance(payload, RoleOutput) and event.role is not None:
                self._put_output(event.role, payload.text, payload.attempt)
            elif isinstance(payload, Metrics) and event.role is not None:
                if payload.samples:
                    self._merge((METRICS, event.role), list(payload.samples))
            elif isinstance(payload, Scalars) and event.role is not None:
                if payload.points:
                    self._merge((SCALARS, event.role), list(payload.points))
            elif isinstance(payload, Sample):
                self._merge((SAMPLE, payload.host), [event])
            else:
                self._events.append(event)

    def _merge(self, key: tuple[str, str], items: list[object]) -> None:
        kept = self._telemetry.setdefault(key, [])
        kept.extend(items)
        if len(kept) > MAX_TELEMETRY_POINTS:
            # Thin the older half, every other point: the series would fold them into buckets anyway.
            half = len(kept) // 2
            older = kept[:half]
            thinned = older[:1] + older[1:-1:2] + older[-1:]
            self.thinned_points += len(older) - len(thinned)
            kept[:] = thinned + kept[half:]

    def _take(self, max_points: int) -> dict[tuple[str, str], list[object]]:
        """At most ``max_points`` telemetry points, oldest first per key; a host sample counts
        as :data:`SAMPLE_POINTS` (it feeds a series pair per GPU). Keys take turns: one whose
        points did not all fit goes behind the others, so every role and host is served within a
        few drains however large one key's backlog is."""
        taken: dict[tuple[str, str], list[object]] = {}
        # A key never served before first takes a short turn (:data:`TURN_POINTS`), ahead of the
        # others' backlogs: a window opened a minute into a live 256-worker run found 600 lines
        # queued per worker, and a whole backlog a turn served 3 workers a drain (61 of 256 curves
        # after 10 s at load 15, every one only after 30 s). Only once: short turns for every key at
        # every drain cost a view a call per key and turn (+40 % CPU opening a day-long run).
        fresh = [key for key in self._telemetry if key not in self._served]
        budget = self._turns(taken, max_points, turn=TURN_POINTS, keys=fresh) if fresh else max_points
        if budget > 0:
            self._turns(taken, budget, turn=max_points, keys=list(self._telemetry))
        return taken

    def _turns(
        self, taken: dict[tuple[str, str], list[object]], budget: int, *, turn: int, keys: list[tuple[str, str]]
    ) -> int:
        """One turn of each of ``keys``, each taking at most ``turn`` points of ``budget``, into
        ``taken``; what is left of the budget."""
        for key in keys:
            weight = SAMPLE_POINTS if key[0] == SAMPLE else 1
            n = min(budget, max(turn, weight)) // weight
            if n <= 0:
                if budget <= 0:
                    break
                continue  # a host sample costs more than is left; a role's points may still fit
            items = self._telemetry.pop(key)
            if len(items) <= n:
                part = items
            else:
                # The rest goes behind every other key: a key that kept its place at the front was
                # served first at every drain, and a window following 256 workers took 32 hosts'
                # samples for minutes while no worker's metrics reached its Training tab.
                part, self._telemetry[key] = items[:n], items[n:]
            taken.setdefault(key, []).extend(part)
            self._served.add(key)
            budget -= len(part) * weight
        return budget

    def _put_output(self, role: str, text: str, attempt: int | None) -> None:
        parts = self._output.setdefault(role, collections.deque())
        parts.append((attempt, text))
        size = self._output_chars.get(role, 0) + len(text)
        # Keep the newest output for the screen; the run directory has all of it.
        while size > MAX_OUTPUT_CHARS_PER_FRAME and len(parts) > 1:
            dropped = len(parts.popleft()[1])
            size -= dropped
            self._skipped_chars[role] = self._skipped_chars.get(role, 0) + dropped
            self.dropped_output_chars += dropped
        self._output_chars[role] = size

    def pending(self) -> int:
        """State events and telemetry points waiting (for tests and the status bar)."""
        with self._lock:
            return len(self._events) + sum(len(v) for v in self._telemetry.values())

    def drain(self, max_points: int | None = None) -> tuple[list[Event], dict[str, list[RoleOutput]]]:
        """Everything since the last drain: state events in order, then one merged telemetry
        event per role and kind (host samples one by one, in order), and output per role: its text
        in order, a piece per run of one attempt's chunks.

        With ``max_points``, at most that many telemetry points come out (the rest, in order, at
        the next drain): a reopened run's thousands of points per role reach the views over a few
        frames instead of stalling one."""
        with self._lock:
            events = list(self._events)
            self._events.clear()
            if max_points is None:
                telemetry, self._telemetry = self._telemetry, {}
            else:
                telemetry = self._take(max_points)
            output: dict[str, list[RoleOutput]] = {}
            for role, parts in self._output.items():
                skipped = self._skipped_chars.get(role, 0)
                note = (
                    f"[towerdeck: {skipped} characters of fast output not shown here; the run directory has them all]\n"
                    if skipped
                    else ""
                )
                output[role] = _pieces(parts, note)
            self._output.clear()
            self._output_chars.clear()
            self._skipped_chars.clear()
        now = time.time()
        for (kind, key), items in telemetry.items():
            records = cast(list[dict[str, Any]], items)  # what put() merged under this kind
            if kind == SAMPLE:
                events.extend(e for e in items if isinstance(e, Event))
            elif kind == METRICS:
                events.append(Event(now, key, Metrics(records)))
            else:
                events.append(Event(now, key, Scalars(records)))
        return events, output


def _pieces(parts: collections.deque[tuple[int | None, str]], note: str) -> list[RoleOutput]:
    """Consecutive chunks of one attempt as one piece; ``note`` before the first."""
    runs: list[tuple[int | None, list[str]]] = []
    for attempt, text in parts:
        if runs and runs[-1][0] == attempt:
            runs[-1][1].append(text)
        else:
            runs.append((attempt, [text]))
    pieces = [RoleOutput("".join(texts), attempt=attempt) for attempt, texts in runs]
    if note and pieces:
        pieces[0] = RoleOutput(note + pieces[0].text, attempt=pieces[0].attempt)
    return pieces
