"""The runs list as both the CLI (``python main.py runs``) and the window's Runs page show it: the
columns and one run's cells. The speed column is the run's global steps/s over its last 30 s of
training (:mod:`core.views.rates`). After the fixed columns come the listed runs' hyperparameters
(:mod:`core.cluster.hyperparams`), a column each, in the order they are first met."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from core.run import index as runs_index
from core.run.index import duration_text
from core.run.rundir import started_text
from core.views.rates import rate_text, summary_rates


def _figure(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


COLUMNS = (
    ("RUN", 34),
    ("CLUSTER FILE", 18),
    ("STARTED", 16),
    ("TOOK", 7),
    ("OUTCOME", 26),
    ("ROLES", 16),
    ("BACKEND", 16),
    ("LOSS", 8),
    ("BEST", 8),
    ("GLOBAL STEPS/S (30 s)", 21),
    ("RST", 3),
)


def row_cells(s: runs_index.RunSummary) -> list[str]:
    """The list's cells of one run, in :data:`COLUMNS` order (the window shows the same)."""
    return [
        s.id,
        Path(s.cluster_file).name if s.cluster_file else "-",
        started_text(s.created)[:16],
        duration_text(s.duration_s),
        s.outcome_text(),
        s.shape(),
        s.backend,
        _figure(s.last_loss),
        _figure(s.best_loss),
        rate_text(summary_rates(s).global_steps_per_s),
        str(s.restarts),
    ]


MISSING = "-"  # a hyperparameter a run's command does not pass


def hyperparam_keys(summaries: Sequence[runs_index.RunSummary]) -> list[str]:
    """Every hyperparameter label of ``summaries``, in the order first met (a command's order)."""
    keys: dict[str, None] = {}
    for s in summaries:
        keys.update(dict.fromkeys(s.hyperparams))
    return list(keys)


def hyperparam_cells(s: runs_index.RunSummary, keys: Sequence[str]) -> list[str]:
    """One run's values of ``keys``, :data:`MISSING` where its command does not pass one."""
    return [s.hyperparams.get(k, MISSING) for k in keys]


def hyperparam_sort_key(value: str) -> tuple[int, float, str]:
    """Numbers by value first, then text, then the runs without it."""
    if value == MISSING:
        return (2, 0.0, "")
    try:
        return (0, float(value), "")
    except ValueError:
        return (1, 0.0, value)
