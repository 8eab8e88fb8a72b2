"""Opening a past run asks the disk for every file the reader will skim before it skims the first:
a run from yesterday is out of the page cache, and the reads of one file after another each waited
for the disk (issue 25: 1.4 s of a cold open, 0.8 s with the prefetch; see core/run/skim.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from core.run import reader as reader_module
from core.run import skim
from core.run.reader import RunReader
from tests.helpers.past_run import generate_run
from tests.helpers.waits import wait_for


def test_every_skimmed_file_is_prefetched_before_the_first_is_skimmed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = generate_run(tmp_path / "run", workers=3, seconds=3_000, hosts=2)
    monkeypatch.setattr(skim, "SKIM_FROM_BYTES", 64 * 1024)  # these small files are skimmed too
    calls: list[tuple[str, Path, int]] = []  # what was called, on which file, for how many points
    real_prefetch, real_skim = skim.prefetch, skim.skim_parts

    def prefetch(path: Path, points: int = skim.SKIM_POINTS) -> None:
        calls.append(("prefetch", path, points))
        real_prefetch(path, points)

    def skim_(path: Path, points: int = skim.SKIM_POINTS, **kwargs: Any) -> object:  # kwargs: the follower's decoder
        calls.append(("skim", path, points))
        return real_skim(path, points, **kwargs)

    monkeypatch.setattr(skim, "prefetch", prefetch)
    monkeypatch.setattr(skim, "skim_parts", skim_)  # what the reader calls
    large = {p for p in run.rglob("*.jsonl") if p.stat().st_size >= skim.SKIM_FROM_BYTES and p.name != "events.jsonl"}
    assert len(large) == 3 + 2, sorted(large)  # each worker's metrics, each host's samples
    reader = RunReader(run)
    reader.start()
    try:
        wait_for(lambda: {c[1] for c in calls if c[0] == "skim"} >= large, 60, "every large file to be skimmed")
    finally:
        reader.close()
    first_skim = next(i for i, c in enumerate(calls) if c[0] == "skim")
    prefetched = [c[1:] for c in calls[:first_skim] if c[0] == "prefetch"]
    assert {path for path, _ in prefetched} == large and len(prefetched) == len(large)
    skimmed = [c[1:] for c in calls if c[0] == "skim"]
    assert prefetched == skimmed, "the same files, at the same points, in the order they are read"
    assert {points for path, points in skimmed if path.parent.name == "telemetry"} == {reader_module.SKIM_SAMPLES}
