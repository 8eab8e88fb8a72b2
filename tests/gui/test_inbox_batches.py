"""The inbox hands telemetry to the window in bounded batches: state events all at once and first,
every point once and in order per role, a host sample weighing as much as the series it feeds."""

from __future__ import annotations

from core.run.inbox import SAMPLE_POINTS, EventInbox
from tests.helpers.events import make_event


def test_bounded_drains_keep_every_point_in_order_and_state_events_first() -> None:
    inbox = EventInbox()
    inbox.put(make_event("role_state", 0.0, "worker:0", {"state": "running"}))
    for start in range(0, 5000, 1000):
        inbox.put(
            make_event("metrics", 1.0, "worker:0", {"samples": [{"step": s} for s in range(start, start + 1000)]})
        )
        inbox.put(
            make_event("metrics", 1.0, "worker:1", {"samples": [{"step": s} for s in range(start, start + 1000)]})
        )
    for t in range(100):
        inbox.put(make_event("sample", float(t), None, {"host": "gpu-0", "t": float(t), "gpus": []}))
    events, _ = inbox.drain(1500)
    assert [e.kind for e in events[:1]] == ["role_state"]
    assert (
        sum(len(getattr(e.payload, "samples", None) or []) for e in events)
        + SAMPLE_POINTS * sum(e.kind == "sample" for e in events)
        <= 1500
    )
    got: dict[str, list[int]] = {"worker:0": [], "worker:1": []}
    host_t: list[float] = []
    drains = 1
    while events:
        for event in events:
            if event.kind == "metrics":
                got[str(event.role)].extend(s["step"] for s in event.payload.samples)
            elif event.kind == "sample":
                host_t.append(event.t)
            else:
                assert drains == 1, "a state event came after the first drain"
        events, _ = inbox.drain(1500)
        drains += 1
    assert got == {"worker:0": list(range(5000)), "worker:1": list(range(5000))}
    assert host_t == [float(t) for t in range(100)]
    assert drains >= (10_000 + SAMPLE_POINTS * 100) // 1500
    assert inbox.pending() == 0 and inbox.thinned_points == 0


def test_an_unbounded_drain_takes_everything() -> None:
    inbox = EventInbox()
    inbox.put(make_event("metrics", 1.0, "worker:0", {"samples": [{"step": s} for s in range(30_000)]}))
    events, _ = inbox.drain()
    assert len(events) == 1 and len(events[0].payload.samples) == 30_000
