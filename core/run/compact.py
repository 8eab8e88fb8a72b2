"""The compact encoding of a run's telemetry files (``metrics.jsonl``, ``samples-<host>.jsonl``,
``scalars.jsonl``): each line carries only what its record changed against the one before.

Why: the plain format repeated every key of every record (a metrics line was ~115 bytes for a step,
a loss and a time; a host sample repeated each GPU's name, uuid, bus id and limits every second), so
a 64-worker run wrote ~4 MB of derived figures per worker-hour, more than the roles' own logs.

The files stay JSON lines, append-only, one record a line, so a half-written last line is kept for
the next read (:class:`core.run.journal.JsonlTail`) and a crash loses at most that line. Two kinds
of line:

- A **key frame**, a JSON object ``{"~": 1, "time": "t", "cols": [...], "keys": [...], "r": {...}}``:
  the format's version (``~``), the record whole (``r``), the name of its time field, the fields
  written by position in the deltas (``cols``), and every dict key the record holds (``keys``),
  which the deltas name by their index in that list. A writer starts each file it opens with one,
  writes one every ``KEY_EVERY`` records, and whenever a delta cannot say what changed (a key not in
  the list, a key gone, a time that is not a number).
- A **delta**, a JSON array ``[dt_ms, col..., patch?]``: the time as milliseconds since the previous
  record's, each column's value, then (when anything else changed) a patch: an object whose keys are
  indices into ``keys`` (into a dict) or positions (into a list of the same length), and whose values
  are the new value, or for a dict or a list under it, a patch of it. An integer onto an integer
  (a step, a byte count) is the difference; anything else replaces.

Lines without ``~`` that are JSON objects are records of the plain format (every run directory
written before this encoding) and are read as they always were, so one decoder reads both. A
reader that starts mid-file (the tail of a file, a skimmed offset) or meets a damaged line drops
deltas until the next key frame. Numbers are rounded to what is shown: times to the millisecond,
other floats to 6 significant digits; integers, strings, nulls, NaN and infinities are kept as they are.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

VERSION = 1
KEY_MARK = "~"
KEY_EVERY = 100  # records between key frames: a reader starting anywhere resyncs within this many
SAMPLE_KEY_EVERY = 60  # host samples (1 Hz): a key frame a minute, 1,440 a day for a skim to land on
MAX_INT_DELTA = 1 << 53  # a larger difference is written in a key frame (orjson reads > 64 bits as float)

_fast_loads: Callable[[bytes], Any] | None
try:
    from orjson import loads as _fast_loads
except ImportError:  # pragma: no cover - an environment without it
    _fast_loads = None


@dataclass(frozen=True)
class Codec:
    """How one kind of telemetry file is encoded: its time field, the fields written by position
    (those that change with nearly every record), and how many records a key frame covers."""

    time_key: str
    cols: tuple[str, ...]
    key_every: int

    def encoder(self) -> Encoder:
        return Encoder(time_key=self.time_key, cols=self.cols, key_every=self.key_every)


METRICS_CODEC = Codec("t", ("step", "loss"), KEY_EVERY)
SCALARS_CODEC = Codec("wall_time", ("step", "value"), KEY_EVERY)
SAMPLE_CODEC = Codec("t", (), SAMPLE_KEY_EVERY)


def codec_for(name: str) -> Codec | None:
    """The codec of a run directory's file called ``name``; None for a file that is not telemetry."""
    if name == "metrics.jsonl":
        return METRICS_CODEC
    if name == "scalars.jsonl":
        return SCALARS_CODEC
    if name.startswith("samples-") and name.endswith(".jsonl"):
        return SAMPLE_CODEC
    return None


class _NeedKey(Exception):
    """The record cannot be written as a delta: write a key frame."""


def _is_int(value: object) -> bool:
    return type(value) is int


def _round(value: float) -> float:
    """6 significant digits (what a loss or a figure is shown with); NaN and infinities kept."""
    if value != value or value in (math.inf, -math.inf) or value == 0.0:
        return value
    return float(f"{value:.6g}")


