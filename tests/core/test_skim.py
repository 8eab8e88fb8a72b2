"""Skimming a large JSON-lines file: evenly spaced lines over its span, its tail whole, and the
offset from which a tail reader follows what is written next."""

from __future__ import annotations

import itertools
import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.run import journal, skim


def write(path: Path, n: int, partial: bool = False) -> None:
    text = "".join(json.dumps({"step": i, "pad": "x" * (i % 7)}) + "\n" for i in range(1, n + 1))
    path.write_text(text + ('{"step": ' if partial else ""))


def test_skim_spans_the_file_in_order_and_reads_its_tail_whole(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    write(path, 50_000, partial=True)
    records, end = skim.skim(path, points=500, tail_bytes=2_000)
    steps = [r["step"] for r in records]
    assert steps[0] == 1 and steps[-1] == 50_000
    assert steps == sorted(set(steps))  # in file order, none twice
    tail = steps[-40:]
    assert tail == list(range(50_000 - 39, 50_001))  # the newest lines all there
    spaced = steps[: -len([s for s in steps if s > 50_000 - 80])]
    assert 400 <= len(spaced) <= 500
    gaps = [b - a for a, b in itertools.pairwise(spaced)]
    assert max(gaps) < 3 * min(gaps) + 10  # evenly spread, not bunched
    # The half-written last line is left: a tail reader from ``end`` takes it once finished.
    follower = journal.JsonlTail(path, offset=end)
    assert follower.read() == []
    with open(path, "a") as f:
        f.write("50001}\n")
    assert follower.read() == [{"step": 50_001}]


def test_skim_of_a_small_or_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "small.jsonl"
    write(path, 10)
    records, end = skim.skim(path, points=500, tail_bytes=1 << 20)
    assert [r["step"] for r in records] == list(range(1, 11)) and end == path.stat().st_size
    assert skim.skim(tmp_path / "missing.jsonl") == ([], 0)
    (tmp_path / "empty.jsonl").write_bytes(b"")
    assert skim.skim(tmp_path / "empty.jsonl") == ([], 0)


def _first_lines(data: bytes, stop: int, points: int) -> list[bytes]:
    """What _spaced_lines must return, from the whole file at once: for each offset, the first line
    that starts an object (``{``: a whole record, never a compact delta) at or after it, after a
    newline (or at 0), and ends before ``stop``; none twice."""
    lines: list[bytes] = []
    last = -1
    for k in range(points):
        at = k * stop // points
        if at == 0 and data[:1] == b"{":
            start = 0
        else:
            newline = data.find(b"\n{", at, stop)
            start = newline + 1 if newline >= 0 else -1
        finish = data.find(b"\n", start, stop) if start >= 0 else -1
        if finish >= 0 and start > last:
            lines.append(data[start:finish])
            last = start
    return lines


_lengths = st.lists(
    st.tuples(st.one_of(st.integers(0, 120), st.integers(3000, 20000)), st.booleans()), min_size=1, max_size=60
)


@pytest.mark.parametrize("dense", [True, False], ids=["blocks", "a-read-per-offset"])
@given(lengths=_lengths, points=st.integers(1, 300), block=st.integers(1, 9000), cut=st.integers(0, 50))
@settings(max_examples=150, deadline=None)
def test_spaced_lines_read_in_blocks_or_one_by_one_are_the_same_lines(
    tmp_path_factory: pytest.TempPathFactory,
    dense: bool,
    lengths: list[tuple[int, bool]],
    points: int,
    block: int,
    cut: int,
) -> None:
    """Lines that start with ``{`` (records, key frames) among lines that do not (compact deltas)."""
    data = b"".join(
        (b"{" if whole else b"[") + bytes([65 + i % 26]) * n + b"\n" for i, (n, whole) in enumerate(lengths)
    )
    stop = max(0, len(data) - cut)
    path = tmp_path_factory.mktemp("skim") / "lines.jsonl"
    path.write_bytes(data)
    saved = skim.DENSE_SPACING_BYTES, skim.DENSE_BLOCK_BYTES
    skim.DENSE_SPACING_BYTES, skim.DENSE_BLOCK_BYTES = (1 << 40 if dense else -1), block
    fd = os.open(path, os.O_RDONLY)
    try:
        assert skim._spaced_lines(fd, stop, points) == _first_lines(data, stop, points)
    finally:
        os.close(fd)
        skim.DENSE_SPACING_BYTES, skim.DENSE_BLOCK_BYTES = saved


def test_a_dense_file_is_read_in_few_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker's metrics (offsets ~5 KB apart) take a few large reads, not one per offset."""
    path = tmp_path / "metrics.jsonl"
    write(path, 100_000)  # ~2.7 MB
    reads: list[int] = []
    real_pread = os.pread

    def counting_pread(fd: int, n: int, at: int) -> bytes:
        reads.append(n)
        return real_pread(fd, n, at)

    monkeypatch.setattr(skim.os, "pread", counting_pread)
    records, _ = skim.skim(path, points=2048)
    assert len(records) > 2000
    assert len(reads) <= 8, f"{len(reads)} reads"


def _read_bytes() -> int:
    """Bytes this process has had read from storage (not from the page cache)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("read_bytes:"):
            return int(line.split()[1])
    raise AssertionError("/proc/self/io has no read_bytes")


def _evict(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _skim_cold(folder: Path, points: int) -> tuple[Path, int] | None:
    """A 34 MB file of lines of 300-800 bytes written in ``folder`` and evicted from the page cache,
    and the bytes a skim of it read from the disk; None where nothing was (a file system in memory)."""
    path = folder / "samples-gpu-0.jsonl"
    with open(path, "w") as f:
        for i in range(60_000):
            f.write(json.dumps({"t": i, "pad": "x" * (300 + i % 500)}) + "\n")
    _evict(path)
    before = _read_bytes()
    skim.skim(path, points)
    plain = _read_bytes() - before
    return (path, plain) if plain > 0 else None


@pytest.mark.parametrize("points", [64, 4096], ids=["a-read-per-offset", "blocks"])
def test_prefetch_asks_the_disk_for_every_byte_skim_then_reads(tmp_path: Path, points: int) -> None:
    """Once prefetched, a file out of the page cache (a run from yesterday) is skimmed without a read
    of its own reaching the disk: each would wait for the disk in turn. The same skim without the
    prefetch is the control. Where the temporary folder is in memory (tmpfs), the file goes into a
    folder of the checkout, which is on a disk."""
    with tempfile.TemporaryDirectory(dir=Path(__file__).resolve().parents[2], prefix=".skim-test-") as checkout:
        cold = _skim_cold(tmp_path, points) or _skim_cold(Path(checkout), points)
        if cold is None:
            pytest.skip("neither the temporary folder nor the checkout is on a disk: there is nothing to prefetch from")
        path, plain = cold
        expected = skim.skim(path, points)
        _evict(path)
        skim.prefetch(path, points)
        before = _read_bytes()
        assert skim.skim(path, points) == expected
        assert _read_bytes() - before == 0, f"skim still read from the disk (without the prefetch: {plain} bytes)"


def test_prefetch_of_a_missing_small_or_unreadable_file_does_nothing(tmp_path: Path) -> None:
    skim.prefetch(tmp_path / "missing.jsonl")
    (tmp_path / "empty.jsonl").write_bytes(b"")
    skim.prefetch(tmp_path / "empty.jsonl")
    write(tmp_path / "small.jsonl", 10)
    skim.prefetch(tmp_path / "small.jsonl", points=500, tail_bytes=1 << 20)
    skim.prefetch(tmp_path)  # a directory


def test_a_day_long_worker_s_compact_metrics_are_skimmed_not_read_whole(tmp_path: Path) -> None:
    """A day of a worker's compact metrics is ~1.6 MB for 86,400 records: read whole, a 256-worker
    run decoded 22 million records before its curves were complete (over 60 s, 28 % shown)."""
    from core.run.compact import METRICS_CODEC
    from core.run.reader import _skimmed
    from tests.helpers.past_run import metrics_text

    path = tmp_path / "metrics.jsonl"
    encoder = METRICS_CODEC.encoder()
    path.write_text(encoder.encode([json.loads(line) for line in metrics_text(86_400).splitlines()]))
    assert _skimmed(path), f"{path.stat().st_size} bytes read whole"
    records, _end = skim.skim(path)
    # Its key frames (one a 100 records) and a 16 KB tail: a 64 KB tail alone was ~3,000 records.
    assert len(records) < 2_000 and records[0]["step"] == 1 and records[-1]["step"] == 86_400


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 3_000), tail_records=st.integers(1, 400), compact_format=st.booleans())
def test_a_tail_of_n_records_is_the_newest_n_lines_from_a_whole_record_on(
    n: int, tail_records: int, compact_format: bool
) -> None:
    """``tail_records`` keeps, of the tail, its newest lines from a line that starts a whole record:
    in the plain format exactly the last ``tail_records``; in the compact one from the first key frame
    among them (at most that many), or the last one before (at most one key frame's span more)."""
    from core.run.compact import KEY_EVERY, METRICS_CODEC
    from tests.helpers.past_run import metrics_text

    lines = [json.loads(line) for line in metrics_text(n).splitlines()]
    text = METRICS_CODEC.encoder().encode(lines) if compact_format else "".join(json.dumps(r) + "\n" for r in lines)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "metrics.jsonl"
        path.write_text(text)
        records, end = skim.skim(path, points=64, tail_bytes=1 << 30, tail_records=tail_records)
    steps = [r["step"] for r in records]
    assert steps == sorted(set(steps)) and end == len(text.encode())
    assert steps[-1] == n and steps[0] == 1  # the whole span: spaced records before the tail
    tail = list(itertools.takewhile(lambda s: s > n - tail_records, reversed(steps)))
    if compact_format:
        assert len(tail) >= min(n, tail_records) - KEY_EVERY  # from the first key frame among them
        assert len([s for s in steps if s > n - tail_records - KEY_EVERY]) <= tail_records + KEY_EVERY
    else:
        assert tail == list(range(n, max(n - tail_records, 0), -1))  # exactly the newest lines
