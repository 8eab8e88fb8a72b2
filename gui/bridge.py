"""Hands the controller's events to the GUI thread without blocking either side.

The controller calls :meth:`EventInbox.put` on its own thread; the GUI drains the inbox on a
QTimer at the screen's pace and redraws once per frame from what arrived, so a chatty role can
never make the window repaint per line. Output text is coalesced per role and bounded.
"""

from __future__ import annotations

import collections
import threading

from core.controller import Event

MAX_EVENTS = 20_000
MAX_OUTPUT_CHARS_PER_FRAME = 256 * 1024


class EventInbox:
    """A bounded, thread-safe mailbox from the controller thread to the GUI thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: collections.deque[Event] = collections.deque(maxlen=MAX_EVENTS)
        self._output: dict[str, list[str]] = {}
        self._output_chars: dict[str, int] = {}
        self.dropped_output_chars = 0

    def put(self, event: Event) -> None:
        """Called on the controller thread; never blocks on the GUI."""
        with self._lock:
            if event.kind == "role_output" and event.role is not None:
                text = str(event.data.get("text", ""))
                size = self._output_chars.get(event.role, 0)
                if size + len(text) > MAX_OUTPUT_CHARS_PER_FRAME:
                    # The screen shows the newest output; the run directory has all of it.
                    self.dropped_output_chars += len(text)
                    return
                self._output.setdefault(event.role, []).append(text)
                self._output_chars[event.role] = size + len(text)
            else:
                self._events.append(event)

    def drain(self) -> tuple[list[Event], dict[str, str]]:
        """Everything since the last drain: events in order, and output text per role."""
        with self._lock:
            events = list(self._events)
            self._events.clear()
            output = {role: "".join(parts) for role, parts in self._output.items()}
            self._output.clear()
            self._output_chars.clear()
        return events, output
