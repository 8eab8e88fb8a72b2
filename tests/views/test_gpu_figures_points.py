"""The GPUs tab's history takes exactly the readings it always took: the batch path gathers each
series' points inline (issue 25: a reopened day hands over ~70,000 readings), and the reference
below is the code it replaced, a reading at a time, on samples with every kind of damage a file or
an old agent may hold. The history is the tab's Qt-free figures (core/views): no widget is built."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from core.views.gpu_figures import GpuFigures

_value = st.one_of(st.none(), st.integers(-5, 100), st.floats(-10, 1e12), st.booleans(), st.just("7"))
_total = st.one_of(_value, st.sampled_from([0, 0.0, -1, -2.5, 80, 80.0, True, False]))  # the divisor's edges
_gpu = st.one_of(
    st.fixed_dictionaries(
        {"index": st.one_of(st.integers(0, 3), st.just("1"), st.none())},
        optional={
            "utilization_gpu_percent": _value,
            "memory_used_bytes": _value,
            "memory_total_bytes": _total,
        },
    ),
    st.just("not a dict"),
)
_sample = st.fixed_dictionaries(
    {"host": st.sampled_from(["a", "b"])},
    optional={
        "gpus": st.one_of(st.lists(_gpu, max_size=4), st.none()),
        "figures": st.one_of(
            st.fixed_dictionaries(
                {}, optional={"cpu_percent": _value, "memory_used_bytes": _value, "memory_total_bytes": _total}
            ),
            st.just([]),
        ),
    },
)


def _reference(batch: list[dict[str, Any]]) -> dict[tuple[str, int], tuple[list[tuple[float, float]], ...]]:
    """Per series key, in order of first sight: the (t, value) points of busy % and memory used %."""
    out: dict[tuple[str, int], tuple[list[tuple[float, float]], ...]] = {}

    def add(key: tuple[str, int], t: float, busy: Any, used: Any, total: Any) -> None:
        busy_points, memory_points = out.setdefault(key, ([], []))
        if isinstance(busy, (int, float)):
            busy_points.append((t, float(busy)))
        if isinstance(used, (int, float)) and isinstance(total, (int, float)) and total > 0:
            memory_points.append((t, 100.0 * used / total))

    for data in batch:
        host, t = str(data.get("host", "?")), float(data["t"])
        figures = data["figures"] if isinstance(data.get("figures"), dict) else {}
        add(
            (host, -1),
            t,
            figures.get("cpu_percent"),
            figures.get("memory_used_bytes"),
            figures.get("memory_total_bytes"),
        )
        for gpu in data.get("gpus") or []:
            if isinstance(gpu, dict) and isinstance(gpu.get("index"), int):
                add(
                    (host, int(gpu["index"])),
                    t,
                    gpu.get("utilization_gpu_percent"),
                    gpu.get("memory_used_bytes"),
                    gpu.get("memory_total_bytes"),
                )
    return out


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


@given(batches=st.lists(st.lists(_sample, max_size=12), min_size=1, max_size=3))
@settings(max_examples=150, deadline=None)
def test_every_series_gets_the_points_a_reading_at_a_time_gave(batches: list[list[dict[str, Any]]]) -> None:
    t = 0
    for batch in batches:  # times increase across batches, ints and floats, as agents wrote them
        for data in batch:
            t += 1
            data["t"] = t if t % 2 else float(t)
    figures = GpuFigures()
    for batch in batches:
        figures.add_samples(batch)
    expected = _reference([data for batch in batches for data in batch])
    assert list(figures.history) == list(expected)
    for key, pair in figures.history.items():
        for series, points in zip(pair, expected[key], strict=True):
            ts, means, _, _ = series.points()
            assert len(ts) == len(points), key
            assert all(x == p[0] and _same(v, p[1]) for x, v, p in zip(ts, means, points, strict=True)), key
    assert figures.gpu_count == sum(1 for key in expected if key[1] >= 0)
