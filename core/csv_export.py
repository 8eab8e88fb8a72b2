"""A run's figures as CSV files: training metrics, TensorBoard scalars, host, role and GPU samples,
and the role state history, read from the run directory the way :class:`core.replay.RunReader`
reads it (streaming, see :mod:`core.journal`).

A run that is still going is exported as a consistent snapshot: the size of every file is taken
first, before anything is read, and each file is then read up to that size, whole lines only (a
line still being written at that moment is left out). Each CSV is written to a temporary name and
renamed, so a reader never sees half a file. The columns are listed in :data:`COLUMNS` and in the
README ("Export a run's figures as CSV").
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core import journal

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


def _write(directory: Path, name: str, rows: Iterable[Iterable[Any]]) -> int:
    """Write one CSV atomically (a temporary name, then a rename); returns the number of rows."""
    tmp = directory / f".{name}.tmp"
    count = 0
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(COLUMNS[name])
        for row in rows:
            writer.writerow(["" if v is None else v for v in row])
            count += 1
    os.replace(tmp, directory / name)
    return count


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


def _samples(snap: _Snapshot) -> Iterator[dict[str, Any]]:
    for path in snap.sample_files():
        yield from snap.records(path)


def _host_rows(snap: _Snapshot) -> Iterator[list[Any]]:
    keys = COLUMNS["host_samples.csv"][2:]
    for s in _samples(snap):
        figures = s.get("figures")
        figures = figures if isinstance(figures, dict) else {}
        yield [s.get("t"), s.get("host"), *(figures.get(k) for k in keys)]


def _role_sample_rows(snap: _Snapshot) -> Iterator[list[Any]]:
    keys = COLUMNS["role_samples.csv"][3:]
    for s in _samples(snap):
        roles = s.get("roles")
        roles = roles if isinstance(roles, dict) else {}
        for role, figures in roles.items():
            if isinstance(figures, dict):
                yield [s.get("t"), s.get("host"), role, *(figures.get(k) for k in keys)]


def _gpu_rows(snap: _Snapshot) -> Iterator[list[Any]]:
    keys = COLUMNS["gpu_samples.csv"][4:-1]
    for s in _samples(snap):
        for g in s.get("gpus") or []:
            if not isinstance(g, dict):
                continue
            procs = g.get("processes") or []
            roles = sorted({str(p.get("role")) for p in procs if isinstance(p, dict) and p.get("role")})
            yield [s.get("t"), s.get("host"), g.get("index"), g.get("name"), *(g.get(k) for k in keys), ";".join(roles)]


def _state_rows(snap: _Snapshot) -> Iterator[list[Any]]:
    keys = COLUMNS["role_states.csv"][2:]
    for r in snap.records(snap.run_path / journal.EVENTS_FILE):
        if r.get("kind") == "role_state":
            yield [r.get("t"), r.get("role"), *(r.get(k) for k in keys)]


def export_csv(run_path: Path, out_dir: Path) -> ExportResult:
    """Write the run's figures as CSV files into ``out_dir`` (created); raises ExportError."""
    if not (run_path / "run.json").is_file():
        raise ExportError(f"{run_path} is not a run directory (it has no run.json); pick one from `runs`")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ExportError(f"cannot create {out_dir}: {exc.strerror or exc}") from exc
    snap = _Snapshot(run_path)
    result = ExportResult(out_dir)
    writers = {
        "metrics.csv": _metrics_rows,
        "scalars.csv": _scalars_rows,
        "host_samples.csv": _host_rows,
        "role_samples.csv": _role_sample_rows,
        "gpu_samples.csv": _gpu_rows,
        "role_states.csv": _state_rows,
    }
    try:
        for name, rows in writers.items():
            result.rows[name] = _write(out_dir, name, rows(snap))
    except OSError as exc:
        raise ExportError(f"cannot write into {out_dir}: {exc.strerror or exc}") from exc
    result.skipped_lines = snap.skipped
    return result


def read_csv(path: Path) -> list[dict[str, str]]:
    """A CSV written here, as rows of strings (for checking and for other tools' tests)."""
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))
