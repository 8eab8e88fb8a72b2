"""Metric parsing throughput, and Series.append throughput.

TowerDeck's way (core.telemetry.metrics.MetricParser): 64 KiB chunks, lines split on \\n and \\r,
a cheap substring test picks at most one format's regex per line (the common Keras lines by one
fullmatch). Baseline, "one regex per format": the same chunks and line splitting, then every
format's compiled regex tried with re.search on every line, matches collected; and that baseline
also turning its matches into MetricSample objects (without Keras step numbering, dedupe of
redraws or unit handling), the honest comparison, since the parser builds the same samples. All
over the same synthetic log of ~300k lines (TF1 hooks, the classic example, Keras verbose=2 and
verbose=1 progress bars, and TensorFlow's noise). The three take turns, ROUNDS rounds, so that a
shared machine's changing load falls on all alike; figures are medians of the rounds in wall and
CPU (process) time, ratios are the baseline's median over the parser's. Then Series.append for 1M
points. Run from the repository root.
"""

from __future__ import annotations

import random
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.telemetry.metrics import MetricParser, MetricSample
from core.views.series import Series

CHUNK_CHARS = 64 * 1024
LINES = 300_000
APPENDS = 1_000_000
ROUNDS = 9

NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|nan|inf"
BASELINE = [
    re.compile(rf"Step:\s*(\d+),.*?Cost:\s*({NUM}),\s*AvgTime:\s*({NUM})ms"),
    re.compile(rf"loss = ({NUM}), step = (\d+)(?: \(({NUM}) sec\))?"),
    re.compile(rf"global_step/sec: ({NUM})"),
    re.compile(r"^Epoch (\d+)/(\d+)"),
    re.compile(rf"^\s*(\d+)/(\d+).*?loss: ({NUM})"),
]

NOISE = [
    "2026-11-21 23:53:47.123456: I tensorflow/core/platform/cpu_feature_guard.cc:210] This TensorFlow binary is optimized to use available CPU instructions.",
    "I0000 00:00:1732233227.123456 4242 placer.cc:162] MatMul: (MatMul): /job:worker/replica:0/task:0/device:CPU:0",
    "WARNING:tensorflow:From /usr/lib/python3/dist-packages/tensorflow/python/training/monitored_session.py:123: deprecated",
    "INFO:tensorflow:Saving checkpoints for 1200 into /tmp/model/model.ckpt.",
    "2026-11-21 23:53:48.000001: W tensorflow/core/framework/local_rendezvous.cc:404] Local rendezvous is aborting with status: OUT_OF_RANGE",
]


def synthetic_log(rng: random.Random) -> str:
    lines: list[str] = []
    step = 0
    epoch = 0
    redraws = 0  # a progress bar is one physical line per redraw
    while len(lines) + redraws < LINES:
        kind = rng.random()
        step += 10
        loss = rng.uniform(0.1, 3.0)
        if kind < 0.45:
            lines.append(rng.choice(NOISE))
        elif kind < 0.6:
            lines.append(
                f"Step: {step},  Epoch: {step // 550 + 1:2d},  Batch: {step % 550} of 550,  Cost: {loss:.4f},  AvgTime: {rng.uniform(1, 9):.2f}ms"
            )
        elif kind < 0.75:
            lines.append(
                f"I1121 23:53:47.123456 140 basic_session_run_hooks.py:260] loss = {loss:.4f}, step = {step} ({rng.uniform(0.1, 1):.3f} sec)"
            )
            lines.append(f"INFO:tensorflow:global_step/sec: {rng.uniform(50, 300):.2f}")
        elif kind < 0.85:
            epoch += 1
            lines.append(f"Epoch {epoch}/1000000")
            lines.append(f"100/100 - 1s - {rng.randint(2, 9)}ms/step - loss: {loss:.4f} - accuracy: {rng.random():.4f}")
        else:
            epoch += 1
            lines.append(f"Epoch {epoch}/1000000")
            bar = "".join(
                f"\r{n:3d}/100 [{'=' * (n // 4):<25}] - ETA: 1s - loss: {loss:.4f}" for n in range(1, 100, 12)
            )
            redraws += 9
            lines.append(bar + f"\r100/100 [{'=' * 25}] - 1s 6ms/step - loss: {loss:.4f}")
    return "\n".join(lines) + "\n"


