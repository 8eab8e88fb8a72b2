"""The run's speed, defined once: :func:`step_rates` is the one function that turns what each role
did over the last 30 s (:class:`~core.telemetry.step_window.StepSums`) into the three figures every
view shows: the run header, the overview's tiles and legend, the roles table, the Training tab, the
Runs page and ``runs``, ``runs compare`` (text and CSV) and its plot, and the CLI's progress lines.

- **global steps/s**: how fast the cluster's training step advanced. Under between-graph and
  ParameterServerStrategy training the step a worker prints is the shared global step, which every
  worker's update advances, and under MultiWorkerMirroredStrategy every worker prints the same
  synchronous step: it is the forward steps the training roles saw advance over the seconds that
  took, pooled over the roles. Where each worker counts its own steps (``strategy = "custom"``), it
  is the sum of the workers' step rates.
- **batches/s** (per worker): the updates that worker made itself: one over the mean of the step
  times it printed; where it prints none, its own step count's rate (MultiWorkerMirroredStrategy,
  custom), never the shared global step's (between-graph, ParameterServerStrategy: unknown, ``-``).
- **examples/s**: batches times the batch size, where the command passes ``--batch_size``
  (:mod:`core.cluster.batch_size`): a worker's batches/s times its batch size; for the cluster,
  global steps/s times the batch size where a global step is one worker's batch (between-graph,
  ParameterServerStrategy), else the sum over workers.

Each is a mean over the window of :data:`RATE_WINDOW_S` seconds that ends at the run's newest
training record, and each is shown with its words and window (:func:`label`) and one format
(:func:`rate_text`), so one run shows one number per figure wherever it is read.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from core.cluster.batch_size import batch_sizes
from core.cluster.roles import expects_steps
from core.cluster.spec import ClusterSpec
from core.run.index import RunSummary
from core.run.status import RoleStatus
from core.telemetry.step_window import RATE_WINDOW_S, StepSums, StepWindow
from core.telemetry.worker_stats import printed_step_time

__all__ = [
    "BATCHES",
    "EXAMPLES",
    "GLOBAL",
    "RATE_WINDOW_S",
    "SHARED_STEP",
    "RateInput",
    "RatePoint",
    "StepRates",
    "cluster_text",
    "label",
    "rate_series",
    "rate_text",
    "role_text",
    "status_rates",
    "step_rates",
    "summary_rates",
    "window_end",
]

GLOBAL = "global steps/s"
BATCHES = "batches/s"
EXAMPLES = "examples/s"
SHARED_STEP = frozenset({"between_graph", "parameter_server"})
"""Strategies whose printed step is the cluster's global step, advanced by every worker's update."""
SYNC_STEP = frozenset({"multi_worker_mirrored"})
"""Strategies whose workers all print the same synchronous step, one batch each per step."""


@dataclass(frozen=True)
class RateInput:
    """One role as :func:`step_rates` reads it: its job, its window's sums, its batch size."""

    role: str
    job: str
    sums: StepSums | None
    batch_size: int | None = None


@dataclass(frozen=True)
class StepRates:
    """The figures of one run at one moment (see the module docstring); None where unknown."""

    window_s: float = RATE_WINDOW_S
    global_steps_per_s: float | None = None
    examples_per_s: float | None = None
    batches_per_s: Mapping[str, float | None] = field(default_factory=dict)  # each training role
    role_examples_per_s: Mapping[str, float | None] = field(default_factory=dict)
    batches_unknown: Mapping[str, str] = field(default_factory=dict)  # a training role without one: why

    def of(self, role: str) -> float | None:
        """``role``'s own batches/s (None for a role that is not training, or unknown)."""
        return self.batches_per_s.get(role)

    def batches_cell(self, role: str) -> tuple[str, str]:
        """A role's batches/s as a table cell, and the cell's tooltip: the figure, or ``-`` and
        why there is none. A blank cell read as broken where the strategy makes it unknowable."""
        own = self.batches_per_s.get(role)
        if own is not None:
            return rate_text(own), f"its own updates, mean over the last {self.window_s:g} s"
        if role in self.batches_unknown:
            return "-", self.batches_unknown[role]
        return "-", "not a training role: it makes no training steps"


