"""TensorBoard scalars of the roles of this host, sent as ``scalars`` events.

Each role started with a ``tb_dir`` gets one :class:`~.tbtail.ScalarTailer` on that directory,
kept across its attempts (a restarted trainer writes a new file in the same directory; points
already sent are not sent again). Every sample period each tailer is polled once, at most
MAX_POINTS_PER_EVENT points per event; the rest waits in the tailer for the next period, and
points that could not be sent (no controller) are put back, so none is dropped.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from .tbtail import ScalarTailer, tensorboard_available

MAX_POINTS_PER_EVENT = 2000

Emit = Callable[..., bool]  # emit(ev, **fields) -> whether it was written


class _Followed:
    def __init__(self, directory: str, tailer: ScalarTailer, attempt: int) -> None:
        self.directory = directory
        self.tailer = tailer
        self.attempt = attempt


class ScalarFeed:
    """The tailers of one agent, by role."""

    def __init__(self) -> None:
        self.available = tensorboard_available()
        self._roles: dict[str, _Followed] = {}
        self._import_error: str | None = None

    def follow(self, role: str, attempt: int, *, tb_dir: str, cwd: str | None) -> str | None:
        """Tail ``tb_dir`` (relative to the role's ``cwd``) for ``role``; an error message when
        this host cannot read TensorBoard files (said once per agent), else None."""
        directory = os.path.join(cwd or os.getcwd(), os.path.expanduser(tb_dir))
        followed = self._roles.get(role)
        if followed is not None and followed.directory == directory:
            followed.attempt = attempt
            return None
        if not self.available or self._import_error is not None:
            return None
        try:
            tailer = ScalarTailer(directory)
        except Exception as exc:  # ImportError, or a broken install: no scalars, the roles run on
            self.available = False
            self._import_error = f"cannot read TensorBoard event files here: {type(exc).__name__}: {exc}"
            return self._import_error
        self._roles[role] = _Followed(directory, tailer, attempt)
        return None

    def poll(self, emit: Emit, role: str | None = None) -> None:
        """One ``scalars`` event per role (or for ``role`` only) with what was written since."""
        for name, followed in list(self._roles.items()):
            if role is not None and name != role:
                continue
            points = followed.tailer.poll(MAX_POINTS_PER_EVENT)
            if not points:
                continue
            rows: list[dict[str, Any]] = [
                {"tag": p.tag, "step": p.step, "wall_time": p.wall_time, "value": p.value} for p in points
            ]
            if not emit("scalars", role=name, attempt=followed.attempt, points=rows):
                followed.tailer.unread(points)

    def drain(self, emit: Emit) -> None:
        """Send everything left (the agent is about to end)."""
        for name, followed in list(self._roles.items()):
            while True:
                points = followed.tailer.poll(MAX_POINTS_PER_EVENT)
                if not points:
                    break
                rows = [{"tag": p.tag, "step": p.step, "wall_time": p.wall_time, "value": p.value} for p in points]
                if not emit("scalars", role=name, attempt=followed.attempt, points=rows):
                    followed.tailer.unread(points)
                    break
