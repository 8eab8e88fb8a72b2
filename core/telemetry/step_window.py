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

__all__ = ["BUCKET_S", "RATE_WINDOW_S", "StepSums", "StepWindow", "window_key"]

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


def window_key(end: float) -> int:
    """The bucket a window ending at ``end`` ends in: :meth:`StepWindow.sums` depends on ``end``
    through this alone, so a caller may keep sums (or a status holding them) while it is unchanged."""
    return math.floor(end / BUCKET_S) if math.isfinite(end) else 0


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
        # The sums of the window's buckets before the newest one (from the window's first bucket
        # when it ends in the newest bucket; from the one after, when it ends a second past it),
        # summed when first asked after a bucket started (or after a late record changed one of
        # them) and kept: :meth:`sums` adds the newest bucket to them, without a pass over the
        # buckets while the role trains (at 256 simulated workers that pass was half of the status
        # rebuild's cost). Summed when asked, not as each bucket starts: a reopened run's records
        # (a bucket each) paid that pass per record, unasked. Older buckets first, then the newest,
        # in key order: the very sum :meth:`sums`'s general path makes, so the figures do not
        # depend on when they were asked (every reader of the same records gives the same floats).
        self._base: _Bucket | None = _Bucket()
        self._base_from = 0  # the oldest bucket in the base
        self._base_next: _Bucket | None = _Bucket()
        self._base_next_from = 1

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
        if key != next(reversed(self._buckets)):
            self._base = self._base_next = None  # a late record changed an older bucket
        if (
            isinstance(printed_step_time_s, (int, float))
            and math.isfinite(printed_step_time_s)
            and printed_step_time_s > 0
        ):
            bucket.timed += 1
            bucket.timed_s += printed_step_time_s
        if not isinstance(step, (int, float)) or not math.isfinite(step):
            return
        prev = self._prev
        if prev is not None and step > prev[0] and t >= prev[1]:
            bucket.steps += step - prev[0]
            bucket.steps_s += t - prev[1]
        self._prev = (step, t)

    def _prune(self, newest: int) -> None:
        """A bucket started (``newest``): the buckets past the window dropped; the bases are summed
        afresh when next asked (:meth:`_summed`)."""
        oldest = newest - math.ceil(self.window_s / BUCKET_S)
        while self._buckets and next(iter(self._buckets)) < oldest:
            self._buckets.popitem(last=False)
        self._base = self._base_next = None
        self._base_from = oldest + 1
        self._base_next_from = oldest + 2

    def _summed(self, *, following: bool) -> StepSums:
        """The sums of the window that ends in the newest bucket (or a second past it, with
        ``following``): the kept base of the older buckets, then the newest bucket."""
        base = self._base_next if following else self._base
        newest_key = next(reversed(self._buckets))
        if base is None:
            base = _Bucket()
            first = self._base_next_from if following else self._base_from
            for key, b in self._buckets.items():
                if first <= key < newest_key:
                    base.steps += b.steps
                    base.steps_s += b.steps_s
                    base.timed += b.timed
                    base.timed_s += b.timed_s
            if following:
                self._base_next = base
            else:
                self._base = base
        newest = self._buckets[newest_key]
        return StepSums(
            base.steps + newest.steps,
            base.steps_s + newest.steps_s,
            base.timed + newest.timed,
            base.timed_s + newest.timed_s,
            self.last_t,
        )

    def sums(self, end: float) -> StepSums:
        """The window of :data:`RATE_WINDOW_S` seconds that ends at ``end`` (the cluster's newest
        record, at or after this role's): its buckets, the one holding ``end`` the last."""
        last = window_key(end)
        first = last - math.ceil(self.window_s / BUCKET_S) + 1
        buckets = self._buckets
        if buckets:
            newest = next(reversed(buckets))
            if newest == last or newest == last - 1:  # the window ends in the newest bucket, or just past it
                return self._summed(following=newest != last)
        steps = steps_s = timed_s = 0.0
        timed = 0
        for key, b in self._buckets.items():
            if first <= key <= last:
                steps += b.steps
                steps_s += b.steps_s
                timed += b.timed
                timed_s += b.timed_s
        return StepSums(steps, steps_s, timed, timed_s, self.last_t)
