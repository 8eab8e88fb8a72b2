"""What waits for the controller's thread, in lanes: lifecycle news first, each role's output in
a lane of its own, host samples in a third.

One FIFO held a role's exit behind every role's output: at 1,024 simulated workers the exits of a
Ctrl-C reached the controller 222-372 s after the roles had stopped, behind ~100,000 output events,
and a link that found the FIFO full stopped reading its agent, so the exits waited in the agent too.
Here:

- lifecycle events (``started``, ``exited``, ``hello``, ``agent_lost``, ``host_state``, errors,
  and the Slurm and checkpoint reports) are taken before anything else;
- ``output``, ``skipped`` and ``scalars`` of a role wait in that role's lane, in the order its
  agent sent them. A role's exit is handled only after its own lane is taken (the controller asks
  for it: :meth:`EventLanes.take_role`), so what the controller records for a role is still its
  output, then its last lines and metrics, then its exit; it no longer waits for other roles' output;
- while the run stops, a role's consecutive output chunks are taken joined, up to ``merge_chars``
  characters (below the size :class:`~core.controller.output_intake.OutputIntake` coalesces, so
  every line is still parsed and every metric written): the backlog costs the controller per
  line, not per chunk. At 10 lines a second a chunk holds 2-3 lines and cost ~370 us to take,
  most of it per chunk, not per line. A role whose lane holds more than ``flood_chars`` (a flood,
  or minutes of backlog) has it taken as one chunk instead, which OutputIntake parses by its last
  lines: its exit and last metrics come in seconds, and the lines before them are in its log but
  not in its metrics (parsing them all cost 290 s at 256 workers x 100 lines a second).

Every item counts against one bound (``max_items``): past it the link that puts waits (nothing is
dropped, the agents' pipes buffer), as with the single queue before.
"""

from __future__ import annotations

import queue
import sys
import threading
from collections import OrderedDict, deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

ROLE_LANE_KINDS = frozenset({"output", "skipped", "scalars"})  # a role's stream: ordered within the role
BULK_KINDS = frozenset({"sample"})  # a host's figures: many, and news to nobody's lifecycle


@dataclass(frozen=True)
class AgentEvent:
    """A line from a host's agent (see docs/agent-protocol.md), for the controller's thread."""

    host: str
    event: dict[str, Any]


def _mergeable(first: dict[str, Any], second: dict[str, Any]) -> bool:
    """Whether ``second`` continues ``first``: both output of one attempt of one role, byte for byte."""
    if first.get("ev") != "output" or second.get("ev") != "output":
        return False
    if first.get("role") != second.get("role") or first.get("attempt") != second.get("attempt"):
        return False
    end, offset = first.get("end"), second.get("offset")
    return isinstance(end, int) and isinstance(offset, int) and end == offset


def merge_output(items: Iterable[AgentEvent], *, received_key: str, max_chars: int) -> list[AgentEvent]:
    """``items`` with each run of consecutive output chunks of one attempt joined into one event of
    at most ``max_chars`` characters (a longer chunk stays alone): the first chunk's offset and
    arrival (``received_key``: how long it waited), the last one's end and time, every chunk's data
    in order. Anything else stays as it is, in its place."""
    merged: list[AgentEvent] = []
    parts: list[str] = []
    chars = 0

    def close_run() -> None:
        if len(parts) > 1:
            last = merged[-1]
            merged[-1] = AgentEvent(last.host, {**last.event, "data": "".join(parts)})
        parts.clear()

    for item in items:
        data = str(item.event.get("data", ""))
        if merged and parts and chars + len(data) <= max_chars and _mergeable(merged[-1].event, item.event):
            head = merged[-1].event
            parts.append(data)
            chars += len(data)
            merged[-1] = AgentEvent(
                item.host,
                {**head, "end": item.event.get("end"), "t": item.event.get("t"), received_key: head.get(received_key)},
            )
            continue
        close_run()
        merged.append(item)
        if item.event.get("ev") == "output":
            parts.append(data)
            chars = len(data)
    close_run()
    return merged


