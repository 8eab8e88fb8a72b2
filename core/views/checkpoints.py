"""The run's checkpoints as the window shows them, Qt-free: the list (name, step, when, size; the one
TensorFlow would restore marked) and the marks on the Training tab's step axis.

Fed with ``checkpoints`` events (:class:`core.run.events.CheckpointsChanged`) and recoveries
(:class:`core.run.events.RecoveryChanged`), live or replayed from the journal, so a reopened run
shows the checkpoints it had. The list holds the checkpoints still in the directory (TensorFlow
deletes all but the newest few): the ones a restart can resume from. The step axis marks every
checkpoint the run saved (the deleted ones fainter), and where each recovery resumed, with the
checkpoint it resumed from: where a curve starts again, the plot says why.
"""

from __future__ import annotations

import time
from enum import StrEnum

from core.run.events import CheckpointsChanged, RecoveryChanged
from core.telemetry.checkpoints import Checkpoint

MAX_MARKERS = 50  # the newest checkpoints marked on the step axis; the list has them all
MAX_KEPT = 5000  # checkpoints kept in the model (a run that keeps every checkpoint of a week)
MAX_RESUMES = 20  # the newest recoveries marked


class Mark(StrEnum):
    """What a mark on the step axis is."""

    LATEST = "latest"  # the checkpoint a restart restores now
    KEPT = "kept"  # a checkpoint still in the directory
    GONE = "gone"  # a checkpoint the run saved and TensorFlow has deleted since
    RESUMED = "resumed"  # where a recovery resumed training


def size_text(size_bytes: int | None) -> str:
    """``12.3 MiB``; ``?`` when unknown."""
    if size_bytes is None:
        return "?"
    size = float(size_bytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return "?"


class CheckpointFigures:
    """The checkpoints of the run on screen; ``version`` changes whenever what is shown does."""

    def __init__(self) -> None:
        self.version = 0
        self.directory = ""
        self.found_from = ""
        self.problem = ""
        self.latest: str | None = None
        self._listed: dict[tuple[str, float | None], Checkpoint] = {}
        self._saved: dict[tuple[str, float | None], Checkpoint] = {}  # every one seen, deleted or not
        self._resumes: list[tuple[int, str]] = []  # (step, the checkpoint's name or "")

    def clear(self) -> None:
        """Another run: nothing listed."""
        self.directory = self.found_from = self.problem = ""
        self.latest = None
        self._listed.clear()
        self._saved.clear()
        self._resumes.clear()
        self.version += 1

    def apply_recovery(self, payload: RecoveryChanged) -> None:
        """Take a ``recovery`` event: a recovery that resumed at a known step is marked there."""
        if payload.phase != "recovered" or payload.resumed_step is None:
            return
        self._resumes = [*self._resumes, (payload.resumed_step, payload.checkpoint or "")][-MAX_RESUMES:]
        self.version += 1

    def apply(self, payload: CheckpointsChanged) -> None:
        """Take a ``checkpoints`` event."""
        if payload.directory != self.directory and self.directory:
            self._listed.clear()  # another directory: its listing starts afresh
        self.directory, self.found_from = payload.directory, payload.found_from
        self.problem, self.latest = payload.problem, payload.latest
        removed = set(payload.removed)
        for key in [k for k in self._listed if k[0] in removed]:
            del self._listed[key]
        for checkpoint in payload.added:
            self._listed[(checkpoint.name, checkpoint.saved_at)] = checkpoint
            self._saved[(checkpoint.name, checkpoint.saved_at)] = checkpoint
        for kept in (self._listed, self._saved):
            for key in list(kept)[: max(0, len(kept) - MAX_KEPT)]:
                del kept[key]
        self.version += 1

    def listed(self) -> list[Checkpoint]:
        """The checkpoints in the directory, oldest first (by step, then time)."""
        return sorted(self._listed.values(), key=lambda c: (c.step if c.step is not None else -1, c.saved_at or 0.0))

    def markers(self) -> list[tuple[int, str, Mark]]:
        """The marks on the step axis: (step, name, what it is): the newest :data:`MAX_MARKERS`
        checkpoints the run saved, and where each recovery resumed (its name: the checkpoint)."""
        listed = set(self._listed)
        saved = sorted(
            ((key, c) for key, c in self._saved.items() if c.step is not None),
            key=lambda item: (item[1].step or 0, item[1].saved_at or 0.0),
        )[-MAX_MARKERS:]
        marks = []
        for key, c in saved:
            kind = Mark.GONE if key not in listed else Mark.LATEST if c.name == self.latest else Mark.KEPT
            marks.append((c.step or 0, c.name, kind))
        marks += [(step, name, Mark.RESUMED) for step, name in self._resumes]
        return marks

    def rows(self) -> list[tuple[str, str]]:
        """A line per checkpoint, newest first, and its tooltip: ``ckpt-60  step 60  21:34:09  1.2 KiB``."""
        out = []
        for c in reversed(self.listed()):
            step = f"{c.step:,}" if c.step is not None else "?"
            saved = time.strftime("%H:%M:%S", time.localtime(c.saved_at)) if c.saved_at else "?"
            restores = "  (restored on a restart)" if c.name == self.latest else ""
            tip = f"{c.name}: step {step}, saved {saved}, {size_text(c.size_bytes)}{restores}"
            out.append((f"step {step} · {saved} · {size_text(c.size_bytes)}{' ◀' if restores else ''}", tip))
        return out

    def heading(self) -> str:
        """``Checkpoints (5)``, or why there are none to show."""
        if not self.directory:
            return "Checkpoints: none found yet"
        return f"Checkpoints ({len(self._listed)})"

    def where(self) -> str:
        """Where they are and how that was found, for a tooltip."""
        return f"{self.directory} (from {self.found_from})" if self.directory else ""
