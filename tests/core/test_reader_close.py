"""A reader closed in the middle of a pass stops after the file it is reading, not after the pass:
the first pass over a day-long run skims every role's files and took seconds, and the window's
close of the run (a launch, another run opened, the window closed) waited for all of it."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from core.run.events import Event
from core.run.reader import RunReader
from tests.helpers.past_run import generate_run

WORKERS = 8


@pytest.mark.timeout(60)
def test_a_close_mid_pass_reads_no_other_file(tmp_path: Path) -> None:
    run = generate_run(tmp_path / "run", workers=WORKERS, seconds=600, hosts=1)
    reader = RunReader(run)
    holding, release = threading.Event(), threading.Event()
    metrics: list[str | None] = []
    output: list[str | None] = []

    def listener(event: Event) -> None:
        # The reader's thread is held inside its first pass, at the first worker's metrics.
        if event.kind == "metrics":
            metrics.append(event.role)
            if len(metrics) == 1:
                holding.set()
                release.wait(30)
        elif event.kind == "role_output":
            output.append(event.role)

    reader.subscribe(listener)
    reader.start()
    try:
        assert holding.wait(30), "the reader never published a worker's metrics"
        reader.close(timeout_s=0)  # asks it to stop, without waiting: the thread is held
        release.set()
        reader.close()
    finally:
        release.set()
        reader.close()
    assert metrics == [metrics[0]], f"read {len(metrics)} workers' metrics after the close"
    assert metrics[0] not in output  # not even the rest of that role's files
    # The same run read whole: every worker's metrics in one pass (what the close cut short).
    whole = RunReader(run)
    seen: list[str | None] = []
    done = threading.Event()

    def count(event: Event) -> None:
        if event.kind == "metrics":
            seen.append(event.role)
            if len(seen) == WORKERS:
                done.set()

    whole.subscribe(count)
    whole.start()
    try:
        assert done.wait(30), seen
    finally:
        whole.close()


@pytest.mark.timeout(60)
def test_a_close_while_another_thread_starts_the_reader_does_not_fail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The window starts a reader's thread off the GUI thread, and may close the reader (another
    run opened at once) on a third thread while that start is under way: the close does not
    raise, and the thread, once started, sees the stop and ends."""
    from core.run import reader as reader_module

    run = generate_run(tmp_path / "run", workers=1, seconds=60, hosts=0)
    starting, go_on = threading.Event(), threading.Event()

    class SlowToStart(threading.Thread):
        def start(self) -> None:
            starting.set()
            go_on.wait(10)
            super().start()

    class ReaderThreading:  # the threading module, as the reader module sees it
        Thread = SlowToStart

        def __getattr__(self, name: str) -> object:
            return getattr(threading, name)

    monkeypatch.setattr(reader_module, "threading", ReaderThreading())
    reader = RunReader(run)
    starter = threading.Thread(target=reader.start)
    starter.start()
    assert starting.wait(10)
    reader.close()  # the thread exists, not yet started
    go_on.set()
    starter.join(10)
    thread = reader._thread  # the reader's own thread, to see it end
    assert thread is not None
    thread.join(10)
    assert not thread.is_alive()
