"""The compact encoding of telemetry files (core/run/compact.py): what is written reads back as the
records rounded, from any offset, beside the old format, and a fraction of its size."""

from __future__ import annotations

import collections
import itertools
import json
import math
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.cluster.spec import load
from core.run import compact, index, journal
from core.run.csv_export import export_csv, read_csv
from core.run.rundir import RunDir
from core.run.skim import skim
from tests.helpers.compact_run import compact_copy, telemetry_files
from tests.helpers.project import ROOT

# A 64-worker run recorded from today's writer (commit d294eee, `bench_scale`-like light workers, 8
# loopback hosts of 8 fake GPUs): the old format, byte for byte.
RECORDED = ROOT / "tests" / "fixtures" / "run_scale64_9ff0.tar.xz"


def recorded_run(tmp_path: Path) -> Path:
    with tarfile.open(RECORDED) as tar:
        tar.extractall(tmp_path, filter="data")
    return tmp_path / "run"


def same(a: Any, b: Any) -> bool:
    """Equal as JSON: NaN equals NaN, 1 differs from 1.0 and from True."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


# ---------------------------------------------------------------------------- round trip

SCALAR = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(1 << 62), 1 << 62),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),  # unicode, lone surrogates included
)
VALUE = st.recursive(
    SCALAR,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(["a", "b", "é", "~", "0", "-"]), inner, max_size=4)
    ),
    max_leaves=12,
)
TIME = st.one_of(st.floats(1.7e9, 1.8e9), st.none(), st.integers(0, 10), st.just(math.nan))
METRIC = st.fixed_dictionaries(
    {
        "t": TIME,
        "step": st.one_of(st.integers(-5, 1 << 40), st.none(), st.floats(0, 10)),  # restarts: steps go back
        "loss": st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.none(), st.integers(-3, 3)),
        "step_time_s": st.one_of(st.none(), st.floats(0, 10)),
        "steps_per_sec": st.one_of(st.none(), st.floats(0, 100)),
        "extra": st.dictionaries(st.text(max_size=5), VALUE, max_size=3),
        "source": st.sampled_from(["classic", "keras", "user", "ünï"]),
    },
    optional={"epoch": VALUE, "~": VALUE},  # a field some records have and others not
)
GPU = st.fixed_dictionaries(
    {
        "index": st.integers(0, 7),
        "name": st.just("NVIDIA H100 80GB HBM3"),
        "utilization_gpu_percent": st.integers(0, 100),
        "memory_used_bytes": st.integers(0, 80 << 30),
        "power_w": st.one_of(st.floats(0, 700), st.none()),
        "processes": st.lists(
            st.fixed_dictionaries({"pid": st.integers(1, 99999), "role": st.text(max_size=9)}), max_size=3
        ),
    }
)
SAMPLE = st.fixed_dictionaries(
    {
        "t": TIME,
        "host": st.sampled_from(["127.0.0.1", "gpu-1"]),
        "figures": st.one_of(
            st.none(), st.dictionaries(st.sampled_from(["load1", "cpu_percent", "memory_used_bytes"]), SCALAR)
        ),
        "roles": st.dictionaries(
            st.sampled_from(["ps:0", "worker:0", "worker:1"]),
            st.dictionaries(st.sampled_from(["alive", "pid", "cpu_percent"]), SCALAR),
        ),
        "gpus": st.lists(GPU, max_size=3),
    }
)


@st.composite
def streams(draw: st.DrawFn, record: st.SearchStrategy[dict[str, Any]]) -> list[dict[str, Any]]:
    """Records that mostly repeat the one before with a few changes, as telemetry does."""
    first = draw(record)
    out = [first]
    for _ in range(draw(st.integers(0, 30))):
        if draw(st.booleans()):
            out.append(draw(record))
        else:
            step = out[-1].get("step")
            changed = dict(out[-1])
            if isinstance(changed.get("t"), float):
                changed["t"] = changed["t"] + draw(st.floats(0, 5))
            if type(step) is int:
                changed["step"] = step + draw(st.integers(-3, 3))
            out.append(changed)
    return out


CODECS = {"metrics": compact.METRICS_CODEC, "samples": compact.SAMPLE_CODEC, "scalars": compact.SCALARS_CODEC}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    kind=st.sampled_from(["metrics", "samples"]),
    key_every=st.integers(1, 7),
    chunk=st.integers(1, 300),
)
def test_encode_then_decode_gives_the_records_rounded(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject, kind: str, key_every: int, chunk: int
) -> None:
    """Nulls, extra and missing fields, NaN and infinities, steps going back, unicode: each record
    reads back as :func:`compact.canonical_record` makes it, through the file reader in any chunks."""
    records = data.draw(streams(METRIC if kind == "metrics" else SAMPLE))
    codec = CODECS[kind]
    encoder = compact.Encoder(time_key=codec.time_key, cols=codec.cols, key_every=key_every)
    text = "".join(encoder.encode([r]) for r in records)
    expected = [compact.canonical_record(r, codec.time_key) for r in records]
    path = tmp_path_factory.mktemp("rt") / f"{kind}.jsonl"
    path.write_text(text, encoding="utf-8")
    tail = journal.JsonlTail(path)
    got: list[dict[str, Any]] = []
    while True:
        got.extend(tail.read(chunk))
        if tail.at_end():
            break
    assert same(got, expected) and tail.skipped == 0


class _GeneralOnly(compact.Encoder):
    """The encoder without its one-pass path for a record with the last one's keys."""

    def _flat_delta(self, record: dict[str, Any], prev: dict[str, Any]) -> str | None:
        return None


