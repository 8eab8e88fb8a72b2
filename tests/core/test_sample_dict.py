"""sample_dict, the metrics.jsonl record of a parsed sample: written out by hand for speed, it must
stay what ``dataclasses.asdict`` gives, field for field (a field added to MetricSample included)."""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from core.telemetry.live import sample_dict
from core.telemetry.metrics import MetricSample

numbers = st.none() | st.floats(allow_nan=False)


@given(
    st.floats(allow_nan=False),
    st.none() | st.integers(),
    numbers,
    numbers,
    numbers,
    st.dictionaries(st.text(max_size=5), st.floats(allow_nan=False), max_size=3),
    st.text(max_size=8),
)
def test_a_record_is_the_samples_fields_and_owns_its_extra(
    t: float,
    step: int | None,
    loss: float | None,
    step_time_s: float | None,
    steps_per_sec: float | None,
    extra: dict[str, float],
    source: str,
) -> None:
    sample = MetricSample(t, step, loss, step_time_s, steps_per_sec, extra, source)
    record = sample_dict(sample)
    assert record == dataclasses.asdict(sample)
    assert list(record) == [f.name for f in dataclasses.fields(MetricSample)]  # the same order on disk
    assert record["extra"] is not sample.extra
