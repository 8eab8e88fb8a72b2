"""TensorFlow device-placement log parser: which op runs on which device, and which GPU a device is.

TensorFlow prints, with ``log_device_placement`` on (forms seen on TF 2.21 and older):

- graph placer lines ``MatMul: (MatMul): /job:worker/replica:0/task:0/device:CPU:0``, on stdout and
  again on stderr behind an absl prefix ``I0000 00:00:1795305212.417898    3241 placer.cc:162] ``;
- the older placer form without the op type ``Const_3: /job:localhost/replica:0/task:0/device:GPU:3``;
- eager executions ``Executing op MatMul in device /job:localhost/replica:0/task:0/device:GPU:0``
  (absl-prefixed, stderr only, hidden by ``TF_CPP_MIN_LOG_LEVEL>=1``), hundreds of thousands a minute;
- device creation ``Created device /job:localhost/replica:0/task:0/device:GPU:0 with 79078 MB memory:
  -> device: 0, name: NVIDIA H100 80GB HBM3, pci bus id: 0000:1a:00.0, compute capability: 9.0``.

:class:`PlacementAggregator` folds such lines into bounded tables: graph placements deduplicated by
(op name, op type, device), eager executions counted per (op type, device), logical devices by name.
Every other line costs one substring test.
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass
from typing import Any, Literal

__all__ = [
    "LogicalDevice",
    "OpPlacement",
    "PlacementAggregator",
    "format_summary",
    "short_device",
]

PlacementKind = Literal["graph", "eager"]

# Every line this module understands names a device as "/job:...": the cheap pre-check.
_MARK = "/job:"
_EAGER_MARK = "Executing op "
_EAGER_SEP = " in device "
_CREATED_MARK = "Created "

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
_DEVICE = re.compile(r"/job:[^/\s:]+(?:/replica:\d+)?(?:/task:\d+)?(?:/device:[A-Za-z_]+:\d+)?")
# TensorFlow node names: [A-Za-z0-9.][A-Za-z0-9_.\-/>]* (op types are identifiers).
_OP_NAME = r"[A-Za-z0-9._][A-Za-z0-9_.\-/>]*"
_OP_TYPE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ABSL_PREFIX = r"(?:[IWEF]\d{4} [0-9:.]+\s+\d+ [^\s\]]+\] )?"
_PLACER_HEAD = re.compile(rf"{_ABSL_PREFIX}({_OP_NAME})(?:: \(({_OP_NAME})\))?")
_CREATED = re.compile(
    r"Created (?:TensorFlow )?device \(?(/job:\S+?)"
    r"(?: with (\d+) MB memory)?\)?:?\s*->\s*(?:physical GPU \()?"
    r"device:\s*(\d+),\s*name:\s*(.*?),\s*pci bus id:\s*([^,)\s]+)"
    r"(?:,\s*compute capability:\s*([0-9.]+))?"
)
_DEVICE_PARTS = re.compile(
    r"/job:(?P<job>[^/\s]+)(?:/replica:(?P<replica>\d+))?(?:/task:(?P<task>\d+))?"
    r"(?:/device:(?P<dev>[^/\s]+))?$"
)

_MAX_DEVICES = 4096


MAX_PARTIAL_CHARS = 1 << 16  # an unfinished line kept between chunks, at most


@dataclass(frozen=True, slots=True)
class OpPlacement:
    """One op on one device.

    ``kind`` is ``"graph"`` for a placer line (``count`` is 1: a placement is a fact, printed once or
    twice) or ``"eager"`` for executions (``count`` is how many were logged; ``name`` is the op type,
    eager lines have no other name). ``op_type`` is ``""`` where the log did not say it.
    ``first_seen`` and ``last_seen`` are the times (seconds since the epoch) given to ``feed_*``.
    """

    name: str
    op_type: str
    device: str
    kind: PlacementKind
    count: int
    first_seen: float
    last_seen: float


@dataclass(frozen=True, slots=True)
class LogicalDevice:
    """A TensorFlow device and the physical GPU behind it, from a ``Created device`` line.

    ``physical_index`` is the index among the GPUs visible to the process (after
    ``CUDA_VISIBLE_DEVICES``); ``pci_bus_id`` joins it to NVML's GPUs.
    """

    device: str
    memory_mb: int | None
    physical_index: int
    name: str
    pci_bus_id: str
    compute_capability: str


class _Entry:
    """Mutable tally behind one :class:`OpPlacement`."""

    __slots__ = ("count", "device", "first_seen", "kind", "last_seen", "name", "op_type")

    def __init__(self, name: str, op_type: str, device: str, kind: PlacementKind, t: float) -> None:
        self.name = name
        self.op_type = op_type
        self.device = device
        self.kind: PlacementKind = kind
        self.count = 1
        self.first_seen = t
        self.last_seen = t

    def freeze(self) -> OpPlacement:
        return OpPlacement(self.name, self.op_type, self.device, self.kind, self.count, self.first_seen, self.last_seen)


def _valid_device(device: str) -> bool:
    return _DEVICE.fullmatch(device) is not None


class PlacementAggregator:
    """Folds placement and device-creation log lines into bounded tables.

    At most ``max_ops`` distinct ops (graph placements and eager (type, device) pairs together) are
    kept; lines about further new ops are only counted in :attr:`overflow`. Not thread-safe: feed it
    from one thread.
    """

    def __init__(self, max_ops: int = 100_000) -> None:
        """Create an empty aggregator keeping at most ``max_ops`` distinct ops."""
        if max_ops < 0:
            raise ValueError(f"max_ops must be >= 0, got {max_ops}")
        self.max_ops = max_ops
        self.overflow = 0
        """Lines about a new op that were dropped because ``max_ops`` ops were already kept."""
        self.lines_matched = 0
        """Placement and device lines recognised so far."""
        self.graph_repeats = 0
        """Graph placer lines that repeated a known placement (e.g. the absl copy on stderr)."""
        self._ops: dict[tuple[PlacementKind, str, str, str], _Entry] = {}
        # Eager hot path: the text after "Executing op " -> its entry, one dict lookup a line.
        self._eager_cache: dict[str, _Entry] = {}
        self._devices: dict[str, LogicalDevice] = {}
        self._partial = ""

    # -- feeding -------------------------------------------------------------------------------

    def drop_partial(self) -> None:
        """Forget the unfinished line: the next chunk does not continue it (output was skipped)."""
        self._partial = ""

    def feed_line(self, line: str, t: float | None = None) -> bool:
        """Take one log line; True if it was a placement or device-creation line.

        ``t`` is when the line was seen (seconds since the epoch; now by default).
        """
        if _MARK not in line:
            return False
        return self._feed(line, time.time() if t is None else t)

    def feed_stream(self, chunk: str, t: float | None = None) -> int:
        """Take output cut anywhere (mid-line too): whole lines now, the unfinished rest with the
        next chunk or :meth:`flush`. The rest is bounded: a longer "line" is cut."""
        text = self._partial + chunk
        cut = max(text.rfind("\n"), text.rfind("\r")) + 1
        self._partial = text[cut:][-MAX_PARTIAL_CHARS:]
        return self.feed_text(text[:cut], t) if cut else 0

    def flush(self, t: float | None = None) -> int:
        """Take the unfinished last line of a stream (at its end)."""
        rest, self._partial = self._partial, ""
        return self.feed_text(rest, t) if rest else 0

    def feed_text(self, text: str, t: float | None = None) -> int:
        """Take a chunk of whole lines (``\\n``, ``\\r\\n`` or ``\\r`` endings); returns how many matched.

        All lines of the chunk get the same time ``t`` (now by default).
        """
        if _MARK not in text:
            return 0
        when = time.time() if t is None else t
        feed = self._feed
        cache = self._eager_cache
        skip = len(_EAGER_MARK)
        matched = 0
        hits = 0
        for line in text.splitlines():
            if _MARK not in line:
                continue
            # Inlined hot path: an eager execution of a known (type, device), no colour codes.
            i = line.find(_EAGER_MARK)
            if i >= 0 and "\x1b" not in line:
                entry = cache.get(line[i + skip :].rstrip())
                if entry is not None:
                    entry.count += 1
                    entry.last_seen = when
                    hits += 1
                    continue
            if feed(line, when):
                matched += 1
        self.lines_matched += hits
        return matched + hits

    def _feed(self, line: str, t: float) -> bool:
        if "\x1b" in line:
            line = _ANSI.sub("", line)
        line = line.rstrip()
        i = line.find(_EAGER_MARK)
        if i >= 0:
            return self._feed_eager(line[i + len(_EAGER_MARK) :], t)
        if _CREATED_MARK in line:
            return self._feed_created(line)
        return self._feed_placer(line, t)

    def _feed_eager(self, rest: str, t: float) -> bool:
        entry = self._eager_cache.get(rest)
        if entry is not None:
            entry.count += 1
            entry.last_seen = t
            self.lines_matched += 1
            return True
        op_type, sep, device = rest.partition(_EAGER_SEP)
        if not sep or _OP_TYPE.fullmatch(op_type) is None or not _valid_device(device):
            return False
        self.lines_matched += 1
        key: tuple[PlacementKind, str, str, str] = ("eager", op_type, op_type, device)
        entry = self._ops.get(key)
        if entry is None:
            if len(self._ops) >= self.max_ops:
                self.overflow += 1
                return True
            entry = self._ops[key] = _Entry(op_type, op_type, device, "eager", t)
        else:
            entry.count += 1
            entry.last_seen = t
        if len(self._eager_cache) < 2 * self.max_ops + 16:
            self._eager_cache[rest] = entry
        return True

    def _feed_placer(self, line: str, t: float) -> bool:
        head, sep, tail = line.rpartition(": /job:")
        if not sep:
            return False
        device = "/job:" + tail
        if not _valid_device(device):
            return False
        m = _PLACER_HEAD.fullmatch(head)
        if m is None:
            return False
        name, op_type = m.group(1), m.group(2) or ""
        self.lines_matched += 1
        key: tuple[PlacementKind, str, str, str] = ("graph", name, op_type, device)
        entry = self._ops.get(key)
        if entry is not None:
            self.graph_repeats += 1
            entry.last_seen = t
        elif len(self._ops) >= self.max_ops:
            self.overflow += 1
        else:
            self._ops[key] = _Entry(name, op_type, device, "graph", t)
        return True

    def _feed_created(self, line: str) -> bool:
        m = _CREATED.search(line)
        if m is None:
            return False
        device, memory, index, name, pci, cc = m.groups()
        if not _valid_device(device):
            return False
        self.lines_matched += 1
        if device in self._devices or len(self._devices) < _MAX_DEVICES:
            # A process that creates its devices again (a new session) says the same or newer.
            self._devices[device] = LogicalDevice(
                device=device,
                memory_mb=int(memory) if memory else None,
                physical_index=int(index),
                name=name.strip(),
                pci_bus_id=pci,
                compute_capability=cc or "",
            )
        return True

    # -- reading -------------------------------------------------------------------------------

    def ops(self) -> list[OpPlacement]:
        """Every op kept, sorted by device, then name, graph before eager."""
        return sorted((e.freeze() for e in self._ops.values()), key=lambda p: (p.device, p.name, p.kind, p.op_type))

    def counts_by_device(self) -> dict[str, int]:
        """Per device: distinct graph ops placed there plus eager executions logged there."""
        counts: dict[str, int] = {}
        for entry in self._ops.values():
            n = entry.count if entry.kind == "eager" else 1
            counts[entry.device] = counts.get(entry.device, 0) + n
        return dict(sorted(counts.items()))

    def devices(self) -> list[LogicalDevice]:
        """Logical devices from ``Created device`` lines, sorted by device name."""
        return [self._devices[d] for d in sorted(self._devices)]

    def summary(self) -> dict[str, Any]:
        """Everything as JSON-ready data (the input of :func:`format_summary`)."""
        return {
            "devices": [asdict(d) for d in self.devices()],
            "counts_by_device": self.counts_by_device(),
            "ops": [asdict(p) for p in self.ops()],
            "overflow": self.overflow,
            "lines_matched": self.lines_matched,
            "graph_repeats": self.graph_repeats,
        }


def short_device(device: str) -> str:
    """A short form for tables: ``/job:worker/replica:0/task:0/device:GPU:0`` -> ``worker/0 GPU:0``.

    A replica other than 0 is kept (``worker/0 r1 GPU:0``); what is not a device name comes back as is.
    """
    m = _DEVICE_PARTS.match(device.strip())
    if m is None:
        return device
    out = m["job"]
    if m["task"] is not None:
        out += f"/{m['task']}"
    if m["replica"] not in (None, "0"):
        out += f" r{m['replica']}"
    if m["dev"] is not None:
        out += f" {m['dev']}"
    return out


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return lines


def format_summary(summary: dict[str, Any]) -> str:
    """Human-readable text of :meth:`PlacementAggregator.summary` for the ``placement`` command.

    Per device a count, the GPUs behind logical devices, then a table of ops (name, type, device,
    kind, count) sorted by device, then name.
    """
    out: list[str] = []
    counts: dict[str, int] = summary.get("counts_by_device", {})
    ops: list[dict[str, Any]] = summary.get("ops", [])
    devices: list[dict[str, Any]] = summary.get("devices", [])
    if not counts and not devices:
        out.append("no device placement lines found (run the trainer with log_device_placement)")
    if counts:
        graph = {d: 0 for d in counts}
        eager = {d: 0 for d in counts}
        for op in ops:
            if op["kind"] == "graph":
                graph[op["device"]] = graph.get(op["device"], 0) + 1
            else:
                eager[op["device"]] = eager.get(op["device"], 0) + int(op["count"])
        out.append("Ops per device:")
        rows = [[short_device(d), str(n), str(graph.get(d, 0)), str(eager.get(d, 0)), d] for d, n in counts.items()]
        out += ["  " + line for line in _table(["DEVICE", "TOTAL", "GRAPH", "EAGER", "FULL NAME"], rows)]
    if devices:
        out.append("")
        out.append("Logical devices:")
        rows = [
            [
                short_device(d["device"]),
                str(d["physical_index"]),
                d["name"],
                d["pci_bus_id"],
                "" if d["memory_mb"] is None else f"{d['memory_mb']} MB",
                d["compute_capability"],
            ]
            for d in devices
        ]
        out += ["  " + line for line in _table(["DEVICE", "GPU", "NAME", "PCI BUS ID", "MEMORY", "CC"], rows)]
    if ops:
        out.append("")
        out.append(f"Ops ({len(ops)}):")
        ordered = sorted(ops, key=lambda o: (o["device"], o["name"], o["kind"]))
        rows = [
            [o["name"], o["op_type"] or "?", short_device(o["device"]), o["kind"], str(o["count"])] for o in ordered
        ]
        out += ["  " + line for line in _table(["NAME", "TYPE", "DEVICE", "KIND", "COUNT"], rows)]
    if summary.get("overflow"):
        out.append("")
        out.append(f"{summary['overflow']} more placement lines about ops beyond the table's limit were not kept")
    return "\n".join(out) + "\n"
