"""The fast MetricParser gives exactly the samples of the straightforward one it replaced."""

from __future__ import annotations

import dataclasses
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.bench_metrics import CHUNK_CHARS, synthetic_log
from core.telemetry.metrics import MAX_PARTIAL_LINE_CHARS, MetricParser, MetricPattern, MetricSample
from tests.helpers.metric_lines import ALL_FORMATS
from tests.helpers.metrics_reference import ReferenceParser

# Lines at the edges of the dispatch: digits then "/" without a bar, ANSI, Unknown totals, a
# format's marker without its line, NaN/inf, other units, "Cost:" with a Keras-looking start.
EDGES = [
    "12/Unknown - loss: 1\n",
    "12/Unknown 3s 2us/step - loss: nan - acc: inf\n",
    "  7/9 - 2s - 300us/step - loss: 1e-3 - val_loss: -inf - lr: 0.001\n",
    "7/9 noise\n",
    "7/9 - ETA: 3s\n",
    "7/9 [==] - ETA: 3s - loss: x - acc: 0.5\n",
    "2026-11-21 23:53:47.1: I tensorflow/core/x.cc:1] 3/4 - loss: 0.5\n",
    "12/30 - 1s - loss: 0.2 Cost: 3\n",
    "Step: 5,  Cost: 0.5\n",
    "Step: 5,  Cost: nan,  AvgTime: 3us\n",
    "Step: 5,  Cost: 1.5,  AvgTime: 2s\n",
    "Cost: 1 but no step\n",
    "loss = 1 but no step\n",
    "loss = 0.5, step = 10 (0.1 sec) global_step/sec: 3\n",
    "loss = 0.5, step = 20\n",
    "loss = 0.5, step = 30 (0.2 sec)\n",
    "global_step/sec: 0\n",
    "global_step/sec: -inf\n",
    " Epoch 4/7 \n",
    "Epoch 4/\n",
    "Epoch x/7\n",
    "\x1b[1mEpoch 2/3\x1b[0m\n",
    "\x1b[1m 3/10\x1b[0m \x1b[32m━━\x1b[0m 1s 5ms/step - loss: 0.45\n",
    "٣/10 - loss: 0.5\n",
    "²/10 - loss: 0.5\n",
    # Keras bar redraws (the parser's fast path), and near misses that must take the general one.
    " 3/10 [==>.......] - ETA: 1s - loss: 0.4500\n",
    " 3/10 [==>.......] - ETA: 1s - loss: 0.4500\n",
    " 4/10 [===>      ] - ETA: 1:02 - loss: 1.5e-04 - acc: 0.5000 - loss: 0.3000 - ETA: 2.0\n",
    " 5/Unknown [====] - ETA: 0s - loss: nan\n",
    " 6/10 [====] - ETA: 0s - loss: 0.1 - val_loss: 0.2 \n",
    " 6/10 [====] - ETA: 0s - loss: 0.1 - val.loss: 0.2\n",
    " 7/10 [====] - ETA: 0s - loss: inf\n",
    " 7/10 [====] - ETA: 0s - loss: 1e5\n",
    "\t8/10 [====] - ETA: 0s - loss: 0.1\n",
    " 9/10 [====] - ETA: 0s - loss: 0.1\x08\x08\n",
    "10/10 [====] - 1s 6ms/step - loss: 0.1\n",
    "10/10 [====] - 1s 6ms/step - loss: 0.1\n",
    "11/20 - 1s - 0ms/step - loss: 0.1\n",
    "12/20 [===] - 2s 1s/step - loss: 0.1 - acc: 0.2\n",
    "13/20 - 1s 500us/step - loss: 0.1 - ETA: 0.5\n",
    "14/20 - 1s 5.5ms/step - loss: 0.1\n",
    "15/Unknown - 3s - 7ms/step - loss: 0.1\n",
    "Epoch 5/7\n",
    " 3/10 [==>.......] - ETA: 1s - loss: 0.4500\n",
    # The fast path, the general one (ANSI) and the fast one again in one chunk, totals changing.
    "Epoch 6/7\n"
    " 3/10 [==>.......] - ETA: 1s - loss: 0.4500\n"
    "\x1b[1m 4/10\x1b[0m [===>......] - ETA: 1s - loss: 0.4400\n"
    " 5/10 [====>.....] - ETA: 1s - loss: 0.4300\n"
    " 6/12 [====>.....] - ETA: 1s - loss: 0.4200\n"
    "\x1b[1m 7/12\x1b[0m [===>......] - ETA: 1s - loss: 0.4100\n"
    " 8/10 [====>.....] - ETA: 1s - loss: 0.4000\n",
    # Classic lines read in two steps (the step, then each "Cost:" after it), TF1 lines searched
    # from their first marker, and steps too long for int() (Python takes at most 4300 digits).
    "Step: 6, Cost: x, Step: 7, Cost: 0.25,  AvgTime: 1.5ms\n",
    "Step: 8 Cost: 1, Step: 9, Cost: 2\n",
    "Cost: 1, Step: 10, Cost: 3\n",
    "Step: x, Step: 11, Cost: nan,  AvgTime: 2 µs\n",
    "Step: 12, Cost: -1e-3,  AvgTime: 3msx\n",
    "val_loss = 9, step = 40 then loss = 0.5, step = 41 (0.3 sec)\n",
    "xloss = 1, step = 2\n",
    "loss = 0.5, step = x; loss = 0.25, step = 42 (0.1 sec)\n",
    "INFO:tensorflow:global_step/sec global_step/sec: 12.5\n",
    f"Step: {'7' * 700},  Cost: 0.5\n",
    f"Step: {'8' * 5000},  Cost: 0.5\n",
    f"loss = 0.5, step = {'9' * 5000} (1.0 sec)\n",
    "loss = 0.5, step = 50 (1.0 sec)\n",
]


