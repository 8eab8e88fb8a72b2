"""Skimming a large JSON-lines file: evenly spaced lines over its span, its tail whole, and the
offset from which a tail reader follows what is written next."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

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