def _ms(value: object) -> int | None:
    """A time in whole milliseconds, or None when it is not a finite number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not math.isfinite(value) or abs(value) > 1e12:
        return None
    return round(value * 1000)


_PLAIN = frozenset({str, int, bool, type(None)})
_INFINITIES = (math.inf, -math.inf)


def canonical(value: Any) -> Any:
    """``value`` as it will be read back: floats to 6 significant digits, containers copied."""
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind is float:
        return _round(value)
    if kind is dict:
        return {k: v if type(v) in _PLAIN else canonical(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [canonical(v) for v in value]
    return value


def canonical_record(record: dict[str, Any], time_key: str) -> dict[str, Any]:
    """A record as it will be read back (see :func:`canonical`; its time to the millisecond)."""
    return _canonical_record(record, time_key, _ms(record.get(time_key)))


def _canonical_record(record: dict[str, Any], time_key: str, ms: int | None) -> dict[str, Any]:
    return {
        k: ms / 1000 if k == time_key and ms is not None else v if type(v) in _PLAIN else canonical(v)
        for k, v in record.items()
    }


def _keys(value: Any, into: dict[str, int]) -> None:
    if type(value) is dict:
        for k, v in value.items():
            if k not in into:
                into[k] = len(into)
            _keys(v, into)
    elif type(value) is list:
        for v in value:
            _keys(v, into)


_SAME = object()  # what _diff gives for two values that are the same


def _diff(prev: Any, cur: Any, index: dict[str, str]) -> Any:
    """What turns ``prev`` into ``cur``, or ``_SAME`` when they are equal and of the same type all
    the way down (1, 1.0 and True differ here; NaN differs from itself, and is written again)."""
    kind = type(prev)
    if kind is type(cur) and (kind in _PLAIN or kind is float):
        if prev == cur:
            return _SAME
        if kind is int:
            delta = cur - prev
            if abs(delta) >= MAX_INT_DELTA:
                raise _NeedKey
            return delta
        return cur
    if kind is dict and type(cur) is dict:
        for k in prev:
            if k not in cur:
                raise _NeedKey
        patch: dict[str, Any] = {}
        for k, v in cur.items():
            i = index.get(k)
            if i is None:
                raise _NeedKey
            if k not in prev:
                patch[i] = v  # written whole (a container too: the reader sets it, not patches it)
            else:
                d = _diff(prev[k], v, index)
                if d is not _SAME:
                    patch[i] = d
        return patch or _SAME
    if kind is list and type(cur) is list and len(prev) == len(cur):
        patch = {}
        for n, (p, c) in enumerate(zip(prev, cur, strict=True)):
            d = _diff(p, c, index)
            if d is not _SAME:
                patch[str(n)] = d
        return patch or _SAME
    if kind is list and type(cur) is dict:
        raise _NeedKey  # a dict onto a list would read as a patch of the list
    return cur


def _apply(prev: Any, patch: Any, keys: list[str]) -> Any:
    """``prev`` with ``patch`` applied (new containers; ``prev`` is left as it was)."""
    if type(prev) is dict and type(patch) is dict:
        out = dict(prev)
        for i, v in patch.items():
            k = keys[int(i)]
            out[k] = _apply(prev[k], v, keys) if k in prev else v
        return out
    if type(prev) is list and type(patch) is dict:
        items = list(prev)
        for n, v in patch.items():
            items[int(n)] = _apply(items[int(n)], v, keys)
        return items
    if _is_int(prev) and _is_int(patch):
        return prev + patch
    return patch


def _line(value: Any) -> str:
    return json.dumps(value, separators=(",", ":")) + "\n"


def _number_line(values: list[Any]) -> str | None:
    """``values`` as a JSON array line when all are ints or finite floats (the common delta: a
    time, a step, a loss), ~4x quicker than json.dumps; None otherwise. ``repr`` of an int or a
    finite float is its JSON text."""
    for v in values:
        kind = type(v)
        if kind is not int and (kind is not float or v != v or v in (math.inf, -math.inf)):
            return None
    return "[" + ",".join(map(repr, values)) + "]\n"


class Encoder:
    """Writes one file's records as key frames and deltas. Not thread-safe: one per file, one writer.

    ``time_key`` names the record's time field, ``cols`` the fields that change with nearly every
    record (written by position, without a key), ``key_every`` how many records a key frame covers.
    After a failed write, :meth:`reset`: the next record is a key frame, so a reader never applies a
    delta to a record that did not reach the file."""

    def __init__(self, *, time_key: str = "t", cols: tuple[str, ...] = (), key_every: int = KEY_EVERY) -> None:
        self.time_key = time_key
        self.cols = cols
        self.key_every = key_every
        self._prev: dict[str, Any] | None = None
        self._prev_ms: int | None = None
        self._index: dict[str, str] = {}  # each key's index in the key frame's list, as a patch names it
        self._since_key = 0
        self._fixed = frozenset({time_key, *cols})  # the fields a delta writes by position

    @property
    def fresh(self) -> bool:
        """True until a record is encoded, and again after :meth:`reset`."""
        return self._prev is None

    def reset(self) -> None:
        self._prev = None

    def encode(self, records: list[dict[str, Any]]) -> str:
        """The lines for ``records``, in order. A record with the keys of the one before is
        tried in one pass (:meth:`_flat_delta`) straight from this loop, the others, and those it
        declines, through :meth:`_encode_one`."""
        lines: list[str] = []
        append = lines.append
        for record in records:
            prev = self._prev
            line = self._flat_delta(record, prev) if prev is not None and self._since_key < self.key_every else None
            append(self._encode_one(record) if line is None else line)
        return "".join(lines)

    def _encode_one(self, record: dict[str, Any]) -> str:
        """A record :meth:`_flat_delta` declined (or the first): a delta of the general path, or a
        key frame."""
        prev = self._prev
        ms = _ms(record.get(self.time_key))
        cur = _canonical_record(record, self.time_key, ms)
        if prev is not None and self._since_key < self.key_every:
            try:
                line = self._delta(prev, cur, ms)
            except _NeedKey:
                pass
            else:
                self._prev = cur
                self._since_key += 1
                return line
        return self._key_frame(cur)

    def _flat_delta(self, record: dict[str, Any], prev: dict[str, Any]) -> str | None:
        """The delta line of a record with exactly the keys of the one before and no container
        but an empty dict (a step record: its ``extra`` mostly ``{}``), in one pass over it; None
        for any other record, which the general path (:meth:`_encode_one`) takes. It writes the
        very line the general path would: at 256 workers the general path's canonical copy, two
        dict comprehensions and recursive diff per record were ~20 % of the controller's thread.
        The time's milliseconds, the rounding, the columns and the line's text are done inline,
        not by the helpers the general path calls (:func:`_ms`, :func:`_round`,
        :meth:`_columns`, :func:`_number_line`): at ~2,500 records a second at 256 workers, those
        calls were about half of this path's cost."""
        prev_ms = self._prev_ms
        if prev_ms is None or len(record) != len(prev):
            return None
        time_key, fixed, index = self.time_key, self._fixed, self._index
        when: Any = record.get(time_key)
        kind = type(when)
        if (kind is float or kind is int) and -1e12 <= when <= 1e12:  # NaN and infinities fail both
            ms = round(when * 1000)
        else:
            ms = _ms(when)  # the same answer for anything else (a bool, an int subclass: None or ms)
            if ms is None:
                return None
        cur: dict[str, Any] = {}
        patch: dict[str, Any] = {}
        for k, v in record.items():
            if k == time_key:  # a number (its ms are known): written as ms, never rounded
                cur[k] = ms / 1000
                continue
            kind = type(v)
            if kind is float:
                if v == v and v != 0.0 and v not in _INFINITIES:  # _round, inline
                    v = float(f"{v:.6g}")
            elif kind not in _PLAIN:
                if kind is not dict or v:
                    return None
                v = {}
            if k not in prev:
                return None
            cur[k] = v
            if k in fixed:
                continue
            before = prev[k]
            if kind is dict:  # an empty dict: the same as an empty one, else for the general path
                if type(before) is not dict or before:
                    return None
                continue
            if type(before) is type(v):
                if before == v:
                    continue
                if kind is int:
                    if abs(v - before) >= MAX_INT_DELTA:
                        return None
                    v = v - before
            i = index.get(k)
            if i is None:
                return None
            patch[i] = v
        # The columns as :meth:`_columns` writes them, and whether the line is numbers only
        # (:func:`_number_line`'s test: ints and finite floats, whose repr is their JSON).
        line: list[Any] = [ms - prev_ms]
        numbers = not patch
        for col in self.cols:
            if col in cur:
                if col not in prev:
                    return None
                value, before = cur[col], prev[col]
                kind = type(value)
                if kind is int and type(before) is int:
                    value = value - before
                    if abs(value) >= MAX_INT_DELTA:
                        return None
                elif kind is dict:  # a column is a number or a string (a list never gets here)
                    return None
                elif numbers and (kind is not float or value != value or value in _INFINITIES) and kind is not int:
                    numbers = False
                line.append(value)
            elif col in prev:
                return None
        if patch:
            line.append(patch)
        self._prev = cur
        self._prev_ms = ms
        self._since_key += 1
        return "[" + ",".join(map(repr, line)) + "]\n" if numbers else _line(line)

    def _columns(self, prev: dict[str, Any], cur: dict[str, Any]) -> list[Any] | None:
        """The columns of ``cur`` as a delta line writes them after ``prev`` (ints as differences),
        or None where only a key frame can carry them: a column that came or went, an int that
        jumped ``MAX_INT_DELTA`` or more, a container (a column is a number or a string)."""
        values: list[Any] = []
        for col in self.cols:
            if (col in cur) != (col in prev):
                return None
            if col in cur:
                value, before = cur[col], prev[col]
                if _is_int(value) and _is_int(before):
                    if abs(value - before) >= MAX_INT_DELTA:
                        return None
                    values.append(value - before)
                elif type(value) is dict or type(value) is list:
                    return None
                else:
                    values.append(value)
        return values

    def _key_frame(self, cur: dict[str, Any]) -> str:
        index: dict[str, int] = {}
        _keys(cur, index)
        self._index = {k: str(i) for k, i in index.items()}
        self._prev = cur
        self._prev_ms = _ms(cur.get(self.time_key))
        self._since_key = 1
        cols = [c for c in self.cols if c in cur]
        return _line({KEY_MARK: VERSION, "time": self.time_key, "cols": cols, "keys": list(index), "r": cur})

    def _delta(self, prev: dict[str, Any], cur: dict[str, Any], ms: int | None) -> str:
        if ms is None or self._prev_ms is None:
            raise _NeedKey
        cols = self._columns(prev, cur)
        if cols is None:
            raise _NeedKey
        line: list[Any] = [ms - self._prev_ms, *cols]
        fixed = self._fixed
        rest_prev = {k: v for k, v in prev.items() if k not in fixed}
        rest_cur = {k: v for k, v in cur.items() if k not in fixed}
        patch = _diff(rest_prev, rest_cur, self._index)
        if patch is not _SAME:
            line.append(patch)
        self._prev_ms = ms
        return _number_line(line) or _line(line)


