"""Stragglers judged on a window, not a reading: a worker is a straggler when its typical step time
over a window has stayed well above its peers' for a sustained time, and stops being one when it
has stayed close to them for as long.

- :class:`StepTimes` keeps one worker's step-time readings: the ones its trainer prints, else the
  time of each stretch of two seconds or more over the steps made in it, measured between output
  batches (lines of one batch share a time: never between two lines of one batch). Its
  :meth:`StepTimes.median` is the time-weighted median over the last :data:`WINDOW_S` seconds or
  :data:`MIN_STEPS` steps, whichever is longer: the step time the worker ran at for more than half of
  that window, which a 5x step every 20 steps, or ±50 % jitter, does not move.
- :class:`StragglerJudge` compares each worker's median with the median of the others' and raises a
  flag only when the ratio has stayed at or above :data:`FLAG_RATIO` for :data:`HOLD_S`; it clears it
  when the ratio has stayed below :data:`CLEAR_RATIO` (a lower threshold: hysteresis) for as long, so
  a worker near the line does not blink. Its clock is the caller's, so a test drives three minutes
  of steps in milliseconds.

A worker slowed 2x is flagged some 20 s after it slowed (measured over 120 simulated runs with ±50 %
jitter and a 5x step every 20: 19-29 s), and cleared as long after it recovered (18-24 s): the
time-weighted median turns once the slow (or fast) stretch fills half the window, then the hold.
"""

from __future__ import annotations

import bisect
import collections
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "CLEAR_RATIO",
    "FLAG_RATIO",
    "HOLD_S",
    "MIN_STEPS",
    "WINDOW_S",
    "StepTimes",
    "StragglerChange",
    "StragglerJudge",
]

WINDOW_S = 30.0
MIN_STEPS = 50  # a window holds at least this many steps, and a worker with fewer is not judged
MIN_READINGS = 10  # nor one with fewer readings than this: a median of 3 stretches says little
MAX_READINGS = 2048  # a worker printing faster than ~70 lines/s is judged on its newest 2048
FLAG_RATIO = 1.5
CLEAR_RATIO = 1.4
HOLD_S = 4.0
# A step time derived from steps is measured over a stretch at least this long: a 1 s stretch of
# 10 steps holds a 5x step or not, and the medians of such bimodal readings wandered.
DERIVED_SPAN_S = 2.0


class StepTimes:
    """One worker's step-time readings, bounded; see the module docstring."""

    def __init__(self) -> None:
        # (t, step time, weight, steps): a printed time counts as one step, a derived one its stretch's
        self._readings: collections.deque[tuple[float, float, float, float]] = collections.deque()
        self._steps = 0.0  # the readings' steps
        self._group: tuple[float, float] | None = None  # the newest batch: its time and its last step
        self._ends: collections.deque[tuple[float, float]] = collections.deque()  # where the stretch began

    def __len__(self) -> int:
        return len(self._readings)

    def readings(self) -> list[tuple[float, float]]:
        """The window's readings: (time, step time), oldest first."""
        return [(t, value) for t, value, _w, _s in self._readings]

    def __repr__(self) -> str:
        return f"StepTimes(group={self._group!r}, ends={list(self._ends)!r}, readings={list(self._readings)!r})"

    def take(self, t: float, step: float | None, printed_step_time_s: float | None) -> None:
        """One record: its time, step and the step time the trainer printed on it (None: none)."""
        if not isinstance(t, (int, float)) or not math.isfinite(t):  # a damaged record
            return
        if (
            isinstance(printed_step_time_s, (int, float))
            and math.isfinite(printed_step_time_s)
            and printed_step_time_s > 0
        ):
            self._add(t, printed_step_time_s, weight=printed_step_time_s, steps=1.0)
            return
        if not isinstance(step, (int, float)) or not math.isfinite(step):
            return
        group = self._group
        if group is not None and step == group[1] and t >= group[0]:
            return  # no step made: nothing to measure
        if group is not None and t == group[0] and step > group[1]:
            self._group = (t, step)  # another line of the same batch
            return
        if group is not None and t > group[0] and step > group[1]:
            self._batch_ended(group)
        else:
            self._ends.clear()  # the step went back (a restart) or the clock did: start afresh
        self._group = (t, step)

    def _batch_ended(self, end: tuple[float, float]) -> None:
        """A batch is complete: a reading of the stretch since the last reading's end, its time over
        the steps made in it, weighted by its time, once it holds one step alone or has lasted a
        second. Batches of a few lines 0.25 s apart alone would give steps of 0.25 s / 1, 2 or 3;
        stretches that overlap would spread one slow step over the readings after it."""
        ends = self._ends
        if not ends:
            ends.append(end)
            return
        start = ends[0]
        if end[1] > start[1] and end[0] - start[0] >= DERIVED_SPAN_S:
            took, steps = end[0] - start[0], end[1] - start[1]
            self._add(end[0], took / steps, weight=took, steps=steps)
            ends[0] = end

    def _add(self, t: float, step_time_s: float, *, weight: float, steps: float) -> None:
        readings = self._readings
        readings.append((t, step_time_s, weight, steps))
        self._steps += steps
        while len(readings) > MAX_READINGS or (
            self._steps - readings[0][3] >= MIN_STEPS and readings[0][0] < readings[-1][0] - WINDOW_S
        ):
            self._steps -= readings.popleft()[3]

    def median(self) -> float | None:
        """The time-weighted median step time over the window ending at the newest reading; None
        with fewer than :data:`MIN_STEPS` steps or :data:`MIN_READINGS` readings. Each reading stands at the middle of its
        weight, and the median is interpolated between the two readings around half the total:
        readings derived from batches of a few lines take a few values only (0.5 s / 2, 3 or 4
        steps), and a median that jumped between them would make one worker 1.5x another's."""
        if self._steps < MIN_STEPS or len(self._readings) < MIN_READINGS:
            return None
        ordered = sorted((value, weight) for _t, value, weight, _steps in self._readings)
        half = sum(w for _v, w in ordered) / 2
        below = 0.0
        prev: tuple[float, float] | None = None  # the previous reading's value and middle
        for value, weight in ordered:
            middle = below + weight / 2
            if middle >= half:
                if prev is None or middle == prev[1]:
                    return value
                share = (half - prev[1]) / (middle - prev[1])
                return prev[0] + share * (value - prev[0])
            prev = (value, middle)
            below += weight
        return ordered[-1][0]


