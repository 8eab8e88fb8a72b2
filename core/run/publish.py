"""The one rule by which a run source hands its events on: the live controller and the replay both
publish through a :class:`Publisher`.

Subscribers are called in order on the publishing thread and must not block (the window and the CLI
put events in an inbox, :mod:`core.run.inbox`). A subscriber that raises never stops the run: the
failure is journalled (where there is a journal), and told once per type of error as a warning to
the subscribers, so a broken view is seen without one warning per event.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from core.run.events import STATE_KINDS, Event, EventKind, warning

Subscriber = Callable[[Event], None]


class Publisher:
    """Subscribers, and the journal for the state kinds (:data:`core.run.events.STATE_KINDS`).

    ``journal``: where a state event's record goes before any subscriber hears of it (None for a
    source that only reads a run). ``before_state``: called before a state event is handed on, so
    that a status snapshot already shows what the event tells (a listener that reads the status on
    hearing a ``role_state`` sees that state)."""

    def __init__(
        self,
        *,
        journal: Callable[[dict[str, Any]], None] | None = None,
        before_state: Callable[[], None] | None = None,
    ) -> None:
        self._journal = journal
        self._before_state = before_state
        self._subscribers: list[Subscriber] = []
        self._told: set[str] = set()  # the types of listener errors already told

    def subscribe(self, callback: Subscriber) -> None:
        """Call ``callback(event)`` for every event from now on, on the publishing thread."""
        self._subscribers.append(callback)

    def publish(self, event: Event) -> None:
        if event.kind in STATE_KINDS:
            if self._journal is not None:
                self._journal(event.to_record())
            if self._before_state is not None:
                self._before_state()
        for callback in list(self._subscribers):
            try:
                callback(event)
            except Exception as exc:  # a broken listener must not stop the cluster, nor the reader
                self._listener_failed(event, exc)

    def _listener_failed(self, event: Event, exc: Exception) -> None:
        message = f"a listener failed on a {event.kind} event: {exc!r}"
        told = warning(message, round(time.time(), 3))
        name = type(exc).__name__
        if event.kind != EventKind.WARNING and name not in self._told:
            self._told.add(name)  # told once per type of error (and journalled as it is told)
            self.publish(told)
        elif self._journal is not None:
            self._journal(told.to_record())
