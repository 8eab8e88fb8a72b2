"""ScalarTailer on event files written by real TensorFlow (in subprocesses: this process stays TF-free)."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.agent import tbtail
from core.telemetry.tbevents import ScalarPoint, ScalarTailer
from tests.helpers.ports import free_ports
from tests.helpers.project import ROOT, run_cli
from tests.helpers.waits import wait_for

# A trainer stand-in: a real TensorFlow summary writer in a subprocess, driven by commands on stdin.
#   "open LOGDIR"   close the open writer if any, open a new one on LOGDIR, print "ready"
#   "STEP TAG=VALUE TAG=VALUE"   add one summary     "flush"  flush, then print "flushed"
#   "nonscalar"     write summaries that are not scalars (and two that are), print "written"
#   "close"         close the writer, print "closed"     EOF  exit
# kind "v1": tf.compat.v1.summary.FileWriter + Summary(simple_value), one Summary per line with all
# the tag=value pairs of that line; kind "v2": tf.summary.scalar. One process per kind serves every
# test (importing TensorFlow takes 10 to 30 s on a loaded machine, once per kind instead of once
# per writer); each writer it opens writes its own event file, as a trainer (or its restart) does.
WRITER = r"""
import os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tensorflow as tf

kind = sys.argv[1]
if kind == "v1":
    tf.compat.v1.disable_eager_execution()
writer = None
print("started", flush=True)
for line in sys.stdin:
    words = line.split()
    if not words:
        continue
    if words[0] == "open":
        if writer is not None:
            writer.close()
        logdir = line.rstrip("\n")[len("open "):]
        if kind == "v1":
            writer = tf.compat.v1.summary.FileWriter(logdir)
        else:
            writer = tf.summary.create_file_writer(logdir, flush_millis=10**9, max_queue=10**6)
        print("ready", flush=True)
    elif words == ["flush"]:
        writer.flush()
        print("flushed", flush=True)
    elif words == ["close"]:
        writer.close()
        writer = None
        print("closed", flush=True)
    elif words == ["nonscalar"]:
        with writer.as_default():
            tf.summary.scalar("loss", 0.5, step=1)
            tf.summary.histogram("weights", [1.0, 2.0, 3.0], step=1)
            tf.summary.text("note", "hello", step=1)
            tf.summary.write("raw", tf.constant(7.0), step=1)  # a float scalar, but no `scalars` plugin
            tf.summary.scalar("loss", tf.constant(0.25, tf.float64), step=2)
        print("written", flush=True)
    elif kind == "v1":
        step, pairs = int(words[0]), [w.split("=") for w in words[1:]]
        values = [tf.compat.v1.Summary.Value(tag=t, simple_value=float(v)) for t, v in pairs]
        writer.add_summary(tf.compat.v1.Summary(value=values), step)
    else:
        step, pairs = int(words[0]), [w.split("=") for w in words[1:]]
        with writer.as_default():
            for t, v in pairs:
                tf.summary.scalar(t, float(v), step=step)
if writer is not None:
    writer.close()
"""


class WriterHost:
    """One TensorFlow process of one summary kind, started on first use and kept for the session."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.proc: subprocess.Popen[str] | None = None

    def send(self, line: str, answer: str | None = None) -> None:
        if self.proc is None:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", WRITER, self.kind],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            self._expect("started")
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        if answer is not None:
            self._expect(answer)

    def _expect(self, word: str) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        assert line == word, f"writer said {line!r}, expected {word!r}"

    def open(self, logdir: Path) -> Writer:
        self.send(f"open {logdir}", "ready")
        return Writer(self)

    def stop(self) -> None:
        """Ends the process: at the session's end, or after a test left it in an unknown state."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


class Writer:
    """A live TensorFlow summary writer (one event file), driven line by line."""

    def __init__(self, host: WriterHost) -> None:
        self.host = host
        self.closed = False

    def write(self, points: list[tuple[int, dict[str, float]]]) -> None:
        """Add one summary per (step, {tag: value}) and flush."""
        for step, values in points:
            pairs = " ".join(f"{tag}={value!r}" for tag, value in values.items())
            self.host.send(f"{step} {pairs}")
        self.host.send("flush", "flushed")

    def close(self) -> None:
        self.host.send("close", "closed")
        self.closed = True

    def kill(self) -> None:
        """After a failure mid-way the writer's process may be out of step: the next test gets a new one."""
        if not self.closed:
            self.host.stop()


