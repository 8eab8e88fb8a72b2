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
MAX_OUTPUT_CHARS_PER_FRAME = 64 * 1024  # ~650 lines of 100 chars a frame: more than a screen shows


class EventInbox:
    """A bounded, thread-safe mailbox from the controller thread to the GUI thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: collections.deque[Event] = collections.deque(maxlen=MAX_EVENTS)
        self._output: dict[str, collections.deque[str]] = {}
        self._output_chars: dict[str, int] = {}
        self._skipped_chars: dict[str, int] = {}
        self.dropped_output_chars = 0

    def put(self, event: Event) -> None:
        """Called on the controller thread; never blocks on the GUI."""
        with self._lock:
            if event.kind == "role_output" and event.role is not None:
                role = event.role
                parts = self._output.setdefault(role, collections.deque())
                parts.append(str(event.data.get("text", "")))
                size = self._output_chars.get(role, 0) + len(parts[-1])
                # Keep the newest output for the screen; the run directory has all of it.
                while size > MAX_OUTPUT_CHARS_PER_FRAME and len(parts) > 1:
                    dropped = len(parts.popleft())
                    size -= dropped
                    self._skipped_chars[role] = self._skipped_chars.get(role, 0) + dropped
                    self.dropped_output_chars += dropped
                self._output_chars[role] = size
            else:
                self._events.append(event)

    def drain(self) -> tuple[list[Event], dict[str, str]]:
        """Everything since the last drain: events in order, and output text per role."""
        with self._lock:
            events = list(self._events)
            self._events.clear()
            output = {}
            for role, parts in self._output.items():
                skipped = self._skipped_chars.get(role, 0)
                note = (
                    f"[towerdeck: {skipped} characters of fast output not shown here; the run directory has them all]\n"
                    if skipped
                    else ""
                )
                output[role] = note + "".join(parts)
            self._output.clear()
            self._output_chars.clear()
            self._skipped_chars.clear()
        return events, output