class Decoder:
    """Turns a file's lines, decoded as JSON, back into its records (see the module's docstring).

    A plain object (the format from before this encoding) passes through as it is. A delta with no
    key frame before it, or one that does not fit its key frame, is dropped, and the deltas after it
    too until the next key frame; each is counted in :attr:`dropped`, except, ``mid_file``, those
    before the first key frame (a reader that starts at an offset expects them: not damage)."""

    def __init__(self, *, mid_file: bool = False) -> None:
        self.mid_file = mid_file
        self._synced = False
        self._prev: dict[str, Any] | None = None
        self._prev_ms = 0
        self._time_key = "t"
        self._cols: list[str] = []
        self._keys: list[str] = []
        self.dropped = 0

    def reset(self) -> None:
        """Forget the state after a damaged line: the deltas up to the next key frame are lost."""
        self._prev = None

    def start_mid_file(self) -> None:
        """Forget the state for a read that starts at another offset: the deltas before the next
        key frame are expected there, not counted as dropped."""
        self._prev = None
        self.mid_file = True
        self._synced = False

    def feed(self, value: Any) -> dict[str, Any] | None:
        """The record ``value`` (one line, decoded) stands for, or None."""
        if type(value) is dict:
            if KEY_MARK not in value:
                return value
            return self._key_frame(value)
        if type(value) is list and self._prev is not None:
            try:
                return self._delta(value)
            except (IndexError, KeyError, ValueError, TypeError, OverflowError):
                self._prev = None
        if self._synced or not self.mid_file:
            self.dropped += 1
        return None

    def _key_frame(self, frame: dict[str, Any]) -> dict[str, Any] | None:
        record, cols, keys, time_key = frame.get("r"), frame.get("cols"), frame.get("keys"), frame.get("time")
        if (
            frame.get(KEY_MARK) != VERSION
            or type(record) is not dict
            or type(cols) is not list
            or type(keys) is not list
            or not isinstance(time_key, str)
        ):
            self._prev = None  # a version this reader does not know, or damage: wait for one it reads
            self.dropped += 1
            self._synced = True  # what follows it is lost, not merely before the reader's start
            return None
        self._prev, self._cols, self._keys, self._time_key = record, cols, keys, time_key
        self._synced = True
        self._prev_ms = _ms(record.get(time_key)) or 0
        return record

    def _delta(self, line: list[Any]) -> dict[str, Any]:
        prev = self._prev
        assert prev is not None
        cols = self._cols
        if not (1 + len(cols) <= len(line) <= 2 + len(cols)) or not _is_int(line[0]):
            raise ValueError("a delta of another shape")
        ms = self._prev_ms + line[0]
        rest = {k: v for k, v in prev.items() if k != self._time_key and k not in cols}
        if len(line) > 1 + len(cols):
            patch = line[-1]
            if type(patch) is not dict:
                raise ValueError("a patch that is not an object")
            rest = _apply(rest, patch, self._keys)
        record: dict[str, Any] = {self._time_key: ms / 1000}
        for n, col in enumerate(cols, start=1):
            value, before = line[n], prev[col]
            record[col] = before + value if _is_int(value) and _is_int(before) else value
        record.update(rest)
        self._prev, self._prev_ms = record, ms
        return record


