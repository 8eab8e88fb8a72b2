"""The side-by-side table of 2-8 runs that ``runs compare`` prints (and writes as CSV)
and the window's compare view shows: :func:`compare_rows` reads each run's summary
(:mod:`core.run.index`) and its ``cluster.toml``: cluster shape, the program (the command
without its flags), a row per hyperparameter (each flag of the command and each ``[env]`` value,
:mod:`core.cluster.hyperparams`), launch style, strategy, TensorFlow version (when a role's log
says it), the host each role was given, durations, final/best loss, the run's speed
(:mod:`core.views.rates`: global steps/s, examples/s, each role's batches/s, over the run's last
30 s), restarts, exit codes.

A row whose values are not all equal is marked ``differs``, except the rows that say which run a
column is (its id, name, start and duration: :data:`IDENTITY`), which differ in every comparison
and so tell nothing about what changed.
"""

from __future__ import annotations

import contextlib
import csv
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from core.cluster.hyperparams import program
from core.cluster.render import role_dir
from core.cluster.spec import ClusterSpec
from core.run.index import RunSummary, duration_text
from core.run.rundir import read_run_spec, started_text
from core.textsafe import csv_row, terminal
from core.views import rates as speed
from core.views.runs_table import MISSING, hyperparam_keys

_TF_VERSION = re.compile(rb"\bTensorFlow(?: version)?[ :=]+v?(\d+\.\d+(?:\.\d+)?)", re.IGNORECASE)
_LOG_HEAD_BYTES = 64 * 1024
IDENTITY, CONFIG, RESULT = "identity", "config", "result"  # a row's kind


@dataclass(frozen=True)
class CompareRow:
    """One line of the side-by-side table: its label, one value per run, and its kind: which run
    it is (:data:`IDENTITY`), what the run was given (:data:`CONFIG`) or what it did (:data:`RESULT`)."""

    label: str
    values: tuple[str, ...]
    kind: str = RESULT

    @property
    def differs(self) -> bool:
        """The values are not all equal, in a row that is not the runs' identity."""
        return self.kind != IDENTITY and len(set(self.values)) > 1


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
    rates = [speed.summary_rates(s) for s in summaries]
    hosts = [_role_hosts(spec) for spec in specs]

    def row(name: str, values: Sequence[str], kind: str = RESULT) -> CompareRow:
        return CompareRow(name, tuple(values), kind)

    def from_spec(get: str) -> list[str]:
        out = []
        for spec in specs:
            if spec is None:
                out.append("?")
            elif get == "program":
                out.append(program(spec.command))
            else:
                out.append(str(getattr(spec, get)))
        return out

    rows = [
        row("run", [s.id for s in summaries], IDENTITY),
        row("name", [s.name for s in summaries], IDENTITY),
        row("cluster file", [s.cluster_file or "-" for s in summaries], CONFIG),
        row("started", [started_text(s.created) for s in summaries], IDENTITY),
        row("duration", [duration_text(s.duration_s) for s in summaries], IDENTITY),
        row("outcome", [s.outcome_text() for s in summaries]),
        row("cluster shape", [s.shape() for s in summaries], CONFIG),
        row("backend", [s.backend for s in summaries], CONFIG),
        row("program", from_spec("program"), CONFIG),
        *(row(k, [s.hyperparams.get(k, MISSING) for s in summaries], CONFIG) for k in hyperparam_keys(summaries)),
        row("launch style", from_spec("launch_style"), CONFIG),
        row("strategy", from_spec("strategy"), CONFIG),
        row("TensorFlow", [_tf_version(s.path, s.roles) for s in summaries], CONFIG),
        row("final loss", [_number(s.last_loss) for s in summaries]),
        row("best loss", [_number(s.best_loss) for s in summaries]),
        row(speed.label(speed.GLOBAL), [speed.rate_text(r.global_steps_per_s) for r in rates]),
        row(speed.label(speed.EXAMPLES), [speed.rate_text(r.examples_per_s) for r in rates]),
        row("restarts", [str(s.restarts) for s in summaries]),
    ]
    every_role: list[str] = []
    for s in summaries:
        every_role += [r for r in s.roles if r not in every_role]
    for role in every_role:
        figures = [s.role_figures.get(role) for s in summaries]
        rows.append(row(f"{role} host", [h.get(role, "-") for h in hosts], CONFIG))
        rows.append(row(f"{role} exit", [f"{f.state} {f.exit}" if f else "-" for f in figures]))
        if any(f is not None and f.steps is not None for f in figures):
            rows.append(row(f"{role} final loss", [_number(f.last_loss) if f else "-" for f in figures]))
        if any(role in r.batches_per_s for r in rates):
            rows.append(row(f"{role} {speed.label(speed.BATCHES)}", [speed.rate_text(r.of(role)) for r in rates]))
    return rows


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
