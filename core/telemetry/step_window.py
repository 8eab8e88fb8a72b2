"""What one role did over the last :data:`RATE_WINDOW_S` seconds of its training records, kept in
constant memory: the raw material of the run's step rates (:func:`core.views.rates.step_rates` turns
it into the figures every view shows).

A :class:`StepWindow` folds each record into a one-second bucket: the forward step advance and the
seconds it took (a step that goes back, a restarted worker, starts afresh and adds nothing), and
the step times the trainer printed (their count and sum). :meth:`StepWindow.sums` adds up the
window's buckets, the window ending at the cluster's newest record. The buckets are a pure function of the records in order, so the
controller live, a reopened run, the runs list's summary and the compare view, each fed the same
``metrics.jsonl`` records, hold the same sums.
"""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass
from typing import Any

__all__ = ["BUCKET_S", "RATE_WINDOW_S", "StepSums", "StepWindow"]

RATE_WINDOW_S = 30.0
"""Every rate TowerDeck shows is a mean over the last this many seconds of training."""
BUCKET_S = 1.0


@dataclass(frozen=True)
class StepSums:
    """One role's training over a window: ``steps`` advanced (forward only) over ``steps_s``
    seconds, and ``timed`` step times printed by the trainer summing to ``timed_s`` seconds;
    ``last_t``: its newest record's time (None: it has none)."""

    steps: float = 0.0
    steps_s: float = 0.0
    timed: int = 0
    timed_s: float = 0.0
    last_t: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "steps": self.steps,
            "steps_s": self.steps_s,
            "timed": self.timed,
            "timed_s": self.timed_s,
            "last_t": self.last_t,
        }

    @classmethod
    def from_json(cls, data: object) -> StepSums | None:
        """The inverse of :meth:`to_json`; None for anything that is not one (a damaged file)."""
        if not isinstance(data, dict):
            return None
        numbers = [data.get(k) for k in ("steps", "steps_s", "timed", "timed_s")]
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in numbers):
            return None
        last_t = data.get("last_t")
        return cls(
            steps=float(data["steps"]),
            steps_s=float(data["steps_s"]),
            timed=int(data["timed"]),
            timed_s=float(data["timed_s"]),
            last_t=float(last_t) if isinstance(last_t, (int, float)) and not isinstance(last_t, bool) else None,
        )


class _Bucket:
    __slots__ = ("steps", "steps_s", "timed", "timed_s")

    def __init__(self) -> None:
        self.steps = 0.0
        self.steps_s = 0.0
        self.timed = 0
        self.timed_s = 0.0


