"""metrics.jsonl records as a reader meets them, drawn by hypothesis (damaged ones too), and a
worker's figures written out to compare two ways of computing them."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import strategies as st

from core.telemetry.worker_stats import WorkerStats

NUMBER = st.one_of(st.none(), st.floats(allow_nan=True), st.integers(-3, 3))


RECORD = st.fixed_dictionaries(
    {
        "t": st.floats(0, 100),
        "step": st.one_of(st.none(), st.integers(0, 50)),
        "loss": NUMBER,
        "step_time_s": NUMBER,
        "steps_per_sec": NUMBER,
        "extra": st.dictionaries(st.sampled_from(["acc", "lr"]), st.floats(-1, 1), max_size=2),
        "source": st.sampled_from(["keras", "classic"]),
    }
)


# Records a reader may meet that are not samples: a field missing, or one too many.
DAMAGED = st.one_of(
    RECORD.map(lambda r: {k: v for k, v in r.items() if k != "loss"}),
    RECORD.map(lambda r: {**r, "epoch": 1}),
)


def stats_state(stats: WorkerStats) -> str:
    """Every figure of ``stats``, NaN written as text, so equal figures compare equal."""

    def norm(value: Any) -> Any:
        return "nan" if isinstance(value, float) and math.isnan(value) else value

    return repr({k: norm(v) for k, v in vars(stats).items()})
