"""The run's checkpoints as the window shows them, Qt-free: the list (name, step, when, size; the one
TensorFlow would restore marked) and the steps marked on the Training tab's step axis.

Fed with ``checkpoints`` events (:class:`core.run.events.CheckpointsChanged`), live or replayed from
the journal, so a reopened run shows the checkpoints it had. Only the checkpoints still in the
directory are listed and marked (TensorFlow deletes all but the newest few): they are the ones a
restart can resume from.
"""

from __future__ import annotations

import time

from core.run.events import CheckpointsChanged
from core.telemetry.checkpoints import Checkpoint

MAX_MARKERS = 50  # the newest checkpoints marked on the step axis; the list has them all
MAX_KEPT = 5000  # checkpoints kept in the model (a run that keeps every checkpoint of a week)


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

    def clear(self) -> None:
        """Another run: nothing listed."""
        self.directory = self.found_from = self.problem = ""
        self.latest = None
        self._listed.clear()
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
        if len(self._listed) > MAX_KEPT:
            for key in list(self._listed)[: len(self._listed) - MAX_KEPT]:
                del self._listed[key]
        self.version += 1

    def listed(self) -> list[Checkpoint]:
        """The checkpoints in the directory, oldest first (by step, then time)."""
        return sorted(self._listed.values(), key=lambda c: (c.step if c.step is not None else -1, c.saved_at or 0.0))

    def markers(self) -> list[tuple[int, str, bool]]:
        """The newest :data:`MAX_MARKERS` checkpoints with a step: (step, name, whether it is the
        one TensorFlow would restore)."""
        marked = [c for c in self.listed() if c.step is not None][-MAX_MARKERS:]
        return [(c.step or 0, c.name, c.name == self.latest) for c in marked]

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
