"""The ``[notify]`` table of a cluster file: a command of the user's run with each notification.

```toml
[notify]
command = ["/home/me/bin/tell-me", "--channel", "ml"]   # or a string, split like a shell (never run by one)
events = ["run_finished", "role_failed"]                # default: every kind
timeout_s = 10                                          # the command is killed after this long (at most 600)
```

:func:`parse_notify` reports each problem through the cluster file's reader (the key's path, its
line, the fix), as the rest of the file is checked; it never raises on bad input.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Protocol

from core.cluster.problems import kind

NOTIFY_KINDS = {
    "run_finished": "the run ended: succeeded, failed or stopped",
    "role_failed": "a role failed for good (its restart policy gives up)",
    "crash_loop": "a role's attempts keep failing: it is restarted and fails again (once per loop)",
    "recovered": "the cluster recovered from a failed role: restarted by strategy, training resumed",
    "recovery_failed": "a recovery did not bring the cluster back (the recoveries in a row are spent)",
    "stalled": "a role stalled (no new step), or is stuck waiting for a peer that will not come",
    "host_lost": "the agent on a host, or the run's Slurm job, is lost",
}
NOTIFY_KEYS = {
    "command": "the program to run with each notification as one JSON object on stdin (a list, or a string)",
    "events": "which kinds to send: " + ", ".join(NOTIFY_KINDS) + " (default: all)",
    "timeout_s": "seconds the command may run before it is killed (default 10, at most 600)",
}
DEFAULT_TIMEOUT_S = 10.0
MAX_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class NotifyConfig:
    """The ``[notify]`` table, checked."""

    command: tuple[str, ...]
    events: tuple[str, ...] = tuple(NOTIFY_KINDS)
    timeout_s: float = DEFAULT_TIMEOUT_S


class _Reader(Protocol):
    def add(self, path: tuple[str | int, ...], message: str, hint: str = "", *, severity: str = ...) -> None: ...
    def unknown_keys(self, table: dict[str, Any], allowed: Any, path: tuple[str | int, ...]) -> None: ...
    def number(
        self, value: Any, path: tuple[str | int, ...], minimum: float, *, integer: bool = False
    ) -> float | None: ...
    def command(self, value: Any, path: tuple[str | int, ...]) -> tuple[str, ...] | None: ...


def parse_notify(value: Any, r: _Reader) -> NotifyConfig | None:
    """Check a ``[notify]`` table; None when it cannot be used (the problems say why)."""
    path: tuple[str | int, ...] = ("notify",)
    if not isinstance(value, dict):
        r.add(path, f"must be a table, not {kind(value)}", '[notify] then command = ["notify-send", "TowerDeck"]')
        return None
    r.unknown_keys(value, NOTIFY_KEYS, path)
    if "command" not in value:
        r.add((*path, "command"), "missing", 'e.g. command = ["/home/me/bin/tell-me"]; it reads the event on stdin')
        return None
    command = r.command(value["command"], (*path, "command"))
    events: tuple[str, ...] = tuple(NOTIFY_KINDS)
    if "events" in value:
        raw = value["events"]
        if not isinstance(raw, list) or not raw or not all(isinstance(e, str) for e in raw):
            r.add(
                (*path, "events"),
                f"must be a non-empty list of event kinds, not {kind(raw)}",
                'e.g. events = ["run_finished", "role_failed"]; the kinds: ' + ", ".join(NOTIFY_KINDS),
            )
        else:
            for i, name in enumerate(raw):
                if name not in NOTIFY_KINDS:
                    close = difflib.get_close_matches(name, list(NOTIFY_KINDS), n=1)
                    hint = f"did you mean {close[0]!r}? " if close else ""
                    r.add(
                        (*path, "events", i), f"{name!r} is not an event kind", hint + "use " + ", ".join(NOTIFY_KINDS)
                    )
            events = tuple(dict.fromkeys(raw))
    timeout_s = r.number(value.get("timeout_s", DEFAULT_TIMEOUT_S), (*path, "timeout_s"), 0.1)
    if timeout_s is not None and timeout_s > MAX_TIMEOUT_S:
        # A notification is news now; past this it is not worth a process held for it (and a
        # huge value overflowed the wait: every notification failed with OverflowError).
        r.add(
            (*path, "timeout_s"),
            f"must be at most {MAX_TIMEOUT_S:g} seconds, not {timeout_s:g}",
            f"use a value from 0.1 to {MAX_TIMEOUT_S:g} (default {DEFAULT_TIMEOUT_S:g})",
        )
        timeout_s = None
    if command is None:
        return None
    return NotifyConfig(command, events, timeout_s if timeout_s is not None else DEFAULT_TIMEOUT_S)


def notify_to_data(config: NotifyConfig) -> dict[str, Any]:
    """The ``[notify]`` table that parses back to ``config`` (for saving a cluster file)."""
    data: dict[str, Any] = {"command": list(config.command)}
    if config.events != tuple(NOTIFY_KINDS):
        data["events"] = list(config.events)
    if config.timeout_s != DEFAULT_TIMEOUT_S:
        data["timeout_s"] = config.timeout_s
    return data
