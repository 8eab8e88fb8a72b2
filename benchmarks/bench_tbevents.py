"""Reading ~100k scalars from one event file: ScalarTailer.poll() against TensorBoard's EventAccumulator.

The file is written with TensorBoard's own EventFileWriter (simple_value summaries, as
tf.compat.v1.summary.FileWriter writes them, alternating the tags `loss` and `steps_per_sec`).
Both readers run in this process, on the same file, from a cold object (opening, record framing
and CRC checks, proto parsing, and for EventAccumulator its bookkeeping and `.Scalars(tag)` lists).
Neither imports TensorFlow here: both use TensorBoard's pure-Python record reader (its
tensorflow_stub). Run from the repo root: `python benchmarks/bench_tbevents.py`.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.agent import tbtail  # isort: skip
from core.telemetry.tbevents import ScalarTailer  # isort: skip

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter

# Before anything runs: pin tensorboard.compat.tf (resolved lazily, on first use) to the stub so
# nothing below imports TensorFlow. Importing the tailer does not pin it (the first ScalarTailer
# does), and EventFileWriter in write_events() ran before any tailer: it resolved the real
# TensorFlow, which both readers then used ("TensorFlow imported: True" in the 2026-11-25 run).
tbtail._tensorboard()

POINTS = 100_000
TAGS = ("loss", "steps_per_sec")
REPEATS = 3


def write_events(logdir: str) -> Path:
    writer = EventFileWriter(logdir, max_queue_size=1000, flush_secs=3600)
    for i in range(POINTS):
        tag = TAGS[i % 2]
        value = summary_pb2.Summary.Value(tag=tag, simple_value=1.0 / (1 + i))
        writer.add_event(
            event_pb2.Event(wall_time=1.7e9 + i * 0.01, step=i // 2, summary=summary_pb2.Summary(value=[value]))
        )
    writer.close()
    (path,) = Path(logdir).glob("events.out.tfevents.*")
    return path


def read_tailer(path: Path) -> int:
    return len(ScalarTailer(path.parent).poll())


def read_accumulator(path: Path) -> int:
    acc = EventAccumulator(str(path), size_guidance={"scalars": 0})
    acc.Reload()
    return sum(len(acc.Scalars(tag)) for tag in TAGS)


def best_of(fn: Callable[[Path], int], path: Path) -> tuple[float, int]:
    times, count = [], 0
    for _ in range(REPEATS):
        start = time.perf_counter()
        count = fn(path)
        times.append(time.perf_counter() - start)
    return min(times), count


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        path = write_events(tmp)
        print(
            f"wrote {POINTS} scalars ({path.stat().st_size / 1e6:.1f} MB) in {time.perf_counter() - start:.1f} s",
            flush=True,
        )
        tailer_s, tailer_n = best_of(read_tailer, path)
        acc_s, acc_n = best_of(read_accumulator, path)
    if tailer_n != POINTS or acc_n != POINTS:
        print(f"FAILED: expected {POINTS} scalars, tailer read {tailer_n}, EventAccumulator {acc_n}")
        return 1
    tailer_rate, acc_rate = tailer_n / tailer_s, acc_n / acc_s
    print(f"best of {REPEATS}, TensorFlow imported: {'tensorflow' in sys.modules}")
    print(f"ScalarTailer.poll()          {tailer_s:6.2f} s  {tailer_rate:10,.0f} scalars/s")
    print(f"EventAccumulator (baseline)  {acc_s:6.2f} s  {acc_rate:10,.0f} scalars/s")
    print(f"ratio tailer/baseline: {tailer_rate / acc_rate:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