class StepWindow:
    """The last :data:`RATE_WINDOW_S` of one role's records, by one-second buckets."""

    def __init__(self, window_s: float = RATE_WINDOW_S) -> None:
        self.window_s = window_s
        self._buckets: collections.OrderedDict[int, _Bucket] = collections.OrderedDict()
        self._prev: tuple[float, float] | None = None  # the last (step, t) with a step
        self.last_t: float | None = None
        # The sums of the window that ends in the newest bucket, summed afresh when a bucket starts
        # and added to as records come: :meth:`sums` gives them without a pass over the buckets
        # when the window ends there (nearly always while the role trains: it ends in the cluster's
        # newest second). At 256 simulated workers that pass was half of the status rebuild's cost.
        # Both are None once a bucket starts, until :meth:`sums` asks for them: summed afresh then,
        # not as each bucket starts, since a reopened run's records (a bucket each) paid that pass
        # per record, unasked: ~40 % of the CPU spent opening a day-long 256-worker run.
        self._total: _Bucket | None = _Bucket()
        self._total_from = 0  # the oldest bucket in those sums
        # The same for the window that ends one second past the newest bucket: where the window
        # ends while this role's newest record is still in the second before the cluster's newest
        # (one role in a few at any moment, every role of a loaded run), which walked the buckets.
        self._next: _Bucket | None = _Bucket()
        self._next_from = 1

    def __repr__(self) -> str:
        buckets = {k: (b.steps, b.steps_s, b.timed, b.timed_s) for k, b in self._buckets.items()}
        return f"StepWindow(last_t={self.last_t!r}, prev={self._prev!r}, buckets={buckets!r})"

    def take(self, t: float, step: float | None, printed_step_time_s: float | None) -> None:
        """One record: its time, its step (None: a line without one) and the step time the trainer
        printed on it (None: it printed none; non-positive or non-finite values are not times)."""
        if not isinstance(t, (int, float)) or not math.isfinite(t):  # a damaged record
            return
        key = math.floor(t / BUCKET_S)
        bucket = self._buckets.get(key)
        if bucket is None:
            if self._buckets and key < next(reversed(self._buckets)):
                # A record older than the newest bucket (clocks of one output batch): into the newest.
                key = next(reversed(self._buckets))
                bucket = self._buckets[key]
            else:
                bucket = self._buckets[key] = _Bucket()
                self._prune(key)
        self.last_t = t if self.last_t is None else max(self.last_t, t)
        # A bucket before the window of the newest one (a record late by 30 s) is not in its sums.
        adds = [bucket]
        if key >= self._total_from and self._total is not None:
            adds.append(self._total)
        if key >= self._next_from and self._next is not None:
            adds.append(self._next)
        if (
            isinstance(printed_step_time_s, (int, float))
            and math.isfinite(printed_step_time_s)
            and printed_step_time_s > 0
        ):
            for into in adds:
                into.timed += 1
                into.timed_s += printed_step_time_s
        if not isinstance(step, (int, float)) or not math.isfinite(step):
            return
        prev = self._prev
        if prev is not None and step > prev[0] and t >= prev[1]:
            for into in adds:
                into.steps += step - prev[0]
                into.steps_s += t - prev[1]
        self._prev = (step, t)

    def _prune(self, newest: int) -> None:
        """A bucket started (``newest``): the buckets past the window dropped; the windows' sums are
        taken afresh when next asked (:meth:`_summed`)."""
        oldest = newest - math.ceil(self.window_s / BUCKET_S)
        while self._buckets and next(iter(self._buckets)) < oldest:
            self._buckets.popitem(last=False)
        self._total = self._next = None
        self._total_from = oldest + 1
        self._next_from = oldest + 2

    def _summed(self, *, following: bool) -> _Bucket:
        """The kept sums of the window that ends in the newest bucket (or a second past it, with
        ``following``), summed afresh once after a bucket started."""
        total = self._next if following else self._total
        if total is None:
            total = _Bucket()
            first = self._next_from if following else self._total_from
            for key, b in self._buckets.items():
                if key >= first:
                    total.steps += b.steps
                    total.steps_s += b.steps_s
                    total.timed += b.timed
                    total.timed_s += b.timed_s
            if following:
                self._next = total
            else:
                self._total = total
        return total

    def sums(self, end: float) -> StepSums:
        """The window of :data:`RATE_WINDOW_S` seconds that ends at ``end`` (the cluster's newest
        record, at or after this role's): its buckets, the one holding ``end`` the last."""
        last = math.floor(end / BUCKET_S) if math.isfinite(end) else 0
        first = last - math.ceil(self.window_s / BUCKET_S) + 1
        buckets = self._buckets
        if buckets:
            newest = next(reversed(buckets))
            if newest == last or newest == last - 1:  # the window ends in the newest bucket, or just past it
                total = self._summed(following=newest != last)
                return StepSums(total.steps, total.steps_s, total.timed, total.timed_s, self.last_t)
        steps = steps_s = timed_s = 0.0
        timed = 0
        for key, b in self._buckets.items():
            if first <= key <= last:
                steps += b.steps
                steps_s += b.steps_s
                timed += b.timed
                timed_s += b.timed_s
        return StepSums(steps, steps_s, timed, timed_s, self.last_t)
