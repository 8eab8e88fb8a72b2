"""Reading ~100k scalars from one event file: ScalarTailer.poll() against TensorBoard's EventAccumulator.

The file is written with TensorBoard's own EventFileWriter (simple_value summaries, as
tf.compat.v1.summary.FileWriter writes them, alternating the tags `loss` and `steps_per_sec`).
Both readers run in this process, on the same file, from a cold object (opening, record framing
and both CRC-32C checks of every record, proto parsing, and for EventAccumulator its bookkeeping
and `.Scalars(tag)` lists). Neither imports TensorFlow here. EventAccumulator reads records with
TensorBoard's pure-Python reader (its tensorflow_stub: small reads, CRC-32C in Python); the tailer
frames records itself over 4 MiB reads, with google_crc32c's native CRC-32C when installed (the
line "CRC-32C:" says which) and TensorBoard's Python one otherwise.

The two take turns, ROUNDS rounds, so that a shared machine's changing load falls on both alike;
the figures are medians of the rounds, in wall and CPU (process) time, and the ratio is the
baseline's median over the tailer's. Run from the repo root: `python benchmarks/bench_tbevents.py`.
"""

from __future__ import annotations

import statistics
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
ROUNDS = 7


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


def rounds(fns: list[Callable[[Path], int]], path: Path) -> list[tuple[float, float, int]]:
    """Median wall and CPU seconds of each reader over ROUNDS rounds, the readers taking turns."""
    walls: list[list[float]] = [[] for _ in fns]
    cpus: list[list[float]] = [[] for _ in fns]
    counts = [0 for _ in fns]
    for _ in range(ROUNDS):
        for k, fn in enumerate(fns):
            wall, cpu = time.perf_counter(), time.process_time()
            counts[k] = fn(path)
            walls[k].append(time.perf_counter() - wall)
            cpus[k].append(time.process_time() - cpu)
    return [(statistics.median(w), statistics.median(c), n) for w, c, n in zip(walls, cpus, counts, strict=True)]


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        path = write_events(tmp)
        print(
            f"wrote {POINTS} scalars ({path.stat().st_size / 1e6:.1f} MB) in {time.perf_counter() - start:.1f} s",
            flush=True,
        )
        (tailer_s, tailer_cpu, tailer_n), (acc_s, acc_cpu, acc_n) = rounds([read_tailer, read_accumulator], path)
    if tailer_n != POINTS or acc_n != POINTS:
        print(f"FAILED: expected {POINTS} scalars, tailer read {tailer_n}, EventAccumulator {acc_n}")
        return 1
    native = tbtail._tensorboard().crc32c_native
    print(f"median of {ROUNDS} rounds, taking turns; TensorFlow imported: {'tensorflow' in sys.modules}")
    print(
        f"CRC-32C: {'google_crc32c (native)' if native else 'TensorBoard pure-Python (google_crc32c not importable)'}"
    )
    print(
        f"ScalarTailer.poll()          {tailer_s:6.3f} s wall {tailer_cpu:6.3f} s CPU  {POINTS / tailer_s:10,.0f} scalars/s"
    )
    print(f"EventAccumulator (baseline)  {acc_s:6.3f} s wall {acc_cpu:6.3f} s CPU  {POINTS / acc_s:10,.0f} scalars/s")
    print(f"ratio baseline time / tailer time: {acc_s / tailer_s:.2f}x wall, {acc_cpu / tailer_cpu:.2f}x CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
