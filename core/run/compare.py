"""Runs side by side: the runs to compare (:func:`load_for_compare`), and each run's curves for
the overlay. The side-by-side table ``runs compare`` prints and the window's compare view shows is
:mod:`core.views.compare_table`.

:func:`read_curves` streams each role's ``metrics.jsonl`` (else its TensorBoard loss scalars) into
arrays, thinned to a bounded number of points, and :func:`read_scalars` every TensorBoard scalar tag
the roles wrote.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from core.cluster.render import role_dir
from core.run import journal
from core.run.index import RunSummary, summarize, training_records

MIN_RUNS, MAX_RUNS = 2, 8
MAX_CURVE_POINTS = 4096
RATE_WINDOW_S = 1.0  # derived step times: measured over at least this much wall time  # per role and series: more than a plot's width, far less than a day's steps


def load_for_compare(paths: Sequence[Path]) -> list[RunSummary]:
    """The summaries of ``paths``; raises ValueError naming a run that cannot be read, or a count
    outside 2-8."""
    if not MIN_RUNS <= len(paths) <= MAX_RUNS:
        raise ValueError(f"compare takes {MIN_RUNS} to {MAX_RUNS} runs, not {len(paths)}")
    summaries = []
    for path in paths:
        summary = summarize(path)
        if summary is None:
            raise ValueError(f"{path} has no readable run.json")
        summaries.append(summary)
    return summaries


FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Curves:
    """One role's series, aligned: ``step``, wall time ``t``, ``loss``, ``step_time_s`` (NaN
    where a record lacks it; derived from step and time deltas when the trainer does not print it)."""

    step: FloatArray
    t: FloatArray
    loss: FloatArray
    step_time_s: FloatArray


@dataclass(frozen=True)
class Scalar:
    """One role's series of one TensorBoard tag."""

    step: FloatArray
    wall_time: FloatArray
    value: FloatArray


def _thin(columns: list[FloatArray], limit: int) -> list[FloatArray]:
    arrays = [np.asarray(c, dtype=np.float64) for c in columns]
    n = len(arrays[0])
    if n > limit:
        keep = np.unique(np.linspace(0, n - 1, limit).astype(np.int64))
        arrays = [a[keep] for a in arrays]
    return arrays


def _fill_step_times(step: FloatArray, t: FloatArray, given: FloatArray) -> FloatArray:
    """Where the trainer printed no step time: derived from wall time over steps. Lines of one
    output batch share a wall time and batches can land milliseconds apart, so each batch's
    value is measured back to the last batch at least :data:`RATE_WINDOW_S` earlier (a tenth of the run's, if shorter)."""
    if not np.isnan(given).any() or len(t) < 2:
        return given
    ends = np.flatnonzero(np.append(np.diff(t) != 0, True))  # the last line of each batch
    t_end, step_end = t[ends], step[ends]
    window_s = min(RATE_WINDOW_S, float(t_end[-1] - t_end[0]) / 10)  # a short run: a tenth of it
    back = np.searchsorted(t_end, t_end - window_s, side="right") - 1
    valid = back >= 0
    advanced = np.where(valid, step_end - step_end[np.maximum(back, 0)], 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        per_batch = np.where(valid & (advanced > 0), (t_end - t_end[np.maximum(back, 0)]) / advanced, np.nan)
    batch_of_line = np.searchsorted(ends, np.arange(len(t)))  # each line's batch
    return np.where(np.isnan(given), per_batch[batch_of_line], given)


def _columns(records: Iterable[dict[str, Any]]) -> tuple[list[float], list[float], list[float], list[float]]:
    steps: list[float] = []
    times: list[float] = []
    losses: list[float] = []
    step_times: list[float] = []
    for r in records:
        step, t = r.get("step"), r.get("t")
        if not isinstance(step, (int, float)) or not isinstance(t, (int, float)):
            continue
        loss, given = r.get("loss"), r.get("step_time_s")
        steps.append(float(step))
        times.append(float(t))
        losses.append(float(loss) if isinstance(loss, (int, float)) else math.nan)
        step_times.append(float(given) if isinstance(given, (int, float)) else math.nan)
    return steps, times, losses, step_times


def read_curves(path: Path, roles: Sequence[str], limit: int = MAX_CURVE_POINTS) -> dict[str, Curves]:
    """Each role's training records as arrays (its metrics, else its TensorBoard loss scalars;
    roles with neither are left out), at most ``limit`` points each."""
    curves: dict[str, Curves] = {}
    for role in roles:
        role_path = role_dir(path, role)
        steps, times, losses, step_times = _columns(training_records(role_path, from_scalars=False))
        if not steps:
            steps, times, losses, step_times = _columns(training_records(role_path, from_scalars=True))
        if steps:
            step_a, t_a = np.asarray(steps), np.asarray(times)
            filled = _fill_step_times(step_a, t_a, np.asarray(step_times))
            s, t_, loss_, st = _thin([step_a, t_a, np.asarray(losses), filled], limit)
            curves[role] = Curves(s, t_, loss_, st)
    return curves


def rate_records(path: Path, roles: Sequence[str]) -> Mapping[str, Iterator[dict[str, Any]]]:
    """Each role's training records, streamed, as the runs list's summary reads them (its metrics,
    else its TensorBoard loss scalars): what :func:`core.views.rates.rate_series` windows."""
    streams: dict[str, Iterator[dict[str, Any]]] = {}
    for role in roles:
        role_path = role_dir(path, role)
        has_steps = any(r.get("step") is not None for r in training_records(role_path, from_scalars=False))
        streams[role] = training_records(role_path, from_scalars=not has_steps)
    return streams


def read_scalars(path: Path, roles: Sequence[str], limit: int = MAX_CURVE_POINTS) -> dict[str, dict[str, Scalar]]:
    """Every TensorBoard scalar the roles wrote: per tag, per role, (step, wall time, value)
    arrays, at most ``limit`` points each."""
    found: dict[str, dict[str, tuple[list[float], list[float], list[float]]]] = {}
    for role in roles:
        tail = journal.JsonlTail(role_dir(path, role) / "scalars.jsonl")
        while records := tail.read():
            for r in records:
                tag, step, wall, value = r.get("tag"), r.get("step"), r.get("wall_time"), r.get("value")
                if not (
                    isinstance(tag, str)
                    and isinstance(step, (int, float))
                    and isinstance(wall, (int, float))
                    and isinstance(value, (int, float))
                ):
                    continue
                steps, walls, values = found.setdefault(tag, {}).setdefault(role, ([], [], []))
                steps.append(float(step))
                walls.append(float(wall))
                values.append(float(value))
    return {
        tag: {role: Scalar(*_thin([np.asarray(c) for c in cols], limit)) for role, cols in per_role.items()}
        for tag, per_role in found.items()
    }


def duplicates_loss(curves: Mapping[str, Curves], per_role: Mapping[str, Scalar]) -> bool:
    """Whether one TensorBoard tag's series (``per_role``) hold what the loss plot already draws
    from ``curves``: the same roles, steps and values (to float32's precision, as TensorBoard keeps
    them). A trainer that reports only through TensorBoard has its loss plot made of that tag."""
    if not per_role or set(per_role) != set(curves):
        return False
    for role, scalar in per_role.items():
        curve = curves[role]
        finite = np.isfinite(curve.loss)
        if not np.array_equal(curve.step[finite], scalar.step):
            return False
        if not np.allclose(curve.loss[finite], scalar.value, rtol=1e-5, atol=1e-7):
            return False
    return True
