"""A run's figures as CSV files: training metrics, TensorBoard scalars, host, role and GPU samples,
and the role state history, read from the run directory the way :class:`core.run.reader.RunReader`
reads it (streaming, see :mod:`core.run.journal`).

A run that is still going is exported as a consistent snapshot: the size of every file is taken
first, before anything is read, and each file is then read up to that size, whole lines only (a
line still being written at that moment is left out). Each CSV is written to a temporary name and
renamed, so a reader never sees half a file. A text cell that a spreadsheet would run as a
formula (it starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return and is not a
number) is written with a leading ``'`` (:func:`core.textsafe.csv_cell`). The columns are listed in :data:`COLUMNS` and in the
docs/guide/runs.md ("Export a run's figures (CSV) and plots").
"""

from __future__ import annotations

import contextlib
import csv
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.run import journal
from core.run.rundir import RUN_FILE
from core.textsafe import csv_row

CHUNK_BYTES = 1 << 20

# The files written, and their columns, in order.
COLUMNS: dict[str, tuple[str, ...]] = {
    "metrics.csv": ("role", "wall_time", "step", "loss", "step_time_s", "steps_per_sec", "source"),
    "scalars.csv": ("role", "tag", "step", "wall_time", "value"),
    "host_samples.csv": (
        "wall_time",
        "host",
        "cpu_percent",
        "memory_used_bytes",
        "memory_total_bytes",
        "load1",
        "load5",
        "load15",
        "cpu_count",
    ),
    "role_samples.csv": (
        "wall_time",
        "host",
        "role",
        "alive",
        "pid",
        "attempt",
        "pids",
        "cpu_percent",
        "rss_bytes",
        "threads",
    ),
    "gpu_samples.csv": (
        "wall_time",
        "host",
        "gpu",
        "name",
        "uuid",
        "pci_bus_id",
        "utilization_gpu_percent",
        "utilization_memory_percent",
        "memory_used_bytes",
        "memory_total_bytes",
        "temperature_c",
        "power_w",
        "sm_clock_mhz",
        "roles",
    ),
    "role_states.csv": (
        "wall_time",
        "role",
        "old",
        "state",
        "detail",
        "pid",
        "attempt",
        "restarts",
        "returncode",
        "signal",
    ),
}


class ExportError(Exception):
    """The run cannot be exported; the message says why and what to do."""


@dataclass
class ExportResult:
    """What was written: rows per file, and the damaged lines skipped in the run's files."""

    directory: Path
    rows: dict[str, int] = field(default_factory=dict)
    skipped_lines: int = 0

    def summary(self) -> str:
        files = ", ".join(f"{name} ({count} row{'s' if count != 1 else ''})" for name, count in self.rows.items())
        skipped = f"; {self.skipped_lines} damaged line(s) skipped" if self.skipped_lines else ""
        return f"wrote {files} to {self.directory}{skipped}"


def role_of_dir(name: str) -> str:
    """``worker-1`` (a role's directory under ``roles/``) -> ``worker:1``."""
    job, _, index = name.rpartition("-")
    return f"{job}:{index}" if job and index.isdigit() else name


class _Snapshot:
    """Every telemetry file of a run with its size at one moment, read back up to that size."""

    def __init__(self, run_path: Path) -> None:
        self.run_path = run_path
        self.skipped = 0
        roles = run_path / "roles"
        self.role_dirs = sorted((p for p in roles.iterdir() if p.is_dir()), key=_natural) if roles.is_dir() else []
        paths = [run_path / journal.EVENTS_FILE]
        paths += sorted((run_path / "telemetry").glob("samples-*.jsonl"))
        paths += [d / name for d in self.role_dirs for name in ("metrics.jsonl", "scalars.jsonl")]
        # All sizes first, then any reading: the files agree with each other at this moment.
        self.sizes = {p: _size(p) for p in paths}

    def records(self, path: Path) -> Iterator[dict[str, Any]]:
        """The complete lines of ``path`` written before the snapshot, decoded, streamed."""
        end = self.sizes.get(path, 0)
        tail = journal.JsonlTail(path)
        while tail.offset < end:
            before = tail.offset
            batch = tail.read(min(CHUNK_BYTES, end - tail.offset))
            yield from batch
            if tail.offset == before:  # shrank (should not happen): stop rather than loop
                break
        self.skipped += tail.skipped

    def sample_files(self) -> list[Path]:
        return [p for p in self.sizes if p.parent.name == "telemetry"]


def _natural(path: Path) -> tuple[str, int]:
    job, _, index = path.name.rpartition("-")
    return (job, int(index)) if index.isdigit() else (path.name, -1)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


