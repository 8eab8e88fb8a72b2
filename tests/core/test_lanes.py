"""The controller's event lanes (core/controller/lanes.py): lifecycle news first, a role's stream in
order and taken whole before its exit, merged chunks that keep every byte, and the bound."""

from __future__ import annotations

import queue
import threading

from hypothesis import given
from hypothesis import strategies as st

from core.controller.lanes import AgentEvent, EventLanes, merge_output

KEY = "_received"


def output(role: str, offset: int, data: str, *, attempt: int = 1, host: str = "h1") -> AgentEvent:
    end = offset + len(data.encode())
    return AgentEvent(
        host,
        {
            "ev": "output",
            "role": role,
            "attempt": attempt,
            "offset": offset,
            "end": end,
            "data": data,
            "t": float(end),
            KEY: float(offset),
        },
    )


def take(lanes: EventLanes, *, merged: bool) -> AgentEvent:
    item = lanes.take(0.0, merged=merged)
    assert isinstance(item, AgentEvent)
    return item


def test_an_exit_is_taken_before_output_queued_ahead_of_it_and_the_role_s_own_lane_comes_with_it() -> None:
    lanes = EventLanes(100, received_key=KEY, merge_chars=6, flood_chars=100)
    for i in range(5):
        lanes.put(output("worker:0", i * 2, "a\n"))
        lanes.put(output("worker:1", i * 2, "b\n"))
    lanes.put(AgentEvent("h1", {"ev": "sample", "roles": {}}))
    lanes.put(AgentEvent("h1", {"ev": "exited", "role": "worker:1", "attempt": 1}))
    first = take(lanes, merged=False)
    assert first.event["ev"] == "exited"  # past 10 chunks and a sample
    own = lanes.take_role("worker:1")
    assert [e.event["offset"] for e in own] == [0, 2, 4, 6, 8]
    assert len(lanes) == 6  # worker:0's five chunks and the sample


def test_while_stopping_a_role_s_consecutive_chunks_are_taken_as_one_and_lanes_take_turns() -> None:
    lanes = EventLanes(100, received_key=KEY, merge_chars=6, flood_chars=100)
    for i in range(3):
        lanes.put(output("worker:0", i * 2, f"{i}\n"))
    lanes.put(output("worker:1", 0, "x\n"))
    lanes.put(AgentEvent("h1", {"ev": "skipped", "role": "worker:0", "attempt": 1, "offset": 6, "end": 90}))
    lanes.put(output("worker:0", 90, "9\n"))
    taken = take(lanes, merged=True)
    assert taken.event["data"] == "0\n1\n2\n" and (taken.event["offset"], taken.event["end"]) == (0, 6)
    assert taken.event[KEY] == 0.0  # the first chunk's arrival: how long the merged one waited
    assert take(lanes, merged=True).event["role"] == "worker:1"  # the other role's turn
    assert take(lanes, merged=True).event["ev"] == "skipped"  # a gap is not merged over
    assert take(lanes, merged=True).event["data"] == "9\n"
    assert lanes.take(0.0, merged=True) is None


def test_a_merged_take_stops_short_of_the_size_the_output_intake_would_coalesce() -> None:
    lanes = EventLanes(100, received_key=KEY, merge_chars=6, flood_chars=100)
    for i in range(5):
        lanes.put(output("worker:0", i * 2, f"{i}\n"))
    assert [take(lanes, merged=True).event["data"] for _ in range(2)] == ["0\n1\n2\n", "3\n4\n"]


def test_a_stopping_role_s_flood_is_taken_as_one_chunk() -> None:
    lanes = EventLanes(100, received_key=KEY, merge_chars=6, flood_chars=8)
    for i in range(5):
        lanes.put(output("worker:0", i * 2, f"{i}\n"))
    assert take(lanes, merged=True).event["data"] == "0\n1\n2\n3\n4\n"  # 10 characters wait: past 8


def test_a_full_lane_set_makes_the_putter_wait_until_the_controller_takes_one() -> None:
    lanes = EventLanes(2, received_key=KEY, merge_chars=6, flood_chars=100)
    lanes.put(output("worker:0", 0, "a\n"))
    lanes.put(output("worker:0", 2, "b\n"))
    try:
        lanes.put_nowait(AgentEvent("h1", {"ev": "exited", "role": "worker:0"}))
        raise AssertionError("a third item was taken past the bound of 2")
    except queue.Full:
        pass
    putter = threading.Thread(target=lanes.put, args=(output("worker:0", 4, "c\n"),))
    putter.start()
    assert lanes.take(0.0, merged=False) is not None
    putter.join(30)
    assert not putter.is_alive() and len(lanes) == 2


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["worker:0", "worker:1"]), st.sampled_from([1, 2]), st.text(max_size=8), st.booleans()
        ),
        max_size=30,
    )
)
def test_merging_keeps_every_byte_of_every_attempt_in_order_and_every_other_event_in_its_place(
    chunks: list[tuple[str, int, str, bool]],
) -> None:
    ends: dict[tuple[str, int], int] = {}
    items: list[AgentEvent] = []
    for role, attempt, data, gap in chunks:
        if gap:
            items.append(AgentEvent("h1", {"ev": "scalars", "role": role, "attempt": attempt, "points": []}))
        start = ends.get((role, attempt), 0)
        items.append(output(role, start, data, attempt=attempt))
        ends[(role, attempt)] = start + len(data.encode())
    merged = merge_output(items, received_key=KEY, max_chars=12)
    assert [e.event["ev"] for e in merged if e.event["ev"] != "output"] == ["scalars"] * sum(g for *_, g in chunks)
    for role, attempt in ends:

        def text(events: list[AgentEvent], role: str = role, attempt: int = attempt) -> str:
            mine = [
                e.event
                for e in events
                if e.event["ev"] == "output" and (e.event["role"], e.event["attempt"]) == (role, attempt)
            ]
            return "".join(e["data"] for e in mine)

        assert text(merged) == text(items)
    for event in (e.event for e in merged if e.event["ev"] == "output"):
        assert event["end"] - event["offset"] == len(event["data"].encode())
        assert len(event["data"]) <= 12 or event in [i.event for i in items]  # only a long chunk alone is longer
