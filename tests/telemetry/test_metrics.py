"""Training metrics parsed from trainer output: recorded lines of every format, and a real run."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.telemetry.metrics import (
    MAX_PARTIAL_LINE_CHARS,
    MetricParser,
    MetricPattern,
    MetricSample,
)
from core.telemetry.worker_stats import WorkerStats, ema
from tests.helpers.metric_lines import (
    ALL_FORMATS,
    CLASSIC,
    KERAS3_BAR,
    KERAS_BAR,
    KERAS_V2,
    KERAS_V2_B,
    TF1_ABSL,
    TF1_INFO,
    TF1_RATE,
)
from tests.helpers.ports import free_ports
from tests.helpers.project import ROOT, run_cli


def parse(text: str, patterns: tuple[MetricPattern, ...] = ()) -> list[MetricSample]:
    parser = MetricParser(patterns)
    return parser.feed(text, t=1.0) + parser.flush(t=1.0)


def test_classic_line() -> None:
    [s] = parse(CLASSIC)
    assert (s.step, s.loss, s.source) == (201, 8.2541, "classic")
    assert s.step_time_s == pytest.approx(0.00304)
    assert s.steps_per_sec == pytest.approx(1 / 0.00304)


def test_tf1_hooks_derive_step_time_from_the_step_difference() -> None:
    first, second, rate = parse(TF1_ABSL + TF1_INFO + TF1_RATE)
    assert (first.step, first.loss, first.source) == (100, 0.31, "tf1_hooks")
    # The first interval covers an unknown number of steps: no step time.
    assert first.step_time_s is None
    assert (second.step, second.loss) == (200, 0.25)
    assert second.step_time_s == pytest.approx(0.5 / 100)
    assert rate.step is None and rate.loss is None
    assert rate.steps_per_sec == pytest.approx(191.2)
    assert rate.step_time_s == pytest.approx(1 / 191.2)


def test_tf1_step_going_back_gives_no_step_time() -> None:
    samples = parse(TF1_INFO + TF1_ABSL)
    assert [s.step for s in samples] == [200, 100]
    assert all(s.step_time_s is None for s in samples)


@pytest.mark.parametrize("text", [KERAS_V2, KERAS_V2_B])
def test_keras_verbose_2(text: str) -> None:
    [s] = parse(text)
    assert (s.step, s.loss, s.source) == (300, 0.31, "keras")
    assert s.step_time_s == pytest.approx(0.006)
    assert s.extra == {"accuracy": 0.91}


def test_keras_time_units_and_running_step() -> None:
    text = (
        "Epoch 1/2\n10/10 - 0s - 450us/step - loss: 1.5\n"
        "Epoch 2/2\n10/10 - 2s - 1.2s/step - loss: 1.0 - val_loss: 1.1 - 3s/epoch\n"
    )
    a, b = parse(text)
    assert (a.step, b.step) == (10, 20)
    assert a.step_time_s == pytest.approx(450e-6)
    assert b.step_time_s == pytest.approx(1.2)
    assert b.extra == {"val_loss": 1.1}


def test_keras_unknown_total_counts_on_across_epochs() -> None:
    text = "Epoch 1/2\n5/Unknown - 1s 10ms/step - loss: 2.0\nEpoch 2/2\n5/Unknown - 1s 10ms/step - loss: 1.0\n"
    assert [s.step for s in parse(text)] == [5, 10]


def test_keras_progress_bar_one_sample_per_redraw_value() -> None:
    samples = parse(KERAS_BAR)
    # n=1 and n=37 are redrawn twice each: one sample per distinct n; the final line adds the time.
    assert [(s.step, s.loss) for s in samples] == [
        (101, 0.9),
        (137, 0.4521),
        (138, 0.45),
        (200, 0.3105),
        (200, 0.31),
    ]
    assert [s.step_time_s for s in samples][-1] == pytest.approx(0.006)
    assert all(s.step_time_s is None for s in samples[:-1])


def test_keras3_bar_with_ansi_codes() -> None:
    a, b = parse(KERAS3_BAR)
    assert (a.step, a.loss, a.extra) == (37, 0.45, {"accuracy": 0.8})
    assert (b.step, b.loss, b.extra) == (100, 0.31, {"accuracy": 0.91})
    assert b.step_time_s == pytest.approx(0.006)


def test_eta_and_noise_are_not_metrics() -> None:
    noise = (
        "2026-11-21 23:53:47.1 I tensorflow/core/platform/cpu_feature_guard.cc:210] This TensorFlow binary is optimized\n"
        "3/10 workers ready\n"
        "Epoch 1 of the cosine schedule\n"
        "loss went down\n"
        " 12/100 [==>......] - ETA: 0:01:23\n"
    )
    assert parse(noise) == []


def test_nan_and_inf_losses_are_kept() -> None:
    text = "loss = nan, step = 10 (1.0 sec)\nStep: 5,  Cost: inf,  AvgTime: 1.0ms\nEpoch 1/1\n1/1 - 0s - loss: -inf\n"
    losses = [s.loss for s in parse(text)]
    assert len(losses) == 3
    assert losses[0] is not None and math.isnan(losses[0])
    assert losses[1:] == [math.inf, -math.inf]


@pytest.mark.parametrize("text", ALL_FORMATS)
def test_result_does_not_depend_on_where_chunks_split(text: str) -> None:
    whole = parse(text)
    assert whole
    for i in range(len(text) + 1):
        parser = MetricParser()
        got = parser.feed(text[:i], t=1.0) + parser.feed(text[i:], t=1.0) + parser.flush(t=1.0)
        assert got == whole, f"split at {i}: {text[:i]!r} | {text[i:]!r}"


@given(st.lists(st.integers(min_value=0, max_value=len("".join(ALL_FORMATS))), max_size=20))
@settings(max_examples=200, deadline=None)
def test_any_number_of_splits_gives_the_same_samples(cuts: list[int]) -> None:
    text = "".join(ALL_FORMATS)
    bounds = [0, *sorted(cuts), len(text)]
    parser = MetricParser()
    got: list[MetricSample] = []
    for a, b in itertools.pairwise(bounds):
        got += parser.feed(text[a:b], t=1.0)
    assert got + parser.flush(t=1.0) == parse(text)


def test_crlf_line_ends() -> None:
    assert parse(CLASSIC.replace("\n", "\r\n") * 2) == parse(CLASSIC * 2)


def test_unfinished_line_waits_for_its_end() -> None:
    parser = MetricParser()
    assert parser.feed(CLASSIC.rstrip("\n"), t=1.0) == []
    assert [s.step for s in parser.feed("\n", t=2.0)] == [201]


def test_overlong_line_is_dropped_and_memory_stays_bounded() -> None:
    parser = MetricParser()
    chunk = "x" * 1_000_000
    for _ in range(50):  # 50 MB without a newline
        assert parser.feed(chunk) == []
        assert len(parser._partial) <= MAX_PARTIAL_LINE_CHARS
    # The tail of the long line is not parsed as a line of its own; the next line is.
    assert parser.feed("Cost: 1.0\n" + CLASSIC, t=1.0) == parse(CLASSIC)


def test_user_pattern() -> None:
    pattern = MetricPattern(
        r"it=(?P<step>\d+) xent=(?P<loss>[-+0-9.eE]+|nan) dt=(?P<step_time_ms>[0-9.]+)ms lr=(?P<lr>[0-9.e-]+)",
        source="mine",
    )
    text = "it=7 xent=2.5 dt=12.5ms lr=1e-3\nStep: 1,  Cost: 3.0,  AvgTime: 1ms\n"
    first, second = parse(text, (pattern,))
    assert (first.step, first.loss, first.source, first.extra) == (7, 2.5, "mine", {"lr": 1e-3})
    assert first.step_time_s == pytest.approx(0.0125)
    assert first.steps_per_sec == pytest.approx(80.0)
    assert second.source == "classic"


def test_user_pattern_wins_over_builtin_formats() -> None:
    pattern = MetricPattern(r"Cost: (?P<cost>[0-9.]+)")
    [s] = parse(CLASSIC, (pattern,))
    assert (s.source, s.loss, s.extra) == ("user", None, {"cost": 8.2541})


@pytest.mark.parametrize(
    ("regex", "reason"),
    [("loss=(?P<loss>[0-9.]+", "missing ), unterminated subpattern"), (r"loss=([0-9.]+)", "no named groups")],
)
def test_invalid_user_pattern_fails_at_construction(regex: str, reason: str) -> None:
    with pytest.raises(ValueError) as info:
        MetricPattern(regex)
    assert regex in str(info.value)
    assert reason in str(info.value)


def test_user_pattern_with_unparseable_value_is_skipped() -> None:
    pattern = MetricPattern(r"loss=(?P<loss>\S+)")
    assert parse("loss=abc\n", (pattern,)) == []


@given(st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from(list("\r\n0123456789/.:-[]= "))))
@settings(max_examples=300, deadline=None)
def test_random_text_never_raises(text: str) -> None:
    parser = MetricParser((MetricPattern(r"(?P<step>\d+)/(?P<loss>\S+)"),))
    stats = WorkerStats()
    for sample in parser.feed(text, t=0.0) + parser.feed(text, t=1.0) + parser.flush(t=2.0):
        stats.add(sample)


@given(st.lists(st.sampled_from([*ALL_FORMATS, "noise /x\n", "\r", "Epoch 9/9\n", "12/Unknown - loss: 1\n"])))
@settings(max_examples=200, deadline=None)
def test_random_mixes_of_formats_never_raise(parts: list[str]) -> None:
    parser = MetricParser()
    for part in parts:
        for sample in parser.feed(part, t=0.0):
            assert isinstance(sample, MetricSample)


def sample(
    t: float, step: int | None = None, loss: float | None = None, step_time_s: float | None = None
) -> MetricSample:
    return MetricSample(t, step, loss, step_time_s, None if step_time_s is None else 1 / step_time_s, {}, "test")


def test_worker_stats_derive_step_time_from_consecutive_samples() -> None:
    stats = WorkerStats()
    stats.add(sample(10.0, step=100, loss=2.0))
    assert stats.step_time_s is None
    stats.add(sample(12.0, step=200, loss=1.5))
    assert (stats.step, stats.loss) == (200, 1.5)
    assert stats.step_time_s == pytest.approx(0.02)
    assert stats.steps_per_sec == pytest.approx(50.0)
    stats.add(sample(13.0, step=50, loss=3.0))  # restarted: no negative step time
    assert stats.step_time_s == pytest.approx(0.02)
    stats.add(sample(14.0, step=100))
    assert stats.step_time_s == pytest.approx(0.02)
    assert stats.loss == 3.0
    stats.add(sample(15.0, step=101, step_time_s=0.5))  # printed time wins
    assert stats.step_time_s == 0.5


def test_ema_matches_tensorboard_formula() -> None:
    # w = 0.5: last = 0.5, 1.25, 2.125; debias 0.5, 0.75, 0.875.
    assert ema([1.0, 2.0, 3.0], 0.5) == pytest.approx([1.0, 1.25 / 0.75, 2.125 / 0.875])
    # w = 0.6: last = 4.0, 2.4 + 0.8 = 3.2; debias 0.4, 1 - 0.36 = 0.64.
    assert ema([10.0, 2.0], 0.6) == pytest.approx([10.0, 5.0])
    assert ema([1.0, 2.0, 3.0], 0.0) == [1.0, 2.0, 3.0]
    assert ema([], 0.9) == []


def test_ema_passes_non_finite_through_and_skips_them() -> None:
    out = ema([1.0, math.nan, 3.0, math.inf], 0.5)
    assert out[0] == pytest.approx(1.0)
    assert math.isnan(out[1])
    # NaN did not count: second accumulation, last = 0.25 + 1.5, debias 1 - 0.25.
    assert out[2] == pytest.approx(1.75 / 0.75)
    assert out[3] == math.inf


def test_ema_constant_series_is_unchanged() -> None:
    assert ema([0.1] * 5, 0.99) == [0.1] * 5


def test_ema_rejects_weight_outside_unit_interval() -> None:
    with pytest.raises(ValueError, match="smoothing weight"):
        ema([1.0], 1.5)


@pytest.mark.slow
def test_real_multi_worker_mirrored_output(tmp_path: Path) -> None:
    p1, p2 = free_ports(2)
    cluster = tmp_path / "cluster.toml"
    cluster.write_text(
        'strategy = "multi_worker_mirrored"\n'
        'launch_style = "tf_config"\n'
        f'workdir = "{ROOT / "resources" / "trainers"}"\n'
        'command = ["python", "-u", "multi_worker_mirrored.py", "--train_steps=100", "--log_every=10"]\n'
        "[jobs.worker]\n"
        f'tasks = ["127.0.0.1:{p1}", "127.0.0.1:{p2}"]\n'
    )
    result = run_cli("launch", str(cluster), "--run-dir", str(tmp_path / "run"))
    assert result.returncode == 0, result.stdout + result.stderr
    log = (tmp_path / "run" / "roles" / "worker-0" / "attempt-1.log").read_text()
    parser = MetricParser()
    stats = WorkerStats()
    samples: list[MetricSample] = []
    # Feed it in odd-sized chunks, as a tailing reader would.
    for i in range(0, len(log), 997):
        samples += parser.feed(log[i : i + 997], t=float(i))
    samples += parser.flush()
    for s in samples:
        stats.add(s)
    assert [s.step for s in samples] == list(range(10, 101, 10)), log
    assert all(s.source == "keras" for s in samples)
    losses = [s.loss for s in samples]
    assert all(loss is not None and math.isfinite(loss) for loss in losses)
    assert losses[-1] < losses[0]  # type: ignore[operator]
    assert all(s.step_time_s is not None and s.step_time_s > 0 for s in samples)
    assert stats.step == 100 and stats.step_time_s is not None and stats.step_time_s > 0