STEP_RECORD = st.fixed_dictionaries(
    {
        "t": st.one_of(st.floats(1.7e9, 1.8e9), st.just(math.nan), st.none()),
        "step": st.one_of(st.integers(-5, 1 << 60), st.none(), st.floats(0, 10), st.booleans()),
        "loss": st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.none(), st.integers(-3, 3)),
        "step_time_s": st.one_of(st.none(), st.floats(0, 10), st.text(max_size=2)),
        "steps_per_sec": st.one_of(st.none(), st.floats(0, 100)),
        "extra": st.one_of(st.just({}), st.dictionaries(st.text(max_size=3), SCALAR, max_size=2), st.none()),
        "source": st.one_of(st.sampled_from(["classic", "keras"]), st.just({}), st.integers(-(1 << 62), 1 << 62)),
    },
    optional={"epoch": st.integers(0, 3)},
)


@settings(max_examples=300, deadline=None)
@given(
    data=st.data(),
    kind=st.sampled_from(["step", "metrics", "samples"]),
    key_every=st.integers(1, 40),
)
def test_the_one_pass_path_writes_the_lines_the_general_path_writes(
    data: st.DataObject, kind: str, key_every: int
) -> None:
    """Same keys or not, ints far apart, NaN, empty or full dicts, values changing type: byte for
    byte the lines of the general path, so every reader reads what it always read."""
    records = data.draw(streams({"step": STEP_RECORD, "metrics": METRIC, "samples": SAMPLE}[kind]))
    codec = compact.SAMPLE_CODEC if kind == "samples" else compact.METRICS_CODEC
    fast = compact.Encoder(time_key=codec.time_key, cols=codec.cols, key_every=key_every)
    general = _GeneralOnly(time_key=codec.time_key, cols=codec.cols, key_every=key_every)
    for r in records:
        assert fast.encode([r]) == general.encode([r])


def test_a_step_record_with_the_last_one_s_keys_skips_the_general_diff(monkeypatch: pytest.MonkeyPatch) -> None:
    """A metrics file is nearly all step records with the keys of the one before; each is encoded
    in one pass, not through the general path's canonical copy and recursive diff (at 256
    simulated workers those were ~20 % of the controller's thread)."""
    calls = {"diff": 0, "canonical": 0}
    diff, canonical_record = compact._diff, compact._canonical_record

    def counted_diff(*args: Any) -> Any:
        calls["diff"] += 1
        return diff(*args)

    def counted_canonical(*args: Any) -> Any:
        calls["canonical"] += 1
        return canonical_record(*args)

    monkeypatch.setattr(compact, "_diff", counted_diff)
    monkeypatch.setattr(compact, "_canonical_record", counted_canonical)
    encoder = compact.METRICS_CODEC.encoder()
    records = _step_records(1000, step_time_s=0.1)
    text = encoder.encode(records)
    key_frames = sum(line.startswith("{") for line in text.splitlines())
    assert key_frames == 10
    assert calls == {"diff": 0, "canonical": key_frames}, calls


