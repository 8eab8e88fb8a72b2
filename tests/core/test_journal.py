"""The state-only journal, streaming reads, old run directories, and one status live and replayed."""

from __future__ import annotations

import dataclasses
import json
import shutil
import threading
from pathlib import Path

import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from core.cluster.spec import load
from core.controller.controller import Controller
from core.run import journal
from core.run.events import Event
from core.run.reader import RunReader
from core.run.rundir import RunDir
from core.run.status import ClusterStatus
from tests.helpers.clusters import light_cluster
from tests.helpers.project import ROOT
from tests.helpers.waits import wait_for

TRAINERS = ROOT / "resources" / "trainers"
OLD_RUN = ROOT / "tests" / "fixtures" / "run_c23e87e"  # written by commit c23e87e (telemetry journalled)


# ---------------------------------------------------------------------------- streaming reads


def test_tail_keeps_a_half_written_line_for_the_next_read(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    tail = journal.JsonlTail(path)
    assert tail.read() == []  # not there yet: empty, not an error
    path.write_bytes(b'{"a": 1}\n{"b": 2')
    assert tail.read() == [{"a": 1}]
    with open(path, "ab") as f:
        f.write(b'}\nnot json\n[1, 2]\n{"c": 3}\n')
    assert tail.read() == [{"b": 2}, {"c": 3}]
    assert tail.skipped == 2  # the damaged line and the non-object, counted, not raised
    assert tail.at_end()


def test_iter_jsonl_streams_in_chunks_smaller_than_a_line(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    records = [{"i": i, "pad": "x" * (i % 50)} for i in range(500)]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert list(journal.iter_jsonl(path, chunk_bytes=7)) == records


# ---------------------------------------------------------------------------- old run directories


def test_a_run_directory_written_before_the_state_only_journal_opens_whole(tmp_path: Path) -> None:
    run = tmp_path / "old"
    shutil.copytree(OLD_RUN, run)
    old_kinds = [json.loads(line)["kind"] for line in (run / "events.jsonl").read_text().splitlines()]
    assert "metrics" in old_kinds and "sample" in old_kinds  # it really is an old-style journal
    reader = RunReader(run)
    events: list[Event] = []
    lock = threading.Lock()

    def keep(event: Event) -> None:
        with lock:
            events.append(event)

    reader.subscribe(keep)
    reader.start()
    try:
        wait_for(lambda: all(r.step == 40 for r in reader.status().roles if r.job == "worker"), 30, "40 steps")
        status = reader.status()
    finally:
        reader.close()
    assert str(status.phase) == "done" and status.result == "succeeded"
    assert {r.role: str(r.state) for r in status.roles} == {
        "ps:0": "stopped",
        "worker:0": "succeeded",
        "worker:1": "succeeded",
    }
    with lock:
        for worker in ("worker:0", "worker:1"):
            steps = [s["step"] for e in events if e.kind == "metrics" and e.role == worker for s in e.payload.samples]
            assert steps == list(range(1, 41))  # from metrics.jsonl, once: the journal's copies are skipped
        replayed = [e.payload.state for e in events if e.kind == "role_state"]
    journalled = [
        json.loads(x)["state"] for x in (run / "events.jsonl").read_text().splitlines() if '"role_state"' in x
    ]
    assert replayed == journalled


# ---------------------------------------------------------------------------- a real run


def test_journal_keeps_state_and_status_replays_field_by_field(tmp_path: Path) -> None:
    spec, problems = load(light_cluster(tmp_path, workers=2, steps=60, rate=30.0))
    assert spec is not None, problems
    run = RunDir.create(spec, root=tmp_path / "runs")
    controller = Controller(spec, run)
    controller.start()
    try:
        assert controller.wait(90), "the light cluster did not finish"
    finally:
        controller.close()
    live = controller.status()
    assert live.result == "succeeded"
    assert all(r.step == 60 and r.loss_source == "output" for r in live.roles if r.job == "worker")

    kinds = {r["kind"] for r in journal.iter_jsonl(run.path / "events.jsonl")}
    assert kinds <= {"role_state", "role_pid", "cluster_state", "host_state", "gpu_status", "warning", "command"}
    assert {"role_state", "cluster_state", "command"} <= kinds
    assert (run.path / "telemetry").is_dir() and any((run.path / "telemetry").glob("samples-*.jsonl"))
    for worker in ("worker-0", "worker-1"):
        steps = [r["step"] for r in journal.iter_jsonl(run.path / "roles" / worker / "metrics.jsonl")]
        assert steps == list(range(1, 61))

    reader = RunReader(run.path)
    reader.start()
    try:
        wait_for(lambda: _same(reader.status(), live), 30, "the replay to catch up")
    except AssertionError:
        pass  # the field-by-field comparison below says what differs
    finally:
        reader.close()
    replayed = reader.status()
    assert (replayed.phase, replayed.result, replayed.reason) == (live.phase, live.result, live.reason)
    for a, b in zip(live.roles, replayed.roles, strict=True):
        for f in dataclasses.fields(a):
            assert getattr(a, f.name) == getattr(b, f.name), (a.role, f.name, getattr(a, f.name), getattr(b, f.name))


def _same(a: ClusterStatus, b: ClusterStatus) -> bool:
    return a == b


_line_pieces = st.one_of(
    st.dictionaries(st.text(max_size=5), st.one_of(st.integers(), st.floats(), st.text(max_size=8)), max_size=3).map(
        lambda d: json.dumps(d, ensure_ascii=False).encode()
    ),
    st.sampled_from(
        [
            b"",
            b"  ",
            b"[1, 2]",
            b"3",
            b'"x"',
            b" {}",
            b"{} ",
            b"{}\r",
            b'{"a":',
            b"1}",
            b"{}{}",
            b'{"a":"},{"}',
            b"\xff{}",
            '{"a": "\u00e9"}'.encode("utf-16"),
            b"\xef\xbb\xbf{}",
            b'{"a":[1,',
            b"2]}",
            b"{\x00}",
            b"null",
            b'{"loss": NaN, "x": -Infinity}',
            b'{"step": 123456789012345678901234567890}',
            b'{"v": 1e400, "w": -0.0, "u": 5e-324}',
            b'{"s": "\\ud800"}',
            b'{"a": 1, "a": 2}',
            b'{"a": 0.1000000000000000055511151231257827}',
        ]
    ),
    st.binary(max_size=12),
)


def _as_orjson_ints(value: object) -> object:
    """``value`` with its integers beyond 64 bits (signed below, unsigned above) made floats."""
    if isinstance(value, dict):
        return {k: _as_orjson_ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_orjson_ints(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**64:
        return float(value)
    return value


def _records_of(line: bytes) -> list[dict[str, object]]:
    return journal._decode_each([line])[0]


def _orjson_reads(line: bytes) -> bool:
    try:
        orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return True


@pytest.mark.parametrize("fast", [True, False], ids=["orjson", "one-string"])
@given(lines=st.lists(_line_pieces, max_size=30))
@example(lines=[b'{"": Infinity, "0": -9223372036854775809}'])  # found on a loaded run: not orjson's
@settings(max_examples=300, deadline=None)
def test_decoding_lines_together_is_decoding_each(fast: bool, lines: list[bytes]) -> None:
    """Both fast decodes (orjson line by line, and json over one string where orjson is missing)
    keep exactly what json.loads on each line keeps, damage, NaN and infinities and all; only an
    integer beyond 64 bits comes back from orjson as the nearest float."""
    assert journal._fast_loads is not None, "orjson is in requirements.lock: the fast path must be tested"
    lines = [piece for line in lines for piece in line.split(b"\n")]  # lines never hold a newline
    saved = journal._fast_loads
    journal._fast_loads = saved if fast else None
    try:
        expected = journal._decode_each(lines)
        if fast:
            # A line orjson reads comes back with its integers beyond 64 bits as floats; a line it
            # refuses (an infinity beside such an integer, once) is json.loads's, integers exact.
            records = [_as_orjson_ints(r) if _orjson_reads(line) else r for line in lines for r in _records_of(line)]
            expected = (records, expected[1])
        assert repr(journal.decode_lines(lines)) == repr(expected)
    finally:
        journal._fast_loads = saved