def _trains(strategy: str, item: RateInput) -> bool:
    """A role whose steps count: one the strategy has print steps, or any other that does."""
    if item.job in ("ps", "evaluator"):
        return False
    has_steps = item.sums is not None and (item.sums.steps_s > 0 or item.sums.timed > 0)
    return expects_steps(strategy, item.job) or has_steps


def _ratio(a: float, b: float) -> float | None:
    return a / b if b > 0 and math.isfinite(a) and math.isfinite(b) else None


def step_rates(roles: Iterable[RateInput], *, strategy: str, window_s: float = RATE_WINDOW_S) -> StepRates:
    """The run's global steps/s, each training role's batches/s and examples/s, and the cluster's
    examples/s, from each role's sums over the same window. The one definition of each figure."""
    training = [r for r in roles if _trains(strategy, r)]
    shared = strategy in SHARED_STEP or strategy in SYNC_STEP
    batches: dict[str, float | None] = {}
    examples: dict[str, float | None] = {}
    unknown: dict[str, str] = {}
    own_step_rates: list[float] = []
    steps = steps_s = 0.0
    for r in training:
        sums = r.sums or StepSums()
        step_rate = _ratio(sums.steps, sums.steps_s)
        if step_rate is not None:
            own_step_rates.append(step_rate)
            steps += sums.steps
            steps_s += sums.steps_s
        if sums.timed > 0:
            own = _ratio(sums.timed, sums.timed_s)
        elif strategy not in SHARED_STEP:
            own = step_rate  # its step is its own (custom) or one batch of its own per step (mirrored)
        else:
            own = None  # the step it prints is every worker's: its own share is not in it
        batches[r.role] = own
        if own is None:
            unknown[r.role] = _why_no_batches(strategy, window_s, stepped=step_rate is not None)
        examples[r.role] = own * r.batch_size if own is not None and r.batch_size else None
    # A shared step: how fast the roles saw it advance, pooled; a step of each worker's own: the sum.
    global_rate = _ratio(steps, steps_s) if shared else (sum(own_step_rates) if own_step_rates else None)
    sizes = {r.batch_size for r in training if r.sums is not None and (r.sums.steps_s > 0 or r.sums.timed > 0)}
    cluster_examples: float | None = None
    if strategy in SHARED_STEP:
        if global_rate is not None and len(sizes) == 1 and (size := next(iter(sizes))):
            cluster_examples = global_rate * size
    else:
        counted = [examples[r.role] for r in training if batches[r.role] is not None]
        if counted and all(v is not None for v in counted):
            cluster_examples = sum(v for v in counted if v is not None)
    return StepRates(window_s, global_rate, cluster_examples, batches, examples, unknown)


def _why_no_batches(strategy: str, window_s: float, *, stepped: bool) -> str:
    """Why a training role has no batches/s of its own, in a tooltip's words."""
    if not stepped:
        return f"no steps in the last {window_s:g} s"
    kind = "ParameterServerStrategy" if strategy == "parameter_server" else "between-graph"
    return (
        f"{kind}: the step it prints is the cluster's global step, which every worker's update advances, "
        "so its own updates cannot be told from it (they can where the trainer prints its step time); "
        "the run's global steps/s is above the table"
    )


# ---------------------------------------------------------------------------------- words


def rate_text(value: float | None) -> str:
    """The one format of a rate: ``102``, ``34.1``, ``2.35``; ``-`` when unknown."""
    if value is None or not math.isfinite(value):
        return "-"
    if value >= 99.95:  # what .1f would round up to 100.0
        return f"{value:.0f}"
    if value >= 9.995:  # what .2f would round up to 10.00
        return f"{value:.1f}"
    return f"{value:.2f}"


def label(figure: str, window_s: float = RATE_WINDOW_S) -> str:
    """A figure's name with its window: ``global steps/s (30 s)``."""
    return f"{figure} ({window_s:g} s)"


def cluster_text(rates: StepRates) -> str:
    """``102 global steps/s · 3410 examples/s (mean over the last 30 s)``; '' before any step."""
    if rates.global_steps_per_s is None:
        return ""
    parts = [f"{rate_text(rates.global_steps_per_s)} {GLOBAL}"]
    if rates.examples_per_s is not None:
        parts.append(f"{rate_text(rates.examples_per_s)} {EXAMPLES}")
    return " · ".join(parts) + f" (mean over the last {rates.window_s:g} s)"


