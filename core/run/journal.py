"""The run's journal (``events.jsonl``) and the JSON-lines files beside it, written and read streaming.

The journal holds what rebuilds a run's state and nothing else: role states, pids, stalls, cluster
phases, host states, GPU status, warnings and the users' commands. Telemetry (``metrics``,
``sample``, ``scalars``) goes to its own files (``roles/<role>/metrics.jsonl``,
``telemetry/samples-<host>.jsonl``, ``roles/<role>/scalars.jsonl``): a 64-worker run journals a few
kilobytes an hour while its roles are steady, not gigabytes a day.

Nothing here reads a file whole: :class:`JsonlTail` reads from an offset in bounded chunks and
keeps a half-written last line for the next read, so the same code follows a file another process
is still writing and streams a day-long one with constant memory. Run directories written before
the journal was state-only (with every ``metrics`` batch and ``sample`` in ``events.jsonl``) keep
opening: :func:`is_state_record` tells the readers to skip those lines, whose data is also in the
telemetry files.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from core.run import compact
from core.run.events import STATE_KINDS, EventKind, JournalKind

EVENTS_FILE = "events.jsonl"
CHUNK_BYTES = 1 << 20
MAX_LINE_BYTES = 16 << 20  # a line longer than this is damage, not data: it is skipped

# The kinds of record the journal keeps: the events' state kinds, and its own (commands, notifications).
JOURNAL_KINDS = frozenset({*(str(k) for k in STATE_KINDS), *(str(k) for k in JournalKind)})


def is_state_record(kind: object) -> bool:
    """True for the record kinds the journal keeps (and replays). Anything else is skipped: an old
    run's telemetry lines (their data is in the telemetry files too), or a kind this TowerDeck does
    not know (never written by mistake: events are typed, :mod:`core.run.events`)."""
    return isinstance(kind, str) and kind in JOURNAL_KINDS


def json_line(record: dict[str, Any]) -> str:
    """One compact JSON line."""
    return json.dumps(record, separators=(",", ":")) + "\n"


def append_lines(path: Path, text: str) -> None:
    """Append whole lines to ``path`` (created with its folder if need be); raises OSError."""
    try:
        handle = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path, "a", encoding="utf-8")  # noqa: SIM115
    with handle:
        handle.write(text)


_raw_decode = json.JSONDecoder().raw_decode

_fast_loads: Callable[[bytes], Any] | None
try:  # orjson decodes a line in C, ~2.5x json's one-string decode below; optional (requirements.in)
    from orjson import loads as _fast_loads
except ImportError:  # pragma: no cover - an agent's host without it
    _fast_loads = None


def decode_lines(lines: list[bytes]) -> tuple[list[dict[str, Any]], int]:
    """The JSON objects among ``lines``, and how many lines were neither blank nor an object.

    The lines are decoded from one string, each parsed where it starts and kept only if the parse
    ends exactly where the line does (a line that fails that is parsed alone, as ``json.loads``
    takes it): a skimmed day's 166,000 lines cost ~40 % less than a ``json.loads`` each, whose fixed
    cost per call (bytes to text, a fresh scan) was most of the reader's time opening a day-long run. With
    orjson, each line is decoded by it instead, and a line it refuses (NaN, an infinity, a lone
    surrogate, not UTF-8) by ``json.loads``, so what is kept is the same but for an integer beyond
    64 bits, which orjson reads as the nearest float (no TowerDeck writer makes one)."""
    if _fast_loads is not None:
        return _decode_each(lines, _fast_loads)
    kept = [line for line in lines if line.strip()]
    try:
        text = b"\n".join(kept).decode("utf-8")
    except UnicodeDecodeError:  # some line is not UTF-8: json.loads may still read it as UTF-16/32
        return _decode_each(kept)
    texts = text.split("\n")
    if not kept or len(texts) != len(kept):  # nothing to read, or a caller's line held a newline
        return _decode_each(kept)
    records: list[dict[str, Any]] = []
    skipped = 0
    pos = 0
    for line, line_text in zip(kept, texts, strict=True):
        end = pos + len(line_text)
        try:
            record, stop = _raw_decode(text, pos)
        except ValueError:
            stop = -1
        if stop != end:  # leading or trailing blanks, damage, or a value running into the next line
            got, bad = _decode_each([line])
            records.extend(got)
            skipped += bad
        elif isinstance(record, dict):
            records.append(record)
        else:
            skipped += 1
        pos = end + 1
    return records, skipped


def _decode_each(lines: list[bytes], loads: Callable[[bytes], Any] = json.loads) -> tuple[list[dict[str, Any]], int]:
    """Each line by ``loads``; a line another ``loads`` than json's refuses goes to json's."""
    records: list[dict[str, Any]] = []
    skipped = 0
    for line in lines:
        try:
            record = loads(line)
        except ValueError:  # orjson.JSONDecodeError is one too; blank lines land here
            if loads is not json.loads:
                got, bad = _decode_each([line])
                records.extend(got)
                skipped += bad
            elif line.strip():
                skipped += 1
            continue
        if isinstance(record, dict):
            records.append(record)
        else:
            skipped += 1
    return records, skipped


class JsonlTail:
    """Follows one JSON-lines file from where the last read stopped.

    :meth:`read` returns the records of the complete lines that arrived since, decoded through
    :attr:`decoder` (:mod:`core.run.compact`: plain JSON objects as they are, the compact format's
    key frames and deltas as the records they stand for); an unparsable line is skipped and counted
    in :attr:`skipped`. A missing file reads as empty (it may appear later). At most ``max_bytes``
    are read per call, so a caller can share its time between files. Started at an offset other than
    0, the compact format's records are read from the first key frame there on.
    """

    def __init__(self, path: Path, offset: int = 0) -> None:
        self.path = path
        self.offset = offset
        self.skipped = 0
        self.decoder = compact.Decoder(mid_file=offset > 0)
        self._partial = b""

    def read(self, max_bytes: int = CHUNK_BYTES) -> list[dict[str, Any]]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read(max_bytes)
        except FileNotFoundError:
            return []
        self.offset += len(data)
        data = self._partial + data
        lines = data.split(b"\n")
        self._partial = lines.pop()
        if len(self._partial) > MAX_LINE_BYTES:
            self._partial = b""
            self.skipped += 1
            self.decoder.reset()  # a delta after the lost line may build on its record
        records, skipped = compact.decode(lines, self.decoder)
        self.skipped += skipped
        return records

    def at_end(self) -> bool:
        """True when everything written so far has been read (a half-written line excepted)."""
        try:
            return self.path.stat().st_size <= self.offset
        except FileNotFoundError:
            return True


def iter_jsonl(path: Path, chunk_bytes: int = CHUNK_BYTES) -> Iterator[dict[str, Any]]:
    """Every complete record of ``path``, streamed in chunks; nothing if it does not exist."""
    tail = JsonlTail(path)
    while True:
        records = tail.read(chunk_bytes)
        yield from records
        if not records and tail.at_end():
            return


def iter_journal(run_path: Path) -> Iterator[dict[str, Any]]:
    """The state records of a run's journal, oldest first, streamed; old runs' telemetry lines skipped."""
    for record in iter_jsonl(run_path / EVENTS_FILE):
        if is_state_record(record.get("kind")):
            yield record


def last_role_states(run_path: Path, roles: set[str] | frozenset[str]) -> dict[str, dict[str, Any]]:
    """The last ``role_state`` record of each of ``roles``, read streaming (for reattaching)."""
    last: dict[str, dict[str, Any]] = {}
    for record in iter_journal(run_path):
        if record.get("kind") == EventKind.ROLE_STATE and record.get("role") in roles:
            last[record["role"]] = record
    return last
