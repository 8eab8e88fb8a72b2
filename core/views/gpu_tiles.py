"""Many GPUs at a glance: one small tile per GPU, grouped by host, with the last minutes of
utilisation and memory as sparklines and temperature/power as a colour. Qt-free.

Fed with the agents' ``sample`` event data (``host``, ``t``, ``gpus``: see docs/agent-protocol.md).
Every history is a fixed ring (``SPARK_POINTS`` samples), so 64 GPUs over a day cost the same as
over a minute; the whole-run history lives in the full card's series, not here.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.views.overview import natural_key

__all__ = ["SPARK_POINTS", "GpuTile", "GpuTileBoard", "heat_level", "memory_fraction"]

SPARK_POINTS = 120

# Where NVIDIA datacentre GPUs start to throttle is ~85 C; the levels warn before that.
HEAT_LEVELS_C = (70.0, 80.0, 87.0)


def heat_level(temperature_c: float | None, power_w: float | None, power_limit_w: float | None) -> int:
    """0 normal, 1 warm, 2 hot, 3 throttling territory: the worse of temperature and power draw
    (power at 90 % / 97 % / 100 % of its limit counts as warm / hot / throttling)."""
    level = 0
    if temperature_c is not None:
        level = sum(temperature_c >= bound for bound in HEAT_LEVELS_C)
    if power_w is not None and power_limit_w:
        fraction = power_w / power_limit_w
        level = max(level, sum(fraction >= bound for bound in (0.90, 0.97, 1.0)))
    return level


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def memory_fraction(used_bytes: float | None, total_bytes: float | None) -> float | None:
    """Memory used as a fraction of the total; None when either is unknown (or the total is 0)."""
    if used_bytes is None or not total_bytes:
        return None
    return used_bytes / total_bytes


@dataclass(frozen=True)
class GpuTile:
    """The latest figures of one GPU and its recent history (fractions 0..1, oldest first)."""

    host: str
    index: int
    name: str
    utilization_percent: float | None
    memory_used_bytes: float | None
    memory_total_bytes: float | None
    temperature_c: float | None
    power_w: float | None
    power_limit_w: float | None
    roles: tuple[str, ...]
    utilization_history: tuple[float, ...]
    memory_history: tuple[float, ...]
    t: float

    @property
    def key(self) -> tuple[str, int]:
        return (self.host, self.index)

    @property
    def memory_fraction(self) -> float | None:
        return memory_fraction(self.memory_used_bytes, self.memory_total_bytes)

    @property
    def heat(self) -> int:
        return heat_level(self.temperature_c, self.power_w, self.power_limit_w)


class _History:
    __slots__ = ("memory", "utilization")

    def __init__(self) -> None:
        self.utilization: deque[float] = deque(maxlen=SPARK_POINTS)
        self.memory: deque[float] = deque(maxlen=SPARK_POINTS)


class GpuTileBoard:
    """Keeps the latest figures and a short history of every GPU seen in samples.

    A sample only appends to the histories and keeps its GPU's latest figures; the immutable
    :class:`GpuTile` is built when asked for (once per frame at most), not per sample: a reopened
    day-long run feeds thousands of samples between two frames.
    """

    def __init__(self) -> None:
        self._tiles: dict[tuple[str, int], GpuTile] = {}
        self._latest: dict[tuple[str, int], tuple[Mapping[str, Any], float]] = {}
        self._history: dict[tuple[str, int], _History] = {}
        self._by_host: dict[str, list[int]] = {}  # host -> its GPU indexes, as first seen
        self.host_versions: dict[str, int] = {}  # host -> the board's version at its last sample
        self.version = 0  # bumped on every change, so a view redraws only when it must

    def add_sample(self, data: Mapping[str, Any]) -> None:
        """Take one ``sample`` event's data (a host without GPUs adds nothing)."""
        self.add_samples([data])

    def add_samples(self, batch: Sequence[Mapping[str, Any]]) -> None:
        """Take ``sample`` events' data, in order: the state :meth:`add_sample` on each gives.
        Only each GPU's newest ``SPARK_POINTS`` readings are worked out: a reopened run hands
        over thousands of samples, and the histories keep that many."""
        readings: dict[tuple[str, int], list[Mapping[str, Any]]] = {}  # GPUs in order of first sight
        last_t: dict[tuple[str, int], float] = {}
        for data in batch:
            host = str(data.get("host", "?"))
            t = _num(data.get("t")) or 0.0
            for gpu in data.get("gpus") or []:
                if not isinstance(gpu, dict) or not isinstance(gpu.get("index"), int):
                    continue
                key = (host, int(gpu["index"]))
                seen = readings.get(key)
                if seen is None:
                    seen = readings[key] = []
                seen.append(gpu)
                last_t[key] = t
        for key, gpus in readings.items():
            history = self._history.get(key)
            if history is None:
                history = self._history[key] = _History()
            for gpu in gpus[-SPARK_POINTS:]:
                util = _num(gpu.get("utilization_gpu_percent"))
                used, total = _num(gpu.get("memory_used_bytes")), _num(gpu.get("memory_total_bytes"))
                history.utilization.append(max(0.0, min(util / 100.0, 1.0)) if util is not None else float("nan"))
                history.memory.append(max(0.0, min(used / total, 1.0)) if used is not None and total else float("nan"))
            if key not in self._latest:
                self._by_host.setdefault(key[0], []).append(key[1])
            self._latest[key] = (gpus[-1], last_t[key])
            self._tiles.pop(key, None)
            self.version += len(gpus)
            self.host_versions[key[0]] = self.version  # never repeats, even after a clear

    def _build(self, key: tuple[str, int], *, history_too: bool = True) -> GpuTile:
        gpu, t = self._latest[key]
        history = self._history[key] if history_too else _History()
        roles = sorted(
            {str(p["role"]) for p in gpu.get("processes") or [] if isinstance(p, dict) and p.get("role")},
            key=natural_key,
        )
        tile = GpuTile(
            host=key[0],
            index=key[1],
            name=str(gpu.get("name") or "GPU"),
            utilization_percent=_num(gpu.get("utilization_gpu_percent")),
            memory_used_bytes=_num(gpu.get("memory_used_bytes")),
            memory_total_bytes=_num(gpu.get("memory_total_bytes")),
            temperature_c=_num(gpu.get("temperature_c")),
            power_w=_num(gpu.get("power_w")),
            power_limit_w=_num(gpu.get("power_limit_w")),
            roles=tuple(roles),
            utilization_history=tuple(history.utilization),
            memory_history=tuple(history.memory),
            t=t,
        )
        if history_too:
            self._tiles[key] = tile
        return tile

    def clear(self) -> None:
        self._tiles.clear()
        self._latest.clear()
        self._history.clear()
        self._by_host.clear()
        self.host_versions.clear()
        self.version += 1

    def tile(self, host: str, index: int) -> GpuTile | None:
        key = (host, index)
        if key not in self._latest:
            return None
        return self._tiles.get(key) or self._build(key)

    def by_host(self) -> list[tuple[str, list[GpuTile]]]:
        """Hosts in natural order, each with its GPUs by index."""
        hosts: dict[str, list[GpuTile]] = {}
        for key in self._latest:
            tile = self._tiles.get(key) or self._build(key)
            hosts.setdefault(tile.host, []).append(tile)
        return [(h, sorted(hosts[h], key=lambda g: g.index)) for h in sorted(hosts, key=natural_key)]

    @property
    def host_count(self) -> int:
        return len(self._by_host)

    def hosts(self) -> list[str]:
        """Every host with a GPU, in natural order."""
        return sorted(self._by_host, key=natural_key)

    def tiles_of(self, host: str) -> list[GpuTile]:
        """``host``'s GPUs by index, with their histories (one host's grid)."""
        keys = [(host, i) for i in sorted(self._by_host.get(host, ()))]
        return [self._tiles.get(k) or self._build(k) for k in keys]

    def latest_of(self, host: str) -> list[GpuTile]:
        """``host``'s GPUs by index with their latest figures and no history: what a host's
        summary reads, without copying 8,192 GPUs' sparklines a frame."""
        keys = [(host, i) for i in sorted(self._by_host.get(host, ()))]
        return [self._tiles.get(k) or self._build(k, history_too=False) for k in keys]

    def __len__(self) -> int:
        return len(self._latest)