def role_text(rates: StepRates, role: str) -> str:
    """``34.1 batches/s · 3410 examples/s (its own updates, mean over the last 30 s)``; '' when unknown."""
    own = rates.of(role)
    if own is None:
        return ""
    parts = [f"{rate_text(own)} {BATCHES}"]
    examples = rates.role_examples_per_s.get(role)
    if examples is not None:
        parts.append(f"{rate_text(examples)} {EXAMPLES}")
    return " · ".join(parts) + f" (its own updates, mean over the last {rates.window_s:g} s)"


# ---------------------------------------------------------------------------------- sources


def window_end(windows: Iterable[StepWindow | StepSums | None]) -> float | None:
    """Where the window of a set of roles ends: at their newest record."""
    ends = [w.last_t for w in windows if w is not None and w.last_t is not None]
    return max(ends) if ends else None


def status_rates(roles: Iterable[RoleStatus], spec: ClusterSpec | None) -> StepRates:
    """The figures of a run's live (or read back) status; ``spec`` gives the strategy and the
    batch sizes (None: between-graph, none known)."""
    sizes = batch_sizes(spec) if spec is not None else {}
    strategy = spec.strategy if spec is not None else "between_graph"
    return step_rates(
        (RateInput(r.role, r.job, r.window, sizes.get(r.role)) for r in roles),
        strategy=strategy,
    )


def summary_rates(summary: RunSummary) -> StepRates:
    """The figures of a run as the runs list keeps them (its summary's windows)."""
    return step_rates(
        (RateInput(role, role.split(":")[0], f.window, f.batch_size) for role, f in summary.role_figures.items()),
        strategy=summary.strategy,
    )


@dataclass(frozen=True)
class RatePoint:
    """The run's figures at ``t`` (the newest record then), and its highest step by then."""

    t: float
    step: float | None
    rates: StepRates


def rate_series(
    records: Mapping[str, Iterable[Mapping[str, Any]]],
    *,
    strategy: str,
    batch_size: Mapping[str, int | None],
    points: int = 256,
) -> list[RatePoint]:
    """The figures over a run's life, for a plot: each role's training records (``metrics.jsonl``
    lines, in its order) merged by time and windowed as the live run was, the figures taken at up
    to ``points`` times evenly spread over the run, and at its end (the runs list's figures)."""
    streams = [_timed(role, rs) for role, rs in records.items()]
    merged = list(heapq.merge(*streams, key=lambda item: item[0]))
    if not merged:
        return []
    first, last = merged[0][0], merged[-1][0]
    step_every = max((last - first) / max(points, 1), 1e-9)
    windows = {role: StepWindow() for role in records}
    jobs = {role: role.split(":")[0] for role in records}
    highest: float | None = None
    out: list[RatePoint] = []
    next_at = first + step_every

    def take_point() -> None:
        end = window_end(windows.values())
        if end is None:
            return
        rates = step_rates(
            (RateInput(r, jobs[r], w.sums(end), batch_size.get(r)) for r, w in windows.items()), strategy=strategy
        )
        out.append(RatePoint(end, highest, rates))

    for at, _order, role, record in merged:
        if at > next_at:
            take_point()
            next_at = at + step_every
        step = record.get("step")
        # The record's own time, as the live window took it (the merge's key only orders).
        windows[role].take(record["t"], step, printed_step_time(record.get("step_time_s"), record.get("steps_per_sec")))
        if isinstance(step, (int, float)) and math.isfinite(step):
            highest = step if highest is None else max(highest, step)
    take_point()
    return out


def _timed(role: str, records: Iterable[Mapping[str, Any]]) -> Iterator[tuple[float, int, str, Mapping[str, Any]]]:
    """A role's records with a usable time, as (t, order, role, record): heapq.merge keeps each
    role's own order among equal times. A time that goes back (one output batch's clocks) is
    merged as its predecessor's, so the role's records reach its window in file order."""
    order = itertools.count()
    newest = -math.inf
    for record in records:
        t = record.get("t")
        if isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t):
            newest = max(newest, float(t))
            yield newest, next(order), role, record
