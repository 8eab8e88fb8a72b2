"""Whose median the spread's key names: the workers read so far, out of the run's trainers."""

from __future__ import annotations

from core.views.training import TrainingFigures
from tests.helpers.statuses import role_status


def _steps(figures: TrainingFigures, role: str, *, loss_only: bool = False) -> None:
    records = [
        {"t": 100.0 + s, "step": s, "loss": 1.0, "step_time_s": None if loss_only else 0.5, "steps_per_sec": None}
        for s in range(1 if loss_only else 3)
    ]
    figures.add_samples(role, [{**r, "extra": {}, "source": "classic"} for r in records])


def test_the_key_says_how_many_trainers_have_no_figure_yet() -> None:
    figures = TrainingFigures()
    roles = ["ps:0", "evaluator:0", "chief:0", *(f"worker:{w}" for w in range(1023))]
    figures.apply_status(tuple(role_status(r) for r in roles))
    for w in range(699):
        _steps(figures, f"worker:{w}")
    _steps(figures, "worker:699", loss_only=True)  # a loss, no step time yet
    assert figures.spread_key(step_time=False) == "median of 700 of 1,024 workers (324 no loss yet)"
    assert figures.spread_key(step_time=True) == "median of 699 of 1,024 workers (325 no step time yet)"


def test_all_read_or_no_status_yet_counts_what_was_read() -> None:
    figures = TrainingFigures()
    _steps(figures, "worker:0")
    _steps(figures, "worker:1")
    assert figures.spread_key(step_time=True) == "median of 2 workers"  # no status yet: none known unread
    figures.apply_status(tuple(role_status(r) for r in ("ps:0", "worker:0", "worker:1")))
    assert figures.spread_key(step_time=False) == "median of 2 workers"