def key(samples: list[MetricSample]) -> list[str]:
    return [repr(dataclasses.astuple(s)) for s in samples]  # repr: NaN equals NaN, 1 differs from 1.0


def both(chunks: list[str], patterns: tuple[MetricPattern, ...] = ()) -> tuple[list[str], list[str]]:
    fast, ref = MetricParser(patterns), ReferenceParser(patterns)
    got: list[MetricSample] = []
    want: list[MetricSample] = []
    for i, chunk in enumerate(chunks):
        got += fast.feed(chunk, t=float(i))
        want += ref.feed(chunk, t=float(i))
    return key(got + fast.flush(t=-1.0)), key(want + ref.flush(t=-1.0))


def test_same_samples_on_the_benchmark_corpus() -> None:
    text = synthetic_log(random.Random(7))
    got, want = both([text[i : i + CHUNK_CHARS] for i in range(0, len(text), CHUNK_CHARS)])
    assert len(want) > 200_000
    assert got == want


def test_same_samples_on_recorded_and_edge_lines() -> None:
    got, want = both([*ALL_FORMATS, *EDGES, *ALL_FORMATS])
    assert len(want) > 20
    assert got == want


def test_same_samples_around_overlong_lines() -> None:
    # A whole line past the limit inside one chunk, and one made long by the partial line before
    # it (the chunk itself under the limit): both dropped, the lines around them read.
    long_line = "Step: 1,  Cost: 0.5 " + "x" * MAX_PARTIAL_LINE_CHARS
    chunks = [
        "Step: 2,  Cost: 0.25\n" + long_line + "\nStep: 3,  Cost: 0.125\n",
        "Step: 4,  Cost: " + "1" * 40_000,
        "2" * 30_000 + "\nStep: 5,  Cost: 0.5\n",
        "Step: 6,  Cost: " + "1" * (MAX_PARTIAL_LINE_CHARS - 20),
        "9\nStep: 7,  Cost: 0.5\n",
    ]
    got, want = both(chunks)
    assert len(want) == 5
    assert got == want


def test_same_samples_with_a_user_pattern() -> None:
    patterns = (MetricPattern(r"(?P<step>\d+)/(?P<total>\d+)"),)
    got, want = both([*ALL_FORMATS, *EDGES], patterns)
    assert got == want


@given(st.lists(st.sampled_from([*ALL_FORMATS, *EDGES, "noise /x\n", "\r", "\n", "Epoch 9/9\n", "1", "/"])))
@settings(max_examples=300, deadline=None)
def test_same_samples_on_random_mixes(parts: list[str]) -> None:
    got, want = both(parts)
    assert got == want
