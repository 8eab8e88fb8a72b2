"""Events as tests write them: a kind and its fields, as the journal keeps them."""

from __future__ import annotations

from typing import Any

from core.run.events import Event


def make_event(kind: str, t: float, role: str | None = None, data: dict[str, Any] | None = None) -> Event:
    """The typed event a journal record ``{kind, t, role, **data}`` holds (its payload checked)."""
    event = Event.from_record({**(data or {}), "kind": kind, "t": t, "role": role})
    assert event is not None, f"not an event: {kind} {data}"
    return event
