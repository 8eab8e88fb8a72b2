"""Runs side by side: the table ``runs compare`` prints and the window's compare view
shows, and each run's curves for the overlay.

:func:`compare_rows` reads each run's summary (:mod:`core.run.index`) and its ``cluster.toml``:
cluster shape, command, env, launch style, strategy, TensorFlow version (when a role's log says it),
the host each role was given, durations, final/best loss, throughput, restarts, exit codes. A row
whose values are not all equal is marked ``differs``. :func:`read_curves` streams each role's
``metrics.jsonl`` (else its TensorBoard loss scalars) into arrays, thinned to a bounded number of
points, and :func:`read_scalars` every TensorBoard scalar tag the roles wrote.
"""

from __future__ import annotations

import contextlib
import csv
import math
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import numpy.typing as npt

from core.cluster.render import role_dir
from core.cluster.spec import ClusterSpec
from core.run import journal
from core.run.index import RunSummary, duration_text, summarize, training_records
from core.run.rundir import read_run_spec, started_text
from core.textsafe import csv_row, terminal

MIN_RUNS, MAX_RUNS = 2, 8
MAX_CURVE_POINTS = 4096
RATE_WINDOW_S = 1.0  # derived step times: measured over at least this much wall time  # per role and series: more than a plot's width, far less than a day's steps
_TF_VERSION = re.compile(rb"\bTensorFlow(?: version)?[ :=]+v?(\d+\.\d+(?:\.\d+)?)", re.IGNORECASE)
_LOG_HEAD_BYTES = 64 * 1024


@dataclass(frozen=True)
class CompareRow:
    """One line of the side-by-side table: its label and one value per run."""

    label: str
    values: tuple[str, ...]

    @property
    def differs(self) -> bool:
        return len(set(self.values)) > 1


def _number(value: float | None, digits: int = 4) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:.{digits}g}"


def _tf_version(path: Path, roles: Sequence[str]) -> str:
    """The TensorFlow version a role printed in the head of its first log, if any did."""
    seen: set[str] = set()
    for role in roles:
        with contextlib.suppress(OSError), open(role_dir(path, role) / "attempt-1.log", "rb") as f:
            match = _TF_VERSION.search(f.read(_LOG_HEAD_BYTES))
            if match:
                seen.add(match.group(1).decode())
    return ", ".join(sorted(seen)) if seen else "not recorded"


def _spec(path: Path) -> ClusterSpec | None:
    with contextlib.suppress(Exception):
        spec, _ = read_run_spec(path)
        return spec
    return None


def _role_hosts(spec: ClusterSpec | None) -> dict[str, str]:
    if spec is None:
        return {}
    with contextlib.suppress(Exception):  # counted jobs never placed have no hosts
        return {t.role_id: f"{t.host}:{t.port}" for t in spec.tasks()}
    return {}


def compare_rows(summaries: Sequence[RunSummary]) -> list[CompareRow]:
    """The side-by-side table of ``summaries`` (one column each, in order)."""
    specs = [_spec(s.path) for s in summaries]
    hosts = [_role_hosts(spec) for spec in specs]

    def row(label: str, values: Sequence[str]) -> CompareRow:
        return CompareRow(label, tuple(values))

    def from_spec(get: str) -> list[str]:
        out = []
        for spec in specs:
            if spec is None:
                out.append("?")
            elif get == "command":
                out.append(" ".join(spec.command))
            elif get == "env":
                out.append(" ".join(f"{k}={v}" for k, v in sorted(spec.env.items())) or "-")
            else:
                out.append(str(getattr(spec, get)))
        return out

    rows = [
        row("run", [s.id for s in summaries]),
        row("name", [s.name for s in summaries]),
        row("cluster file", [s.cluster_file or "-" for s in summaries]),
        row("started", [started_text(s.created) for s in summaries]),
        row("duration", [duration_text(s.duration_s) for s in summaries]),
        row("outcome", [s.outcome_text() for s in summaries]),
        row("cluster shape", [s.shape() for s in summaries]),
        row("backend", [s.backend for s in summaries]),
        row("command", from_spec("command")),
        row("env", from_spec("env")),
        row("launch style", from_spec("launch_style")),
        row("strategy", from_spec("strategy")),
        row("TensorFlow", [_tf_version(s.path, s.roles) for s in summaries]),
        row("final loss", [_number(s.last_loss) for s in summaries]),
        row("best loss", [_number(s.best_loss) for s in summaries]),
        row("steps/s (mean)", [_number(s.steps_per_s, 3) for s in summaries]),
        row("restarts", [str(s.restarts) for s in summaries]),
    ]
    every_role: list[str] = []
    for s in summaries:
        every_role += [r for r in s.roles if r not in every_role]
    for role in every_role:
        figures = [s.role_figures.get(role) for s in summaries]
        rows.append(row(f"{role} host", [h.get(role, "-") for h in hosts]))
        rows.append(row(f"{role} exit", [f"{f.state} {f.exit}" if f else "-" for f in figures]))
        if any(f is not None and f.steps is not None for f in figures):
            rows.append(row(f"{role} final loss", [_number(f.last_loss) if f else "-" for f in figures]))
            rows.append(row(f"{role} steps/s", [_number(f.steps_per_s, 3) if f else "-" for f in figures]))
    return rows


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


def print_table(rows: Sequence[CompareRow], out: TextIO, width: int = 30) -> None:
    """The table for a terminal: ``*`` marks a row whose values differ; long values are cut."""

    def cut(text: str, same: int) -> str:
        if len(text) <= width:
            return text
        if same > width // 2:  # the values differ far in: show where they do
            text = "…" + text[same - 8 :]
        return text if len(text) <= width else text[: width - 1] + "…"

    # Names, commands and env values are the users' (a cluster named "\x1b]0;TITLE\x07" would
    # retitle the terminal): shown escaped, and cut after escaping so the columns stay aligned.
    labels = [terminal(r.label) for r in rows]
    label_width = max(len(label) for label in labels)
    for r, label in zip(rows, labels, strict=True):
        mark = "*" if r.differs else " "
        values = [terminal(v) for v in r.values]
        same = len(os.path.commonprefix(values)) if r.differs else 0  # noqa: RUF071 - characters meant
        cells = "  ".join(f"{cut(v, same):<{width}}" for v in values).rstrip()
        print(f"{mark} {label:<{label_width}}  {cells}", file=out)
    differing = sum(r.differs for r in rows)
    print(f"\n* {differing} of {len(rows)} rows differ", file=out)


def write_csv(rows: Sequence[CompareRow], handle: TextIO) -> None:
    """``field,differs,<run 1>,<run 2>,...``: the first row names the runs. Cluster names, commands
    and env values are the users': no cell is left a formula (core.textsafe.csv_cell)."""
    writer = csv.writer(handle)
    writer.writerow(csv_row(["field", "differs", *rows[0].values]))
    for r in rows[1:]:
        writer.writerow(csv_row([r.label, "yes" if r.differs else "no", *r.values]))


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