def test_rounding_keeps_what_is_shown() -> None:
    record = {"t": 1795835930.6924, "step": 7, "loss": 0.123456789, "x": 3.26025390625, "n": 12345678901}
    assert compact.canonical_record(record, "t") == {
        "t": 1795835930.692,
        "step": 7,
        "loss": 0.123457,
        "x": 3.26025,
        "n": 12345678901,
    }


# ---------------------------------------------------------------------------- starting anywhere


def metric_stream(n: int, t0: float = 1_795_000_000.0) -> list[dict[str, Any]]:
    return [
        {"t": t0 + 0.1 * i, "step": i + 1, "loss": round(2.0 / (1 + i / 100), 6), "step_time_s": None,
         "steps_per_sec": None, "extra": {}, "source": "classic"}
        for i in range(n)
    ]  # fmt: skip


@pytest.mark.parametrize("offset_fraction", [0.0, 0.13, 0.5, 0.77, 0.999])
def test_a_reader_that_starts_mid_file_resyncs_at_the_next_key_frame(tmp_path: Path, offset_fraction: float) -> None:
    records = metric_stream(1000)
    path = tmp_path / "metrics.jsonl"
    compact.encode_file(records, path, codec=compact.METRICS_CODEC)
    data = path.read_bytes()
    offset = int(len(data) * offset_fraction)
    tail = journal.JsonlTail(path, offset)
    got = list(journal.iter_jsonl(path)) if offset == 0 else [r for batch in iter(tail.read, []) for r in batch]
    # The first key frame at or after the offset: a line that starts with {"~".
    at = 0 if offset == 0 else data.find(b'\n{"~"', offset) + 1
    first = data.count(b"\n", 0, at) if at > 0 or offset == 0 else len(records)  # its record's position
    expected = [compact.canonical_record(r, "t") for r in records[first:]]
    assert got == expected and tail.skipped <= 1  # the line cut by the offset, as in the old format
    assert first - int(1000 * offset_fraction) <= compact.KEY_EVERY  # lost at most a key frame's span


def test_a_damaged_line_drops_the_deltas_after_it_until_the_next_key_frame(tmp_path: Path) -> None:
    records = metric_stream(250)
    path = tmp_path / "metrics.jsonl"
    compact.encode_file(records, path, codec=compact.METRICS_CODEC)
    lines = path.read_bytes().split(b"\n")
    lines[10] = b"[12, damaged"
    path.write_bytes(b"\n".join(lines))
    tail = journal.JsonlTail(path)
    got = tail.read()
    steps = [r["step"] for r in got]
    # Record 10 is lost, and the deltas up to the key frame at record 100: never a wrong value.
    assert steps == [*range(1, 11), *range(101, 251)]
    assert all(r == compact.canonical_record(records[r["step"] - 1], "t") for r in got)
    assert tail.skipped == 90


def test_a_skimmed_compact_file_gives_key_frames_then_an_exact_tail_and_the_follower_goes_on(tmp_path: Path) -> None:
    records = metric_stream(200_000)  # ~3.4 MB compact: past the skim threshold
    path = tmp_path / "metrics.jsonl"
    compact.encode_file(records, path, codec=compact.METRICS_CODEC)
    tail = journal.JsonlTail(path)
    skimmed, tail.offset = skim(path, points=500, decoder=tail.decoder)
    steps = [r["step"] for r in skimmed]
    assert steps == sorted(steps) and len(set(steps)) == len(steps) and len(steps) > 500
    assert all(r == compact.canonical_record(records[r["step"] - 1], "t") for r in skimmed)
    assert steps[-1] == 200_000  # the tail is exact to the last record
    encoder = compact.METRICS_CODEC.encoder()
    encoder.encode(records)  # the writer's state at the end of the file
    with open(path, "a") as f:
        f.write(encoder.encode(metric_stream(3, t0=1_795_020_000.0)))
    assert [r["step"] for r in tail.read()] == [1, 2, 3]  # deltas after the skim, read with its state


# ---------------------------------------------------------------------------- the writer