@dataclass(frozen=True)
class StragglerChange:
    """A flag raised (``straggler``) or cleared: the worker's windowed median step time, its peers'
    (the median of theirs), their ratio, and how long the condition held."""

    role: str
    straggler: bool
    step_time_s: float | None
    peers_step_time_s: float | None
    ratio: float | None
    held_s: float

    def text(self) -> str:
        """``median step 200 ms over the last 30 s, 2.0x its peers' 100 ms, for 8 s``."""
        if self.step_time_s is None or self.peers_step_time_s is None or self.ratio is None:
            return "no longer judged (not training)"
        return (
            f"median step {self.step_time_s * 1000:.0f} ms over the last {WINDOW_S:.0f} s, "
            f"{self.ratio:.1f}x its peers' {self.peers_step_time_s * 1000:.0f} ms, for {self.held_s:.0f} s"
        )


class StragglerJudge:
    """Raises and clears straggler flags with a hold time and hysteresis; see the module docstring."""

    def __init__(
        self, *, flag_ratio: float = FLAG_RATIO, clear_ratio: float = CLEAR_RATIO, hold_s: float = HOLD_S
    ) -> None:
        if not 1.0 <= clear_ratio <= flag_ratio:
            raise ValueError("the clearing ratio must be within [1, flag_ratio]")
        self.flag_ratio = flag_ratio
        self.clear_ratio = clear_ratio
        self.hold_s = hold_s
        self.flagged: set[str] = set()
        self._since: dict[str, float] = {}  # worker -> since when its flag's opposite condition holds

    def judge(self, now: float, medians: Mapping[str, float | None]) -> list[StragglerChange]:
        """Judge the workers' windowed medians at ``now``; the flags raised and cleared. A flagged
        worker missing from ``medians`` (stopped, stalled, no window yet) is cleared at once."""
        usable = {w: v for w, v in medians.items() if v is not None and math.isfinite(v) and v > 0}
        changes = [StragglerChange(w, False, None, None, None, 0.0) for w in sorted(self.flagged) if w not in usable]
        for change in changes:
            self.flagged.discard(change.role)
            self._since.pop(change.role, None)
        for worker in [w for w in self._since if w not in usable]:
            del self._since[worker]
        if len(usable) < 2:
            return changes
        ordered = sorted(usable.values())
        for worker in sorted(usable):
            value = usable[worker]
            peers = median_without(ordered, bisect.bisect_left(ordered, value))
            ratio = value / peers
            flagged = worker in self.flagged
            turning = ratio < self.clear_ratio if flagged else ratio >= self.flag_ratio
            if not turning:
                self._since.pop(worker, None)
                continue
            since = self._since.setdefault(worker, now)
            if now - since >= self.hold_s:
                del self._since[worker]
                if flagged:
                    self.flagged.discard(worker)
                else:
                    self.flagged.add(worker)
                changes.append(StragglerChange(worker, not flagged, value, peers, ratio, now - since))
        return changes


def median_without(ordered: Sequence[float], index: int) -> float:
    """The median of the sorted ``ordered`` without its item at ``index`` (at least two items):
    what ``statistics.median`` of the others gives, read off the one sorted list. A median of the
    other workers for each worker, sorted afresh each time, was O(N² log N) a judgement: 65,000
    values sorted every 0.5 s at 256 workers, a million at 1,024."""
    count = len(ordered) - 1

    def at(j: int) -> float:
        return ordered[j] if j < index else ordered[j + 1]

    middle = count // 2
    if count % 2 == 1:
        return at(middle)
    return (at(middle - 1) + at(middle)) / 2