@pytest.fixture(scope="session")
def writers() -> Iterator[dict[str, WriterHost]]:
    hosts = {kind: WriterHost(kind) for kind in ("v1", "v2")}
    yield hosts
    for host in hosts.values():
        host.stop()


def schedule(first: int, last: int) -> list[tuple[int, dict[str, float]]]:
    """Points for steps first..last-1: values exact in float32, so they compare with ==."""
    return [(s, {"loss": 4.0 - s * 0.03125, "steps_per_sec": 100.0 + s}) for s in range(first, last)]


def expected(points: list[tuple[int, dict[str, float]]]) -> list[tuple[str, int, float]]:
    return [(tag, step, value) for step, values in points for tag, value in values.items()]


def triples(points: list[ScalarPoint]) -> list[tuple[str, int, float]]:
    return [(p.tag, p.step, p.value) for p in points]


def event_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if "tfevents" in p.name)


@dataclass(frozen=True)
class Written:
    """A finished event file and the points written into it."""

    path: Path
    points: list[tuple[int, dict[str, float]]]


@pytest.fixture(scope="session")
def written(tmp_path_factory: pytest.TempPathFactory, writers: dict[str, WriterHost]) -> dict[str, Written]:
    """One closed event file per writer kind, 25 steps of loss and steps_per_sec each."""
    out: dict[str, Written] = {}
    points = schedule(1, 26)
    for kind in ("v1", "v2"):
        logdir = tmp_path_factory.mktemp(f"written-{kind}")
        writer = writers[kind].open(logdir)
        try:
            writer.write(points[:10])
            writer.write(points[10:])
            writer.close()
        finally:
            writer.kill()
        (path,) = event_files(logdir)
        out[kind] = Written(path, points)
    return out


def drain(tailer: ScalarTailer, max_points: int | None = None) -> list[ScalarPoint]:
    points: list[ScalarPoint] = []
    while True:
        batch = tailer.poll(max_points)
        if not batch:
            return points
        points.extend(batch)


def record_ends(data: bytes) -> list[int]:
    """Offsets just after each TFRecord (8-byte length, 4-byte crc, data, 4-byte crc): cut points only."""
    ends, offset = [], 0
    while offset + 8 <= len(data):
        (length,) = struct.unpack("<Q", data[offset : offset + 8])
        offset += 8 + 4 + length + 4
        ends.append(offset)
    assert ends and ends[-1] == len(data)
    return ends


# ------------------------------------------------------------------------------------------
# 1. Both summary kinds TensorFlow writes


@pytest.mark.parametrize("kind", ["v1", "v2"])
def test_reads_exactly_the_written_points(written: dict[str, Written], kind: str):
    tailer = ScalarTailer(written[kind].path.parent)
    points = tailer.poll()
    assert triples(points) == expected(written[kind].points)
    assert all(p.wall_time > 1.6e9 for p in points)
    assert tailer.poll() == []


def test_v2_ignores_non_scalar_tensor_summaries(tmp_path: Path, writers: dict[str, WriterHost]):
    writer = writers["v2"].open(tmp_path)
    try:
        writer.host.send("nonscalar", "written")
        writer.close()
    finally:
        writer.kill()
    assert triples(ScalarTailer(tmp_path).poll()) == [("loss", 1, 0.5), ("loss", 2, 0.25)]


# ------------------------------------------------------------------------------------------
# 2. A writer that is still open


@pytest.mark.parametrize("kind", ["v1", "v2"])
def test_incremental_polls_return_only_new_points(tmp_path: Path, writers: dict[str, WriterHost], kind: str):
    tailer = ScalarTailer(tmp_path)
    writer = writers[kind].open(tmp_path)
    try:
        seen: list[ScalarPoint] = []
        for first, last in [(1, 6), (6, 7), (7, 20)]:
            writer.write(schedule(first, last))
            new = tailer.poll()
            assert triples(new) == expected(schedule(first, last))
            seen.extend(new)
        assert tailer.poll() == []
        writer.close()
        assert tailer.poll() == []
        assert triples(seen) == expected(schedule(1, 20))
    finally:
        writer.kill()