def baseline(chunks: list[str]) -> int:
    found: list[re.Match[str]] = []
    partial = ""
    for chunk in chunks:
        parts = (partial + chunk).replace("\r", "\n").split("\n")
        partial = parts.pop()
        for line in parts:
            for regex in BASELINE:
                m = regex.search(line)
                if m is not None:
                    found.append(m)
    return len(found)


def baseline_with_samples(chunks: list[str]) -> int:
    """The baseline, also turning each match into a MetricSample (the work feed() does too)."""
    found: list[MetricSample] = []
    partial = ""
    for chunk in chunks:
        parts = (partial + chunk).replace("\r", "\n").split("\n")
        partial = parts.pop()
        for line in parts:
            for k, regex in enumerate(BASELINE):
                m = regex.search(line)
                if m is None or k == 3:
                    continue
                if k == 0:
                    ms = float(m[3]) * 1e-3
                    found.append(MetricSample(0.0, int(m[1]), float(m[2]), ms, 1 / ms, {}, "classic"))
                elif k == 1:
                    found.append(MetricSample(0.0, int(m[2]), float(m[1]), None, None, {}, "tf1_hooks"))
                elif k == 2:
                    rate = float(m[1])
                    found.append(MetricSample(0.0, None, None, 1 / rate, rate, {}, "tf1_hooks"))
                else:
                    found.append(MetricSample(0.0, int(m[1]), float(m[3]), None, None, {}, "keras"))
    return len(found)


def towerdeck(chunks: list[str]) -> int:
    parser = MetricParser()
    n = 0
    for chunk in chunks:
        n += len(parser.feed(chunk, t=0.0))
    return n + len(parser.flush(t=0.0))


def interleaved(runs: int, fns: list[object], chunks: list[str]) -> list[tuple[float, float, int]]:
    """Median wall and CPU seconds of each function over ``runs`` rounds, the functions taking turns
    within a round, so that a shared machine's changing load falls on all of them alike."""
    walls: list[list[float]] = [[] for _ in fns]
    cpus: list[list[float]] = [[] for _ in fns]
    results = [0 for _ in fns]
    for _ in range(runs):
        for k, fn in enumerate(fns):
            assert callable(fn)
            wall, cpu = time.perf_counter(), time.process_time()
            results[k] = fn(chunks)
            walls[k].append(time.perf_counter() - wall)
            cpus[k].append(time.process_time() - cpu)
    return [(statistics.median(w), statistics.median(c), n) for w, c, n in zip(walls, cpus, results, strict=True)]


def main() -> int:
    text = synthetic_log(random.Random(7))
    physical = text.replace("\r", "\n").count("\n")
    chunks = [text[i : i + CHUNK_CHARS] for i in range(0, len(text), CHUNK_CHARS)]
    print(f"log: {len(text) / 2**20:.1f} MiB, {physical} lines (counting \\r redraws), {len(chunks)} chunks of 64 KiB")
    (base_s, base_cpu, base_n), (full_s, full_cpu, full_n), (ours_s, ours_cpu, ours_n) = interleaved(
        ROUNDS, [baseline, baseline_with_samples, towerdeck], chunks
    )
    if ours_n != full_n:
        print(f"FAILED: MetricParser made {ours_n} samples, the sample-building baseline {full_n}")
        return 1
    print(f"medians of {ROUNDS} rounds, the three taking turns; wall (CPU) seconds")
    print(
        f"baseline (one regex per format): {physical / base_s:12,.0f} lines/s  ({base_n} matches, {base_s:.3f} s ({base_cpu:.3f}))"
    )
    print(
        f"  same, building samples too:    {physical / full_s:12,.0f} lines/s  ({full_n} samples, {full_s:.3f} s ({full_cpu:.3f}))"
    )
    print(
        f"towerdeck MetricParser.feed:     {physical / ours_s:12,.0f} lines/s  ({ours_n} samples, {ours_s:.3f} s ({ours_cpu:.3f}))"
    )
    print(
        f"ratio against the sample-building baseline: {full_s / ours_s:.2f}x wall, {full_cpu / ours_cpu:.2f}x CPU; "
        f"against matches only: {base_s / ours_s:.2f}x wall, {base_cpu / ours_cpu:.2f}x CPU"
    )

    series = Series()
    start = time.perf_counter()
    for i in range(APPENDS):
        series.append(float(i), 1.0)
    append_s = time.perf_counter() - start
    print(
        f"Series.append: {APPENDS / append_s:12,.0f} appends/s  ({APPENDS:,} in {append_s:.2f} s, "
        f"{series.memory_bytes() / 1024:.0f} KiB held)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