def loads(line: bytes) -> Any:
    """One line as JSON (orjson where it reads it, else json, which also takes NaN and infinities);
    raises ValueError."""
    if _fast_loads is not None:
        try:
            return _fast_loads(line)
        except ValueError:
            pass
    return json.loads(line)


def decode(lines: list[bytes], decoder: Decoder) -> tuple[list[dict[str, Any]], int]:
    """The records ``lines`` stand for, in order, through ``decoder``; and how many lines were
    skipped: damaged (not JSON, or neither an object nor a delta) or dropped by the decoder (see
    :class:`Decoder`). Blank lines are neither. A damaged line resets the decoder: a delta after it
    may have been written against the record it held."""
    records: list[dict[str, Any]] = []
    damaged = 0
    dropped = decoder.dropped
    for line in lines:
        try:
            value = loads(line)
        except (ValueError, RecursionError):
            if line.strip():
                damaged += 1
                decoder.reset()
            continue
        if type(value) is not dict and type(value) is not list:
            damaged += 1
            decoder.reset()
            continue
        record = decoder.feed(value)
        if record is not None:
            records.append(record)
    return records, damaged + decoder.dropped - dropped


def encode_file(records: Iterable[dict[str, Any]], path: Path, codec: Codec) -> int:
    """Write ``records`` to ``path`` compact (a temporary file renamed over it); returns its bytes.
    For tests and benchmarks that need the same run in both formats, and for converting a past run."""
    encoder = codec.encoder()
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for record in records:
            f.write(encoder.encode([record]))
    os.replace(tmp, path)
    return path.stat().st_size
