"""A worker's figures taken from metrics.jsonl records directly are those its samples give."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from core.telemetry.metrics import MetricSample
from core.telemetry.worker_stats import WorkerStats
from tests.helpers.metric_records import DAMAGED, RECORD, stats_state


@given(st.lists(st.one_of(RECORD, RECORD, DAMAGED), max_size=40))
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
    assert stats_state(by_record) == stats_state(by_sample)
    assert by_record.samples == sum(1 for r in records if len(r) == 7)