def test_a_reopened_file_starts_with_a_key_frame_after_a_half_written_line(tmp_path: Path) -> None:
    """A writer killed mid-line: the next process's key frame is not glued to the half line."""
    path = tmp_path / "metrics.jsonl"
    first = metric_stream(150)
    compact.encode_file(first, path, codec=compact.METRICS_CODEC)
    with open(path, "ab") as f:
        f.write(b"[100,1,1.2")  # half a line
    run = RunDir(tmp_path)
    run._append_compact("write metrics", path, metric_stream(5, t0=1_795_100_000.0), codec=compact.METRICS_CODEC)
    got = list(journal.iter_jsonl(path))
    assert [r["step"] for r in got] == [*range(1, 151), *range(1, 6)]
    assert run.write_error is None


def test_after_a_failed_write_the_next_line_is_a_key_frame(tmp_path: Path) -> None:
    """Disk full: a delta must never rest on records that did not reach the file."""
    folder = tmp_path / "roles"
    folder.mkdir()
    path = folder / "metrics.jsonl"
    run = RunDir(tmp_path)
    records = metric_stream(30)
    run._append_compact("write metrics", path, records[:10], codec=compact.METRICS_CODEC)
    saved = path.read_bytes()
    # A directory where the file was: the append fails with an OSError, as on a full disk (as root,
    # a read-only file would still take the write).
    path.unlink()
    path.mkdir()
    run._append_compact("write metrics", path, records[10:20], codec=compact.METRICS_CODEC)
    assert run.write_error is not None and "write metrics" in run.write_error
    path.rmdir()
    path.write_bytes(saved)
    run._append_compact("write metrics", path, records[20:], codec=compact.METRICS_CODEC)
    got = list(journal.iter_jsonl(path))
    assert [r["step"] for r in got] == [*range(1, 11), *range(21, 31)]
    assert all(r == compact.canonical_record(records[r["step"] - 1], "t") for r in got)


def test_the_writer_uses_under_a_quarter_of_the_old_bytes_per_metrics_record(tmp_path: Path) -> None:
    """Fails on d294eee: ~115 bytes a step line there (every key, every null, every time)."""
    run = RunDir(tmp_path)
    (tmp_path / "roles").mkdir()
    spec, problems = load(ROOT / "tests" / "fixtures" / "run_c23e87e" / "cluster.toml")
    assert spec is not None, problems
    task = next(t for t in spec.tasks() if t.job == "worker")
    records = metric_stream(36_000)  # a worker's hour at 10 lines a second
    for start in range(0, len(records), 8):
        run.append_metrics(task, records[start : start + 8])
    path = run.role_dir(task) / "metrics.jsonl"
    per_record = path.stat().st_size / len(records)
    old_per_record = sum(len(journal.json_line(r)) for r in records) / len(records)
    assert per_record <= old_per_record / 4, (per_record, old_per_record)
    assert list(journal.iter_jsonl(path)) == [compact.canonical_record(r, "t") for r in records]


# ---------------------------------------------------------------------------- the old format, and both


def test_the_old_format_is_read_exactly_as_each_line_decodes(tmp_path: Path) -> None:
    run = recorded_run(tmp_path)
    for path in telemetry_files(run):
        lines = path.read_bytes().splitlines()
        assert list(journal.iter_jsonl(path)) == [json.loads(line) for line in lines if line.strip()]


def test_a_recorded_64_worker_run_re_encoded_is_under_a_quarter_of_its_bytes(tmp_path: Path) -> None:
    """Measured 8.7 % (metrics 16 %, samples 7 %); asserted at 25 %."""
    old = recorded_run(tmp_path / "old")
    new = compact_copy(old, tmp_path / "new")
    old_bytes = sum(p.stat().st_size for p in telemetry_files(old))
    new_bytes = sum(p.stat().st_size for p in telemetry_files(new))
    assert new_bytes <= old_bytes / 4, (new_bytes, old_bytes)


def _step_records(count: int, *, step_time_s: float | None) -> list[dict[str, Any]]:
    """``count`` step records of one role, 0.1 s apart, with the same keys each: the fast path's case."""
    return [
        {
            "t": 1.8e9 + n / 10,
            "step": n,
            "loss": 1 / (n + 1),
            "step_time_s": step_time_s,
            "steps_per_sec": None,
            "extra": {},
            "source": "classic",
        }
        for n in range(count)
    ]


def _cells(rows: list[dict[str, str]]) -> list[list[Any]]:
    """CSV rows with numbers as numbers rounded to 6 significant digits (what the compact format keeps)."""

    def cell(text: str) -> Any:
        try:
            value = float(text)
        except ValueError:
            return text
        return float(f"{value:.6g}") if math.isfinite(value) else text

    return [[cell(v) for v in row.values()] for row in rows]