class EventLanes:
    """See the module docstring. Any thread puts; the controller's thread takes."""

    def __init__(self, max_items: int, *, received_key: str, merge_chars: int, flood_chars: int) -> None:
        self._max_items = max_items
        self._received_key = received_key
        self.merge_chars = merge_chars
        self.flood_chars = flood_chars
        self._lock = threading.Lock()
        self._not_empty = threading.Condition(self._lock)
        self._not_full = threading.Condition(self._lock)
        self._urgent: deque[Any] = deque()  # lifecycle events, Slurm and checkpoint reports
        self._bulk: deque[AgentEvent] = deque()  # host samples
        self._lanes: OrderedDict[str, deque[AgentEvent]] = OrderedDict()  # role -> its stream; oldest turn first
        self._count = 0
        self._bulk_turn = False  # samples and role lanes take turns, so neither starves the other

    def __len__(self) -> int:
        with self._lock:
            return self._count

    def put(self, item: Any, *, block: bool = True, timeout: float | None = None) -> None:
        """Add ``item`` (an :class:`AgentEvent`, or a report for the urgent lane); when ``max_items``
        wait, wait for room (``block``, up to ``timeout``) or raise :class:`queue.Full`."""
        with self._not_full:
            full = self._count >= self._max_items
            if full and (not block or not self._not_full.wait_for(lambda: self._count < self._max_items, timeout)):
                raise queue.Full
            self._add(item)
            self._count += 1
            self._not_empty.notify()

    def put_nowait(self, item: Any) -> None:
        self.put(item, block=False)

    def _add(self, item: Any) -> None:
        if not isinstance(item, AgentEvent):
            self._urgent.append(item)
            return
        kind, role = item.event.get("ev"), item.event.get("role")
        if kind in ROLE_LANE_KINDS and isinstance(role, str):
            lane = self._lanes.get(role)
            if lane is None:
                lane = self._lanes[role] = deque()
            lane.append(item)
        elif kind in BULK_KINDS:
            self._bulk.append(item)
        else:
            self._urgent.append(item)

    def take(self, timeout_s: float, *, merged: bool) -> Any | None:
        """The next item, or None after ``timeout_s`` with nothing: lifecycle news first, then a
        host sample and a role's next event in turn (``merged``: a role's consecutive output
        chunks as one event). Controller thread."""
        with self._not_empty:
            if self._count == 0 and not self._not_empty.wait_for(lambda: self._count > 0, timeout_s):
                return None
            if self._urgent:
                return self._taken(1, self._urgent.popleft())
            self._bulk_turn = not self._bulk_turn
            if self._bulk and (self._bulk_turn or not self._lanes):
                return self._taken(1, self._bulk.popleft())
            role, lane = next(iter(self._lanes.items()))
            limit = self.join_limit(lane) if merged else 0
            items = [lane.popleft()]
            chars = len(str(items[0].event.get("data", "")))
            while merged and lane and _mergeable(items[-1].event, lane[0].event):
                chars += len(str(lane[0].event.get("data", "")))
                if chars > limit:
                    break
                items.append(lane.popleft())
            if lane:
                self._lanes.move_to_end(role)  # the other roles' turn first
            else:
                del self._lanes[role]
            return self._taken(len(items), merge_output(items, received_key=self._received_key, max_chars=limit)[0])

    def join_limit(self, lane: Iterable[AgentEvent]) -> int:
        """How many characters of a stopping role's lane are joined into one take: ``merge_chars``,
        or no limit once the lane holds more than ``flood_chars`` (see the module docstring)."""
        total = 0
        for item in lane:
            total += len(str(item.event.get("data", "")))
            if total > self.flood_chars:
                return sys.maxsize
        return self.merge_chars

    def waiting_for(self, role: str) -> bool:
        """Whether ``role`` has output (or scalars) in its lane, or the lanes are at their bound (a
        link then waits, and any role's newest output may lie in its agent's pipe): the controller
        has not yet seen all that role has printed. Any thread; read only."""
        with self._lock:
            return role in self._lanes or self._count >= self._max_items

    def take_role(self, role: str) -> list[AgentEvent]:
        """Everything in ``role``'s lane, in order (its exit is next). Controller thread."""
        with self._lock:
            lane = self._lanes.pop(role, None)
            return self._taken(len(lane), list(lane)) if lane else []

    def take_host(self, host: str) -> list[AgentEvent]:
        """Everything in the lanes of ``host``'s roles, in order within each (its agent is gone)."""
        with self._lock:
            roles = [role for role, lane in self._lanes.items() if lane[0].host == host]
            items = [item for role in roles for item in self._lanes.pop(role)]
            return self._taken(len(items), items)

    def _taken(self, count: int, result: Any) -> Any:
        self._count -= count
        self._not_full.notify(count)
        return result
