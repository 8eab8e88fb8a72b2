"""Reading a large JSON-lines telemetry file at the resolution a view can show, tail first.

A day-long run's worker writes ~86,000 metrics lines (10 MB) and each host ~86,000 samples; a
view draws a few thousand points per series (the :class:`~core.views.series.Series` fold
everything older into buckets anyway). Parsing every line of every file before anything shows
takes minutes; :func:`skim` instead takes ``points`` lines evenly spaced over the file (by byte
offset, which for lines of similar length is evenly spaced in time or step) and every line of its
last ``tail_bytes`` whole, so the latest figures (step rate, the newest point) are exact. It
returns them in file order, with the offset just past the last complete line, from which a
:class:`~core.run.journal.JsonlTail` follows what is written next.

Only the bytes around the chosen offsets are read (``pread``), not the whole file: a host's day of
GPU samples is ~200 MB, and mapping it costs a page fault per page touched. A file whose offsets
lie close together (a worker's day of metrics, 10 MB) is read in a few large blocks instead.

A run from yesterday is no longer in the page cache, and each of those reads would wait on the disk
in turn (1,024 reads of a host's samples: ~0.1 ms each). :func:`prefetch` asks the kernel for all
of a file's ranges at once, before they are read, so the disk serves them together.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.run import compact

# A smaller file is read whole (quick, and every point shows). About the bytes of the lines a skim
# takes (2,048 plain lines of ~120 bytes): a compact file holds ~6x more records a byte, and with
# 2 MB a day-long worker's compact metrics (1.6 MB, 86,400 records) were read whole, 22 million
# records for a 256-worker run, where a skim reads a few thousand.
SKIM_FROM_BYTES = 256 * 1024
SKIM_POINTS = 2048  # lines taken evenly over the file; about a plot's width in pixels
SKIM_TAIL_BYTES = 64 * 1024  # read whole at the end: the newest few hundred lines
# The same for a compact file (~6x the records a byte): its 64 KB tail was ~3,000 records a worker,
# most of what opening a 256-worker day-long run decoded (59 s to full views; 27.5 s with this).
COMPACT_TAIL_BYTES = 16 * 1024
# A run of many workers shares one budget of records among its skimmed files (:func:`share`):
# 256 workers' curves share one plot, where a person sees their spread and a few highlighted ones,
# not 256 x 2,048 points; at most this few spaced points and tail lines a file, whatever the run's size.
MIN_POINTS = 128
MIN_TAIL_RECORDS = 64
DENSE_SPACING_BYTES = 16 * 1024  # offsets closer than this are served from blocks read whole
DENSE_BLOCK_BYTES = 1 << 20
WINDOW_BYTES = 4096  # read at each offset first; doubled while a line does not fit
PREFETCH_WINDOW_BYTES = 2 * WINDOW_BYTES  # a line of up to ~4 KB fits in what is asked for
PREFETCH_CALL_BYTES = 128 * 1024
COMPACT_MARK = b'{"' + compact.KEY_MARK.encode() + b'":'  # how a compact file's first key frame starts


@dataclass(frozen=True)
class Share:
    """What :func:`skim` takes of each file: ``points`` spaced over it, its last ``tail_records`` lines."""

    points: int
    tail_records: int


def share(budget_records: int, files: int, *, max_points: int = SKIM_POINTS) -> Share:
    """Each of ``files`` files' part of a run's ``budget_records``: half spaced over its span (at
    most ``max_points``, a plot's width), the rest its newest lines; never under :data:`MIN_POINTS`
    and :data:`MIN_TAIL_RECORDS`. A few files get what one always got (the tail is bounded by its
    bytes too); 256 workers get a quarter each of what 8 do."""
    each = budget_records // max(files, 1)
    points = max(MIN_POINTS, min(max_points, each // 2))
    return Share(points, max(MIN_TAIL_RECORDS, each - points))


def prefetch(path: Path, points: int = SKIM_POINTS, tail_bytes: int = SKIM_TAIL_BYTES) -> None:
    """Ask the kernel to start reading the bytes that :func:`skim` with the same arguments will
    read of ``path`` (``posix_fadvise(WILLNEED)``: nothing is read into Python, and it returns once
    the reads are queued). Call it for every file about to be skimmed, then skim them: on a cold page
    cache, opening a day-long run read 1.4 s from the disk one request at a time, 0.8 s this way.
    A hint: a file it cannot open, or a system without the call, is left alone."""
    advise = getattr(os, "posix_fadvise", None)
    if advise is None:
        return
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        size = os.fstat(fd).st_size
        stop = max(0, size - tail_bytes)
        spans = [(stop, size)]
        if stop > 0 and _dense(stop, points):
            spans.insert(0, (0, stop))
        elif stop > 0:
            spans[:0] = ((at, at + PREFETCH_WINDOW_BYTES) for at in (k * stop // points for k in range(points)))
        for begin, end in spans:
            # Linux reads at most the device's readahead size for one call (128 KiB by default).
            for at in range(begin, end, PREFETCH_CALL_BYTES):
                advise(fd, at, min(PREFETCH_CALL_BYTES, end - at), os.POSIX_FADV_WILLNEED)
    except OSError:
        pass
    finally:
        os.close(fd)


def _dense(stop: int, points: int) -> bool:
    return stop // max(points, 1) <= DENSE_SPACING_BYTES


def skim(
    path: Path,
    points: int = SKIM_POINTS,
    tail_bytes: int = SKIM_TAIL_BYTES,
    *,
    decoder: compact.Decoder | None = None,
    tail_records: int | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """The records of :func:`skim_parts`, spaced then tail, and the offset after them."""
    parts = skim_parts(path, points, tail_bytes, decoder=decoder, tail_records=tail_records)
    return parts.spaced + parts.tail, parts.end


@dataclass(frozen=True)
class Skimmed:
    """What :func:`skim_parts` read of a file: ``spaced`` records over its span, then every record of
    its ``tail``, and ``end``, the offset just past the last complete line."""

    spaced: list[dict[str, Any]]
    tail: list[dict[str, Any]]
    end: int


def skim_parts(
    path: Path,
    points: int = SKIM_POINTS,
    tail_bytes: int = SKIM_TAIL_BYTES,
    *,
    decoder: compact.Decoder | None = None,
    tail_records: int | None = None,
) -> Skimmed:
    """``points`` evenly spaced records of ``path``, all those of its last ``tail_bytes``, each in
    file order, and the offset after the last complete line; nothing and 0 for a missing or empty
    file. Unparsable lines are skipped. ``tail_records``: of the tail, only its last this many
    lines (a run of hundreds of workers shares a budget of records among them, see
    :func:`share`); what lies before them is spanned by the spaced records.

    In the compact format (:mod:`core.run.compact`) a spaced point is the first key frame at or
    after its offset (a delta cannot be read alone), and the tail is read from its first key frame
    on, through ``decoder`` (the follower's, which goes on from the returned offset with its state)."""
    decoder = decoder if decoder is not None else compact.Decoder()
    decoder.start_mid_file()
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return Skimmed([], [], 0)
    try:
        size = os.fstat(fd).st_size
        if tail_bytes == SKIM_TAIL_BYTES and os.pread(fd, len(COMPACT_MARK), 0) == COMPACT_MARK:
            tail_bytes = COMPACT_TAIL_BYTES
        tail_start = max(0, size - tail_bytes)
        tail = os.pread(fd, size - tail_start, tail_start)
        cut = tail.rfind(b"\n") + 1  # a half-written last line is left for the tail reader
        end = tail_start + cut
        if tail_start > 0:
            first = tail.find(b"\n", 0, cut) + 1
            tail_start, tail = tail_start + first, tail[first:cut]
        else:
            tail = tail[:cut]
        if tail_records is not None:
            first = _last_lines_start(tail, tail_records)
            tail_start, tail = tail_start + first, tail[first:]
        lines = _spaced_lines(fd, tail_start, points) if tail_start > 0 else []
    finally:
        os.close(fd)
    spaced = compact.decode(lines, compact.Decoder(mid_file=True))[0]  # each spaced line alone: key frames, old records
    return Skimmed(spaced, compact.decode(tail.split(b"\n"), decoder)[0], end)


def _last_lines_start(tail: bytes, lines: int) -> int:
    """Where the last ``lines`` lines of ``tail`` (whole lines) start: at a line that starts an
    object (a key frame, or a plain record), since a compact delta cannot be read without the lines
    before it: the first such line among them, else the last one before them; 0 when ``tail``
    holds no more lines than that."""
    if lines <= 0:
        return len(tail)
    at = len(tail) - 1  # the newline that ends the last line
    for _ in range(lines):
        at = tail.rfind(b"\n", 0, at)
        if at < 0:
            return 0
    start = at + 1
    if tail[start : start + 1] == b"{":
        return start
    frame = tail.find(b"\n{", start)
    if frame < 0:
        frame = tail.rfind(b"\n{", 0, start)
    return frame + 1 if frame >= 0 else 0


def _spaced_lines(fd: int, stop: int, points: int) -> list[bytes]:
    """The first complete line at or after each of ``points`` offsets evenly spaced in [0, stop).

    Where the offsets are close (a worker's metrics: one every ~5 KB), the file is read in blocks of
    ``DENSE_BLOCK_BYTES`` that serve many offsets each; else one read per offset. Each read lets
    the GUI thread take the GIL, and the reader waits to get it back: 2,048 small reads per file
    were most of opening a day-long run."""
    lines: list[bytes] = []
    last_start = -1
    window = WINDOW_BYTES
    dense = _dense(stop, points)
    block_at, block = 0, b""
    for k in range(points):
        at = k * stop // points
        while True:
            want = min(window, stop - at)
            if dense:
                if at < block_at or at + want > block_at + len(block):
                    block_at, block = at, os.pread(fd, min(max(want, DENSE_BLOCK_BYTES), stop - at), at)
                data, lo = block, at - block_at
                hi = min(lo + want, len(block))
            else:
                data, lo = os.pread(fd, want, at), 0
                hi = len(data)
            if at == 0 and data[lo : lo + 1] == b"{":
                begin = lo
            else:
                # A line that starts an object: a whole record (a key frame, or the plain format's),
                # never a compact delta (an array), which needs the lines before it.
                newline = data.find(b"\n{", lo, hi)
                begin = newline + 1 if newline >= 0 else -1
            finish = data.find(b"\n", begin, hi) if begin >= 0 else -1  # -1: no whole line here
            if finish >= 0 or at + (hi - lo) >= stop or hi - lo < want:  # found, or the end (or a shrunk file)
                break
            window *= 2  # lines longer than the window: read more at once from now on
        if finish < 0:
            continue  # no whole line starts in what is left before the tail
        start = at + begin - lo
        if start <= last_start:
            continue
        lines.append(data[begin:finish])
        last_start = start
    return lines