def test_csv_export_and_runs_give_the_same_figures_for_both_formats_of_a_run(tmp_path: Path) -> None:
    old = recorded_run(tmp_path / "old")
    new = compact_copy(old, tmp_path / "new")
    assert any(p.read_bytes().startswith(b'{"~":1') for p in telemetry_files(new))
    exported = {}
    for name, run in (("old", old), ("new", new)):
        result = export_csv(run, tmp_path / f"csv-{name}")
        assert result.skipped_lines == 0
        exported[name] = {f: _cells(read_csv(tmp_path / f"csv-{name}" / f)) for f in result.rows}
    assert exported["old"].keys() == exported["new"].keys()
    for name, rows in exported["old"].items():
        assert rows == exported["new"][name], name
    assert sum(len(rows) for rows in exported["new"].values()) > 10_000
    summaries = [index.build(run) for run in (old, new)]
    for summary in summaries:
        for field in ("key", "id", "checkpoints"):  # the folder's own: its name and where it looked
            summary.pop(field)
    assert summaries[0] == summaries[1]
    assert summaries[0]["last_loss"] is not None and summaries[0]["role_figures"]["worker:5"]["steps"] > 100


def test_a_past_run_in_both_formats_opens_the_same_in_the_reader(tmp_path: Path) -> None:
    """core/run/reader.py: the same metrics and samples events for each format."""
    from core.run.events import Metrics, Sample
    from core.run.reader import RunReader

    old = recorded_run(tmp_path / "old")
    new = compact_copy(old, tmp_path / "new")
    seen: dict[str, tuple[int, int, float]] = {}
    for name, path in (("old", old), ("new", new)):
        reader = RunReader(path)
        metrics: list[dict[str, Any]] = []
        samples: list[Any] = []
        reader.subscribe(
            lambda e, m=metrics, s=samples: (
                m.extend(e.payload.samples)
                if isinstance(e.payload, Metrics)
                else s.append(e)
                if isinstance(e.payload, Sample)
                else None
            )
        )
        for _ in range(10):  # passes, as the reader's thread makes them, until every file is read
            reader._read_samples()
            for role in reader._roles.values():
                reader._read_telemetry(role)
        seen[name] = (len(metrics), len(samples), sum(m["loss"] for m in metrics))
    assert seen["old"][:2] == seen["new"][:2] and seen["old"][0] > 7000
    assert seen["old"][2] == pytest.approx(seen["new"][2], rel=1e-6)


def test_a_step_record_s_delta_rounds_its_loss_not_its_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """A delta writes the time as milliseconds: rounding it to 6 digits first (a float formatted
    and parsed back, ~2,500 times a second at 256 workers) was thrown away, and at 6 digits a
    time of 1.8e9 s would lose its seconds. The loss is rounded to 6 digits."""
    encoder = compact.METRICS_CODEC.encoder()
    records = _step_records(100, step_time_s=None)
    encoder.encode(records[:1])  # the key frame: every float canonical, as before
    deltas = [json.loads(line) for line in encoder.encode(records[1:]).splitlines()]
    assert [d[2] for d in deltas] == [compact._round(r["loss"]) for r in records[1:]]
    ms = [round(r["t"] * 1000) for r in records]
    assert [d[0] for d in deltas] == [b - a for a, b in itertools.pairwise(ms)]


def test_a_step_record_with_the_last_one_s_keys_costs_one_python_call() -> None:
    """The one-pass path does its time, rounding, columns and line inline: ~2,500 step records a
    second at 256 workers made ~11 Python calls each (the time's ms, the rounding, the columns,
    ``_is_int`` per column, the line's number test, a generator), about half of its cost."""
    records = _step_records(100, step_time_s=None)
    encoder = compact.METRICS_CODEC.encoder()
    encoder.encode(records[:1])  # the key frame
    batches = [records[k : k + 3] for k in range(1, 97, 3)]  # output chunks of 3 lines
    calls: list[str] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            calls.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        for batch in batches:
            encoder.encode(batch)
    finally:
        sys.setprofile(None)
    assert not any(line.startswith("{") for line in encoder.encode(records[97:]).splitlines())
    assert len(calls) <= 96 + len(batches), collections.Counter(calls)
