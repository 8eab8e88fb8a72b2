"""A reader that has read a run to its end checks each file with a stat per pass and rebuilds no
status when nothing came: every pass (twice a second) opened and read each role's metrics, scalars,
the journal and the hosts' samples, and rebuilt every role's status, unchanged. Over a 256-worker
run that was ~40 ms of the reader's CPU a pass, taken while the window took the run in."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.run import journal
from core.run import reader as reader_module
from core.run.reader import RunReader
from core.run.role_view import StatusBoard
from tests.helpers.past_run import generate_run
from tests.helpers.waits import wait_for

WORKERS, SECONDS = 16, 600


@pytest.mark.timeout(300)
def test_a_run_read_to_its_end_is_not_read_again_nor_its_status_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = generate_run(tmp_path / "run", workers=WORKERS, seconds=SECONDS, hosts=2, compact=True)
    monkeypatch.setattr(reader_module, "IDLE_STATUS_S", 3600.0)  # only the figures that age would ask
    counts = {"reads": 0, "refreshes": 0, "passes": 0}
    real_read, real_refresh, real_info = journal.JsonlTail.read, StatusBoard.refresh, RunReader._read_info

    def read(self: journal.JsonlTail, max_bytes: int = journal.CHUNK_BYTES) -> list[dict[str, object]]:
        counts["reads"] += 1
        return real_read(self, max_bytes)

    def refresh(self: StatusBoard, now: float) -> None:
        counts["refreshes"] += 1
        real_refresh(self, now)

    def info(self: RunReader) -> None:
        counts["passes"] += 1  # the first thing each pass does
        real_info(self)

    monkeypatch.setattr(journal.JsonlTail, "read", read)
    monkeypatch.setattr(StatusBoard, "refresh", refresh)
    monkeypatch.setattr(RunReader, "_read_info", info)
    reader = RunReader(run)
    reader.start()
    try:

        def read_to_end() -> bool:
            tails = [reader._events, *reader._samples.values(), *(r.metrics for r in reader._roles.values())]
            return len(reader._samples) == 2 and all(t.at_end() for t in tails)

        wait_for(read_to_end, 120, "every file read to its end")
        wait_for(lambda: {r.step for r in reader.status().roles if r.job == "worker"} == {SECONDS}, 60, "the status")
        start = dict(counts)
        wait_for(lambda: counts["passes"] >= start["passes"] + 4, 60, "four more passes over the run")
        passes = counts["passes"] - start["passes"]
    finally:
        reader.close()
    # Was 2 per role and pass (metrics, scalars), one per host's samples, one for the journal: 37 a pass;
    # and a status rebuilt each pass.
    assert counts["reads"] - start["reads"] == 0, (counts, start, passes)
    assert counts["refreshes"] - start["refreshes"] <= 1, (counts, start, passes)  # the pass under way
