"""Ordering and narrowing the runs list: what ``runs --sort/--outcome/--filter`` and
the window's Runs page apply to :class:`core.run.index.RunSummary` values. ``speed`` is the run's
global steps/s (:mod:`core.views.rates`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from core.run.index import OUTCOMES, RunSummary
from core.views.rates import summary_rates

SORT_KEYS = ("start", "name", "duration", "outcome", "loss", "best", "speed", "restarts", "roles")


def sort_key(key: str) -> Any:
    """A sort key for :data:`SORT_KEYS`; missing figures sort last."""
    inf = float("inf")

    def number(value: float | None) -> float:
        return inf if value is None else value

    keys: dict[str, Any] = {
        "start": lambda s: s.created,
        "name": lambda s: (s.name.lower(), s.created),
        "duration": lambda s: number(s.duration_s),
        "outcome": lambda s: (OUTCOMES.index(s.outcome), s.created),
        "loss": lambda s: number(s.last_loss),
        "best": lambda s: number(s.best_loss),
        "speed": lambda s: -inf if (rate := summary_rates(s).global_steps_per_s) is None else rate,
        "restarts": lambda s: s.restarts,
        "roles": lambda s: len(s.roles),
    }
    return keys[key]


def select(
    summaries: Iterable[RunSummary],
    *,
    text: str = "",
    outcomes: Iterable[str] = (),
    sort: str = "start",
    reverse: bool = False,
) -> list[RunSummary]:
    """The runs matching every word of ``text`` and one of ``outcomes`` (all when empty), sorted
    (``start`` newest first unless ``reverse``)."""
    words = text.lower().split()
    wanted = set(outcomes)
    chosen = [s for s in summaries if (not wanted or s.outcome in wanted) and all(w in s.search_text() for w in words)]
    descending = sort in ("start", "speed")
    return sorted(chosen, key=sort_key(sort), reverse=descending != reverse)