class _CsvOut:
    """One CSV being written under a temporary name; :meth:`commit` renames it into place."""

    def __init__(self, directory: Path, name: str) -> None:
        self.path = directory / name
        self.tmp = directory / f".{name}.tmp"
        self.file = open(self.tmp, "w", newline="", encoding="utf-8")  # noqa: SIM115 - closed by commit/discard
        self.writer = csv.writer(self.file)
        self.writer.writerow(COLUMNS[name])
        self.rows = 0

    def add(self, row: Iterable[Any]) -> None:
        # Tags, GPU names, hosts and details come from trainers, NVML and users: no cell may be a
        # formula a spreadsheet would run (core.textsafe.csv_cell).
        self.writer.writerow(csv_row("" if v is None else v for v in row))
        self.rows += 1

    def commit(self) -> None:
        self.file.close()
        os.replace(self.tmp, self.path)

    def discard(self) -> None:
        self.file.close()
        self.tmp.unlink(missing_ok=True)


def _metrics_rows(snap: _Snapshot) -> Iterator[list[Any]]:
    for d in snap.role_dirs:
        role = role_of_dir(d.name)
        for r in snap.records(d / "metrics.jsonl"):
            yield [
                role,
                r.get("t"),
                r.get("step"),
                r.get("loss"),
                r.get("step_time_s"),
                r.get("steps_per_sec"),
                r.get("source"),
            ]


def _scalars_rows(snap: _Snapshot) -> Iterator[list[Any]]:
    for d in snap.role_dirs:
        role = role_of_dir(d.name)
        for r in snap.records(d / "scalars.jsonl"):
            yield [role, r.get("tag"), r.get("step"), r.get("wall_time"), r.get("value")]


def _sample_rows(s: dict[str, Any]) -> Iterator[tuple[str, list[Any]]]:
    """The rows one host sample gives each of the three sample files."""
    t, host = s.get("t"), s.get("host")
    figures = s.get("figures")
    figures = figures if isinstance(figures, dict) else {}
    yield "host_samples.csv", [t, host, *(figures.get(k) for k in COLUMNS["host_samples.csv"][2:])]
    roles = s.get("roles")
    for role, values in (roles if isinstance(roles, dict) else {}).items():
        if isinstance(values, dict):
            yield "role_samples.csv", [t, host, role, *(values.get(k) for k in COLUMNS["role_samples.csv"][3:])]
    gpus = s.get("gpus")
    for g in gpus if isinstance(gpus, list) else []:
        if not isinstance(g, dict):
            continue
        procs = g.get("processes") or []
        on_it = sorted({str(p.get("role")) for p in procs if isinstance(p, dict) and p.get("role")})
        keys = COLUMNS["gpu_samples.csv"][4:-1]
        yield "gpu_samples.csv", [t, host, g.get("index"), g.get("name"), *(g.get(k) for k in keys), ";".join(on_it)]


def _state_rows(snap: _Snapshot) -> Iterator[list[Any]]:
    keys = COLUMNS["role_states.csv"][2:]
    for r in snap.records(snap.run_path / journal.EVENTS_FILE):
        if r.get("kind") == "role_state":
            yield [r.get("t"), r.get("role"), *(r.get(k) for k in keys)]


def export_csv(run_path: Path, out_dir: Path) -> ExportResult:
    """Write the run's figures as CSV files into ``out_dir`` (created); raises ExportError."""
    if not (run_path / RUN_FILE).is_file():
        raise ExportError(f"{run_path} is not a run directory (it has no run.json); pick one from `runs`")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ExportError(f"cannot create {out_dir}: {exc.strerror or exc}") from exc
    snap = _Snapshot(run_path)
    outs: dict[str, _CsvOut] = {}
    try:
        outs = {name: _CsvOut(out_dir, name) for name in COLUMNS}
        for row in _metrics_rows(snap):
            outs["metrics.csv"].add(row)
        for row in _scalars_rows(snap):
            outs["scalars.csv"].add(row)
        for path in snap.sample_files():  # one pass over each samples file for all three CSVs
            for sample in snap.records(path):
                for name, row in _sample_rows(sample):
                    outs[name].add(row)
        for row in _state_rows(snap):
            outs["role_states.csv"].add(row)
        for out in outs.values():  # all written: now they take their names, together
            out.commit()
    except OSError as exc:
        for out in outs.values():
            with contextlib.suppress(OSError):
                out.discard()
        raise ExportError(f"cannot write into {out_dir}: {exc.strerror or exc}") from exc
    return ExportResult(out_dir, {name: out.rows for name, out in outs.items()}, snap.skipped)


def read_csv(path: Path) -> list[dict[str, str]]:
    """A CSV written here, as rows of strings (for checking and for other tools' tests)."""
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))