def test_max_points_splits_a_record_without_losing_any(written: dict[str, Written]):
    # v1 records hold two values each (loss and steps_per_sec): a limit of 3 splits records.
    tailer = ScalarTailer(written["v1"].path.parent)
    batches = []
    while batch := tailer.poll(max_points=3):
        assert len(batch) <= 3
        batches.append(batch)
    assert len(batches) == 17
    assert triples([p for b in batches for p in b]) == expected(written["v1"].points)


def test_points_put_back_come_first_in_the_next_poll(written: dict[str, Written]):
    # The agent puts back what it could not send (no controller connected): nothing is lost.
    tailer = ScalarTailer(written["v1"].path.parent)
    first = tailer.poll(max_points=5)
    tailer.unread(first[2:])
    again = drain(tailer, max_points=4)
    assert triples(first[:2] + again) == expected(written["v1"].points)


# ------------------------------------------------------------------------------------------
# 3. The last record is half-written


def cut_points(data: bytes) -> Iterator[int]:
    """Offsets inside a record halfway through the file: in the length, its crc, the data, the data crc."""
    ends = record_ends(data)
    start = ends[len(ends) // 2 - 1]
    end = ends[len(ends) // 2]
    yield from (start + 3, start + 10, (start + end) // 2, end - 2)


@pytest.mark.parametrize("kind", ["v1", "v2"])
@pytest.mark.parametrize("where", range(4), ids=["length", "length-crc", "data", "data-crc"])
def test_half_written_record_is_read_once_when_complete(
    tmp_path: Path, written: dict[str, Written], kind: str, where: int
):
    source = written[kind].path
    data = source.read_bytes()
    cut = list(cut_points(data))[where]
    complete = max(end for end in record_ends(data) if end <= cut)

    whole_records = tmp_path / "whole"
    whole_records.mkdir()
    (whole_records / source.name).write_bytes(data[:complete])
    before_cut = triples(ScalarTailer(whole_records).poll())

    live = tmp_path / "live"
    live.mkdir()
    target = live / source.name
    target.write_bytes(data[:cut])
    tailer = ScalarTailer(live)
    first = triples(tailer.poll())
    assert first == before_cut
    assert 0 < len(first) < len(expected(written[kind].points))
    assert tailer.poll() == []  # still half-written: nothing, and the position is kept

    with target.open("ab") as f:
        f.write(data[cut:])
    rest = triples(tailer.poll())
    assert first + rest == expected(written[kind].points)
    assert tailer.poll() == []


def test_file_growing_a_few_bytes_at_a_time(tmp_path: Path, written: dict[str, Written]):
    source = written["v2"].path
    data = source.read_bytes()
    target = tmp_path / source.name
    target.write_bytes(b"")
    tailer = ScalarTailer(tmp_path)
    seen: list[ScalarPoint] = []
    for offset in range(0, len(data), 7):
        with target.open("ab") as f:
            f.write(data[offset : offset + 7])
        seen.extend(tailer.poll())
    assert triples(seen) == expected(written["v2"].points)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cuts=st.lists(st.floats(min_value=0.0, max_value=1.0), max_size=6))
def test_any_split_of_a_file_yields_every_point_once(written: dict[str, Written], cuts: list[float]):
    source = written["v1"].path
    data = source.read_bytes()
    offsets = sorted({int(c * len(data)) for c in cuts} | {len(data)})
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / source.name
        target.write_bytes(b"")
        tailer = ScalarTailer(tmp)
        seen: list[ScalarPoint] = []
        done = 0
        for offset in offsets:
            with target.open("ab") as f:
                f.write(data[done:offset])
            done = offset
            seen.extend(tailer.poll())
        assert triples(seen) == expected(written["v1"].points)


# ------------------------------------------------------------------------------------------
# 4. A restarted trainer writes a new file


def test_new_file_is_picked_up(tmp_path: Path, writers: dict[str, WriterHost]):
    tailer = ScalarTailer(tmp_path)
    first = writers["v1"].open(tmp_path)
    try:
        first.write(schedule(1, 11))
        first.close()
    finally:
        first.kill()
    assert triples(tailer.poll()) == expected(schedule(1, 11))
    # A restarted trainer starts seconds later, so its file's name (which begins with the second it
    # was opened) sorts after the first's: the writer that is already running waits for that second.
    (first_file,) = event_files(tmp_path)
    opened = int(first_file.name.split(".")[3])
    wait_for(lambda: int(time.time()) > opened, 5, "the clock past the first file's second")
    # The restarted trainer resumes from an earlier step, in the other summary style.
    second = writers["v2"].open(tmp_path)
    try:
        second.write(schedule(8, 15))
        assert len(event_files(tmp_path)) == 2
        assert triples(tailer.poll()) == expected(schedule(8, 15))
        second.write(schedule(15, 17))
        assert triples(tailer.poll()) == expected(schedule(15, 17))
        second.close()
    finally:
        second.kill()
    assert tailer.poll() == []
    assert len(tailer.files) == 2


def test_files_are_read_in_name_order(tmp_path: Path, written: dict[str, Written]):
    shutil.copy(written["v2"].path, tmp_path / "events.out.tfevents.2000000000.host.2.v2")
    shutil.copy(written["v1"].path, tmp_path / "events.out.tfevents.1000000000.host.1")
    points = triples(ScalarTailer(tmp_path).poll())
    assert points == expected(written["v1"].points) + expected(written["v2"].points)


# ------------------------------------------------------------------------------------------
# 5. What must not raise


def test_missing_directory_then_created(tmp_path: Path, written: dict[str, Written]):
    directory = tmp_path / "not" / "yet"
    tailer = ScalarTailer(directory)
    assert tailer.poll() == []
    directory.mkdir(parents=True)
    assert tailer.poll() == []
    shutil.copy(written["v1"].path, directory)
    assert triples(tailer.poll()) == expected(written["v1"].points)


def test_directory_is_a_file(tmp_path: Path):
    path = tmp_path / "file"
    path.write_text("x")
    assert ScalarTailer(path).poll() == []


def test_garbage_and_corrupt_files_do_not_stop_the_others(tmp_path: Path, written: dict[str, Written]):
    (tmp_path / "events.out.tfevents.1.garbage").write_bytes(os.urandom(5000))
    (tmp_path / "events.out.tfevents.2.empty").write_bytes(b"")
    (tmp_path / "events.out.tfevents.3.dir").mkdir()
    (tmp_path / "notes.txt").write_text("not an event file")
    data = bytearray(written["v2"].path.read_bytes())
    ends = record_ends(bytes(data))
    middle = ends[len(ends) // 2]
    data[middle - 6] ^= 0xFF  # a flipped bit inside a record's data: its crc no longer matches
    (tmp_path / "events.out.tfevents.4.corrupt").write_bytes(bytes(data))
    shutil.copy(written["v1"].path, tmp_path / "events.out.tfevents.5.good")

    tailer = ScalarTailer(tmp_path)
    points = triples(tailer.poll())
    good = expected(written["v1"].points)
    assert points[-len(good) :] == good
    corrupt_part = points[: -len(good)]
    assert 0 < len(corrupt_part) < len(expected(written["v2"].points))
    assert corrupt_part == expected(written["v2"].points)[: len(corrupt_part)]
    assert tailer.poll() == []


@settings(max_examples=60, deadline=None)
@given(blob=st.binary(max_size=3000))
def test_random_bytes_never_raise(blob: bytes):
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "events.out.tfevents.0.x").write_bytes(blob)
        tailer = ScalarTailer(tmp)
        assert isinstance(tailer.poll(), list)
        assert isinstance(tailer.poll(), list)


def test_random_bytes_appended_to_a_real_file(tmp_path: Path, written: dict[str, Written]):
    target = tmp_path / written["v1"].path.name
    target.write_bytes(written["v1"].path.read_bytes() + os.urandom(300))
    assert triples(ScalarTailer(tmp_path).poll()) == expected(written["v1"].points)


# ------------------------------------------------------------------------------------------
# 6. The record framing: both CRC-32C implementations, any read size, CRC failures


@pytest.fixture(params=["native", "fallback"])
def crc_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Tailers made in the test use google_crc32c's C extension, or (when it cannot be imported)
    TensorBoard's pure-Python CRC-32C."""
    if request.param == "native":
        pytest.importorskip("google_crc32c")  # in requirements.lock; optional on an agent's host
    else:
        monkeypatch.setitem(sys.modules, "google_crc32c", None)  # import google_crc32c -> ImportError
    monkeypatch.setattr(tbtail, "_tb", None)  # the next tailer imports again
    return str(request.param)


def test_crc_path_is_the_one_asked_for(crc_path: str, tmp_path: Path):
    ScalarTailer(tmp_path)
    assert tbtail._tensorboard().crc32c_native == (crc_path == "native")
    assert tbtail._tensorboard().crc32c(b"123456789") == 0xE3069283  # CRC-32C's check value


@pytest.mark.parametrize("kind", ["v1", "v2"])
def test_each_crc_path_reads_exactly_the_written_points(crc_path: str, written: dict[str, Written], kind: str):
    assert triples(ScalarTailer(written[kind].path.parent).poll()) == expected(written[kind].points)


def test_each_crc_path_completes_a_record_split_across_two_polls(
    crc_path: str, tmp_path: Path, written: dict[str, Written]
):
    data = written["v1"].path.read_bytes()
    ends = record_ends(data)
    cut = (ends[3] + ends[4]) // 2  # inside the 5th record's data
    target = tmp_path / written["v1"].path.name
    target.write_bytes(data[:cut])
    tailer = ScalarTailer(tmp_path)
    first = triples(tailer.poll())
    assert tailer.poll() == []
    with target.open("ab") as f:
        f.write(data[cut:])
    assert first + triples(tailer.poll()) == expected(written["v1"].points)
    assert len(first) < len(expected(written["v1"].points))


@pytest.mark.parametrize("where", ["length", "length-crc", "data", "data-crc"])
def test_each_crc_path_stops_a_file_at_a_flipped_bit(
    crc_path: str, tmp_path: Path, written: dict[str, Written], where: str
):
    data = bytearray(written["v1"].path.read_bytes())
    ends = record_ends(bytes(data))
    start, end = ends[len(ends) // 2 - 1], ends[len(ends) // 2]
    flip = {"length": start + 1, "length-crc": start + 9, "data": (start + end) // 2, "data-crc": end - 1}[where]
    data[flip] ^= 0x08
    cut = ends[-3]
    target = tmp_path / written["v1"].path.name
    target.write_bytes(bytes(data[:cut]))
    whole = ScalarTailer(tmp_path)
    before = triples(ScalarTailer(_only_records(tmp_path, data, start)).poll())

    tailer = ScalarTailer(tmp_path)
    assert triples(tailer.poll()) == before  # every record before the bad one, none after
    assert 0 < len(before) < len(expected(written["v1"].points))
    with target.open("ab") as f:  # the writer goes on: the file is still read no further
        f.write(bytes(data[cut:]))
    assert tailer.poll() == []
    assert triples(whole.poll()) == before


def _only_records(tmp_path: Path, data: bytearray, end: int) -> Path:
    directory = tmp_path / "before"
    directory.mkdir()
    (directory / "events.out.tfevents.0.before").write_bytes(bytes(data[:end]))
    return directory


def test_a_huge_length_that_passes_its_crc_is_not_one_allocation(tmp_path: Path, written: dict[str, Written]):
    # A header whose CRC matches a length of 2**50 bytes: the reader waits for the data (none
    # comes), reading at most _MAX_READ_BYTES at a time, and the records before it are read.
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    length = struct.pack("<Q", 2**50)
    data = written["v1"].path.read_bytes()
    target = tmp_path / written["v1"].path.name
    target.write_bytes(data + length + struct.pack("<I", masked_crc32c(length)) + b"x" * 100)
    tailer = ScalarTailer(tmp_path)
    assert triples(tailer.poll()) == expected(written["v1"].points)
    assert tailer.poll() == []
    assert len(tailer.files) == 1  # still followed: no MemoryError dropped it


@pytest.mark.parametrize("read_bytes", [1, 5, 13, 100, 4096])
def test_any_read_size_gives_the_same_points(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, written: dict[str, Written], read_bytes: int
):
    # Reads smaller than a header, than a record, or ending anywhere inside one: framing carries
    # a record's start across reads and reads a longer record whole.
    monkeypatch.setattr(tbtail, "READ_BYTES", read_bytes)
    data = written["v2"].path.read_bytes()
    target = tmp_path / written["v2"].path.name
    target.write_bytes(data[: len(data) // 3])
    tailer = ScalarTailer(tmp_path)
    first = triples(tailer.poll(max_points=7))
    with target.open("ab") as f:
        f.write(data[len(data) // 3 :])
    assert first + triples(drain(tailer)) == expected(written["v2"].points)


# ------------------------------------------------------------------------------------------
# TensorFlow stays out of the process


def test_reading_does_not_import_tensorflow(written: dict[str, Written]):
    script = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from core.telemetry.tbevents import ScalarTailer
n = sum(len(ScalarTailer(d).poll()) for d in sys.argv[1:])
import tensorboard.compat
assert "tensorflow" not in sys.modules, sorted(m for m in sys.modules if m.startswith("tensorflow"))
assert tensorboard.compat.tf.__version__ == "stub", tensorboard.compat.tf.__version__
print(n)
"""
    dirs = [str(written[k].path.parent) for k in ("v1", "v2")]
    result = subprocess.run([sys.executable, "-c", script, *dirs], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) == 2 * len(expected(schedule(1, 26)))


def test_reads_the_same_when_tensorflow_is_already_imported(written: dict[str, Written]):
    # With TensorFlow loaded first, TensorBoard's compat module is the real TensorFlow, not its stub.
    script = f"""
import os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
sys.path.insert(0, {str(ROOT)!r})
import tensorflow
from core.telemetry.tbevents import ScalarTailer
import tensorboard.compat
assert tensorboard.compat.tf.__version__ != "stub"
data = open(sys.argv[1], "rb").read()
target = os.path.join(sys.argv[2], os.path.basename(sys.argv[1]))
cut = len(data) // 2
open(target, "wb").write(data[:cut])
t = ScalarTailer(sys.argv[2])
first = t.poll()
open(target, "ab").write(data[cut:])
rest = t.poll()
print(len(first), len(rest), len(t.poll()))
"""
    with tempfile.TemporaryDirectory() as tmp:
        result = subprocess.run(
            [sys.executable, "-c", script, str(written["v1"].path), tmp], capture_output=True, text=True, timeout=180
        )
    assert result.returncode == 0, result.stderr
    first, rest, again = map(int, result.stdout.split())
    assert first > 0 and rest > 0 and again == 0
    assert first + rest == len(expected(written["v1"].points))


# ------------------------------------------------------------------------------------------
# 6. A real trainer launched through the CLI


@pytest.mark.slow
def test_between_graph_worker_loss_from_its_event_file(tmp_path: Path):
    ps_port, worker_port = free_ports(2)
    cluster = tmp_path / "cluster.toml"
    cluster.write_text(
        f"""
strategy = "between_graph"
launch_style = "flags"
workdir = "{ROOT / "resources" / "trainers"}"
command = ["python", "-u", "between_graph.py", "--train_steps=60", "--log_every=10"]
[jobs.ps]
tasks = ["127.0.0.1:{ps_port}"]
[jobs.worker]
tasks = ["127.0.0.1:{worker_port}"]
"""
    )
    result = run_cli("launch", str(cluster), "--run-dir", str(tmp_path / "run"))
    assert result.returncode == 0, result.stdout + result.stderr

    points = ScalarTailer(tmp_path / "run" / "roles" / "worker-0" / "tensorboard").poll()
    loss = [p for p in points if p.tag == "loss"]
    steps = [p.step for p in loss]
    assert len(loss) >= 5, points
    assert steps == sorted(steps) and len(set(steps)) == len(steps)
    assert loss[-1].value < loss[0].value
    assert {p.tag for p in points} == {"loss", "steps_per_sec"}
    assert all(p.value > 0 for p in points if p.tag == "steps_per_sec")
