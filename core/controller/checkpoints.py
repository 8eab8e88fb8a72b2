"""The run's checkpoints, live: a thread of their own looks at the checkpoint directory, and the
controller's thread tells what changed.

:class:`CheckpointPoller` runs on its ``checkpoint-watch`` thread, never the controller's (a slow
or hung filesystem must not hold up the roles): every :data:`POLL_S` it stats the directory's
``checkpoint`` state file and, only when that changed, reads the listing
(:func:`core.telemetry.checkpoints.read_listing`) and hands it to the controller's queue. While no
directory is known it looks for one (:mod:`core.run.checkpoints`) every :data:`SEARCH_EVERY_S`.

:class:`CheckpointBook`, on the controller's thread, publishes a ``checkpoints`` event for each
change (the new ones, the ones TensorFlow deleted), answers which checkpoint a recovery restarted
from, and warns once when recovery is on but training has gone :data:`NO_CHECKPOINT_AFTER_S`
without a checkpoint (a recovery would restart it from scratch).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from core.cluster.spec import ClusterSpec
from core.run.checkpoints import CheckpointSource, declared_source, searched_source, where_looked
from core.run.events import CheckpointsChanged, Event, warning
from core.run.publish import Publisher
from core.telemetry.checkpoints import Checkpoint, CheckpointListing, find_state_file, read_listing

POLL_S = 1.0  # a stat of the state file; the listing is read only when it changed
SEARCH_EVERY_S = 10.0  # while no directory is known: a bounded look under the workdir and run directory
NO_CHECKPOINT_AFTER_S = 120.0  # of training without a checkpoint, with recovery on: warned once


def recovery_on(spec: ClusterSpec) -> bool:
    """Whether a failed role starts a recovery that restarts from checkpoints."""
    recovery = spec.recovery
    if recovery.max_recoveries <= 0 or recovery.mode == "role":
        return False
    return not (recovery.mode == "auto" and spec.strategy == "custom")


@dataclass(frozen=True)
class CheckpointReport:
    """What the poller saw, for the controller's thread."""

    source: CheckpointSource
    listing: CheckpointListing


class CheckpointPoller:
    """Watches a run's checkpoint directory on its own thread; ``report`` takes each new listing
    (it is called on that thread: the controller queues it)."""

    def __init__(
        self,
        spec: Callable[[], ClusterSpec],
        run_dir: Path,
        report: Callable[[CheckpointReport], None],
        *,
        since: float,
    ) -> None:
        self._spec = spec
        self._run_dir = run_dir
        self._report = report
        self._since = since
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._source: CheckpointSource | None = None
        self._searched_at = 0.0
        self._seen: object = None  # what the state file was when last read

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="checkpoint-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Ends the thread (it is between two looks, or in one: a hung filesystem keeps it, as a daemon)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2.0)

    def _loop(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(Exception):  # a look that failed is tried again next time
                self.poll(time.monotonic())
            self._stop.wait(POLL_S)

    def poll(self, now: float) -> None:
        """One look: find the directory if not known yet; read the listing if the state file changed."""
        source = self._source
        if source is None:
            spec = self._spec()
            source = declared_source(spec, self._run_dir)
            if source is None and now - self._searched_at >= SEARCH_EVERY_S:
                self._searched_at = now
                source = searched_source(spec, self._run_dir, since=self._since)
            if source is None:
                return
            self._source = source
        if source.remote_host is not None:
            if self._seen is None:
                problem = f"the checkpoints are on {source.remote_host}; they are not listed from this machine"
                self._report(CheckpointReport(source, CheckpointListing(str(source.directory), problem=problem)))
                self._seen = "remote"
            return
        state_file = find_state_file(source.directory) if source.directory.is_dir() else None
        try:
            info = os.lstat(state_file) if state_file is not None else None
        except OSError:
            info = None
        seen = (str(state_file), info.st_mtime_ns, info.st_size, info.st_ino) if info is not None else None
        if seen == self._seen:
            return
        self._report(CheckpointReport(source, read_listing(source.directory, state_file)))
        self._seen = seen  # only once told: a report that failed (a full queue) is made again


class CheckpointBook:
    """The checkpoints the controller knows of, on its thread (see the module docstring)."""

    def __init__(self, spec: Callable[[], ClusterSpec], run_dir: Path, publisher: Publisher) -> None:
        self._spec = spec
        self._run_dir = run_dir
        self._publisher = publisher
        self._known: dict[tuple[str, float | None], Checkpoint] = {}  # listed now, by (name, time saved)
        self._latest: str | None = None
        self._problem = ""
        self._source: CheckpointSource | None = None
        self._training_since: float | None = None
        self._warned = False

    def on_report(self, report: CheckpointReport) -> None:
        """A new listing: publish what changed (nothing when nothing did)."""
        listing = report.listing
        now_listed = {(c.name, c.saved_at): c for c in listing.checkpoints}
        added = tuple(c for key, c in now_listed.items() if key not in self._known)
        removed = tuple(name for key, c in self._known.items() if key not in now_listed for name in [c.name])
        new_source = report.source != self._source
        if not (added or removed or new_source or listing.problem != self._problem or listing.latest != self._latest):
            return
        self._known, self._latest, self._problem, self._source = (
            now_listed,
            listing.latest,
            listing.problem,
            report.source,
        )
        payload = CheckpointsChanged(
            directory=str(report.source.directory),
            found_from=report.source.how,
            added=added,
            removed=removed,
            latest=listing.latest,
            problem=listing.problem,
        )
        self._publisher.publish(Event(round(time.time(), 3), None, payload))

    def on_step(self, now: float) -> None:
        """A role made a training step: the time without a checkpoint counts from the first."""
        if self._training_since is None:
            self._training_since = now

    def saved_by(self, t: float) -> Checkpoint | None:
        """The newest checkpoint listed that was saved by ``t`` (what roles started after ``t``
        restore); the one the state file names when their times are unknown."""
        dated = [c for c in self._known.values() if c.saved_at is not None and c.saved_at <= t]
        if dated:
            return max(dated, key=lambda c: (c.saved_at or 0.0, c.step or 0))
        undated = [c for c in self._known.values() if c.saved_at is None]
        latest = [c for c in undated if c.name == self._latest]
        return latest[0] if latest else (max(undated, key=lambda c: c.step or 0) if undated else None)

    def tick(self, now: float) -> None:
        """Warn once when recovery is on and training has gone long without a checkpoint."""
        since = self._training_since
        if self._warned or since is None or self._known or now - since < NO_CHECKPOINT_AFTER_S:
            return
        spec = self._spec()
        if not recovery_on(spec):
            return
        self._warned = True
        looked = self._source.words() if self._source is not None else where_looked(spec, self._run_dir)
        message = (
            f"recovery is on, but no checkpoint has appeared after {now - since:.0f} s of training (looked in: "
            f"{looked}): a recovery would restart training from step 0. Fix: have the trainer save "
            "checkpoints (tf.train.CheckpointManager, MonitoredTrainingSession(checkpoint_dir=...)) into a "
            "--checkpoint_dir it is given, or set [recovery] checkpoint_dir"
        )
        self._publisher.publish(warning(message, round(time.time(), 3)))
