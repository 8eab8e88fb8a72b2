"""A worker's figures taken from metrics.jsonl records directly are those its samples give."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from core.telemetry.metrics import MetricSample
from core.telemetry.worker_stats import WorkerStats

_number = st.one_of(st.none(), st.floats(allow_nan=True), st.integers(-3, 3))
_record = st.fixed_dictionaries(
    {
        "t": st.floats(0, 100),
        "step": st.one_of(st.none(), st.integers(0, 50)),
        "loss": _number,
        "step_time_s": _number,
        "steps_per_sec": _number,
        "extra": st.dictionaries(st.sampled_from(["acc", "lr"]), st.floats(-1, 1), max_size=2),
        "source": st.sampled_from(["keras", "classic"]),
    }
)
# Records a reader may meet that are not samples: a field missing, or one too many.
_damaged = st.one_of(
    _record.map(lambda r: {k: v for k, v in r.items() if k != "loss"}),
    _record.map(lambda r: {**r, "epoch": 1}),
)


def _state(stats: WorkerStats) -> str:
    def norm(value: Any) -> Any:
        return "nan" if isinstance(value, float) and math.isnan(value) else value

    return repr({k: norm(v) for k, v in vars(stats).items()})


@given(st.lists(st.one_of(_record, _record, _damaged), max_size=40))
@settings(max_examples=300, deadline=None)
def test_add_records_is_add_of_each_sample(records: list[dict[str, Any]]) -> None:
    by_sample = WorkerStats()
    for raw in records:
        try:
            sample = MetricSample(**raw)
        except TypeError:
            continue
        by_sample.add(sample)
    by_record = WorkerStats()
    by_record.add_records(records)
    assert _state(by_record) == _state(by_sample)
    assert by_record.samples == sum(1 for r in records if len(r) == 7)
