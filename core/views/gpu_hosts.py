"""Thousands of GPUs at a glance: one summary per host, built from the tile board. Qt-free.

Past ``HOSTS_FROM`` hosts or ``GPUS_FROM`` GPUs (1,024 workers on 128 hosts of 8 GPUs; 8,192 GPUs
on 1,024 hosts) a tile per GPU is a wall nobody reads and a paint that costs frames. The GPUs tab
then shows one tile per host: its GPUs' mean, min and max utilisation, memory, the hottest
temperature, a cell per GPU, and what needs a look (a GPU idle while a role holds it, a hot one).
A host's tile drills down to its GPUs' tiles, a GPU's to its full card.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from core.views.gpu_tiles import GpuTile, GpuTileBoard, memory_fraction
from core.views.overview import natural_key

__all__ = [
    "GPUS_FROM",
    "HOSTS_FROM",
    "HOST_SORTS",
    "IDLE_PERCENT",
    "GpuHost",
    "HostSummaries",
    "host_summaries",
    "select_hosts",
    "summarise_host",
]

HOSTS_FROM = 16  # more hosts than this: a tile per host
GPUS_FROM = 128  # or more GPUs than this
IDLE_PERCENT = 5.0  # a GPU a role holds that is busier than this is working
HOST_SORTS = ("host", "attention", "least busy", "busiest", "hottest", "memory")


@dataclass(frozen=True)
class GpuHost:
    """One host's GPUs in a few figures (utilisation in %, memory as a fraction 0..1)."""

    host: str
    gpus: int
    util_mean: float | None
    util_min: float | None
    util_max: float | None
    memory_used_bytes: float | None
    memory_total_bytes: float | None
    hottest_c: float | None
    heat: int  # the worst GPU's heat level (core.views.gpu_tiles.heat_level)
    cells: tuple[float | None, ...]  # each GPU's utilisation % by index (None: NVML said nothing)
    cell_heat: tuple[int, ...]
    idle: tuple[int, ...]  # indexes of the GPUs a role holds that do nothing
    hot: tuple[int, ...]  # indexes of the GPUs at heat level 2 or more
    roles: int  # the roles holding its GPUs

    @property
    def memory_fraction(self) -> float | None:
        return memory_fraction(self.memory_used_bytes, self.memory_total_bytes)

    @property
    def attention(self) -> bool:
        """Whether the tile stands out: an idle GPU under a role, or a hot one."""
        return bool(self.idle or self.hot)

    def text(self) -> str:
        """What the tile says, in a line (its tooltip and the tests read it)."""
        parts = [f"{self.host}: {self.gpus} GPU{'s' if self.gpus != 1 else ''}"]
        if self.util_mean is not None:
            parts.append(f"mean {self.util_mean:.0f}% busy (min {self.util_min:.0f}%, max {self.util_max:.0f}%)")
        if self.memory_fraction is not None:
            parts.append(f"memory {self.memory_fraction:.0%}")
        if self.hottest_c is not None:
            parts.append(f"hottest {self.hottest_c:.0f}°C")
        if self.idle:
            parts.append("idle under a role: GPU " + ", ".join(map(str, self.idle)))
        if self.hot:
            parts.append("hot: GPU " + ", ".join(map(str, self.hot)))
        return " · ".join(parts)


def summarise_host(host: str, tiles: Sequence[GpuTile]) -> GpuHost:
    """One host's summary from its GPUs' tiles (by index)."""
    utils = [t.utilization_percent for t in tiles if t.utilization_percent is not None]
    used = [t.memory_used_bytes for t in tiles if t.memory_used_bytes is not None and t.memory_total_bytes]
    total = [t.memory_total_bytes for t in tiles if t.memory_used_bytes is not None and t.memory_total_bytes]
    temps = [t.temperature_c for t in tiles if t.temperature_c is not None]
    heats = tuple(t.heat for t in tiles)
    return GpuHost(
        host=host,
        gpus=len(tiles),
        util_mean=sum(utils) / len(utils) if utils else None,
        util_min=min(utils) if utils else None,
        util_max=max(utils) if utils else None,
        memory_used_bytes=sum(u for u in used if u is not None) if used else None,
        memory_total_bytes=sum(t for t in total if t is not None) if total else None,
        hottest_c=max(temps) if temps else None,
        heat=max(heats, default=0),
        cells=tuple(t.utilization_percent for t in tiles),
        cell_heat=heats,
        # A GPU with a role's process on it that does nothing: the role waits, or runs on the CPU.
        idle=tuple(
            t.index
            for t in tiles
            if t.roles and t.utilization_percent is not None and t.utilization_percent < IDLE_PERCENT
        ),
        hot=tuple(t.index for t in tiles if t.heat >= 2),
        roles=len({r for t in tiles for r in t.roles}),
    )


class HostSummaries:
    """Every host of a board summarised, in natural order; a host is summarised again only when a
    sample of its came (1,024 hosts sample once a second each: a frame redoes a few dozen), and at
    most ``limit`` of them a call: the others keep their last summary (:attr:`behind` says how many)
    until the next call. A second's samples of 32 hosts, summarised in one frame, were 2-3 ms of it."""

    def __init__(self, board: GpuTileBoard) -> None:
        self.board = board
        self._cache: dict[str, tuple[int, GpuHost]] = {}
        self._built_at = -1
        self._hosts: list[GpuHost] = []
        self.behind = 0  # hosts with samples newer than their summary (left by a limit)

    def hosts(self, limit: int | None = None) -> list[GpuHost]:
        board = self.board
        if board.version == self._built_at and not self.behind:
            return self._hosts
        out = []
        budget = limit if limit is not None else -1
        behind = 0
        for host in board.hosts():
            seen = board.host_versions.get(host, 0)
            cached = self._cache.get(host)
            if cached is None or cached[0] != seen:
                if cached is not None and budget == 0:
                    behind += 1  # its last summary until the next call
                else:
                    budget -= 1
                    cached = self._cache[host] = (seen, summarise_host(host, board.latest_of(host)))
            out.append(cached[1])
        if len(self._cache) > len(out):  # the board was cleared: forget the hosts gone
            names = {h.host for h in out}
            self._cache = {k: v for k, v in self._cache.items() if k in names}
        self._hosts, self._built_at, self.behind = out, board.version, behind
        return out


def host_summaries(board: GpuTileBoard) -> list[GpuHost]:
    """Every host of ``board``, in natural order."""
    return HostSummaries(board).hosts()


def _low_first(value: float | None) -> float:
    return math.inf if value is None else value


def select_hosts(hosts: Sequence[GpuHost], *, sort: str = "host", text: str = "") -> list[GpuHost]:
    """The hosts whose name contains ``text`` (case-insensitive), in ``sort`` order (one of
    :data:`HOST_SORTS`; "attention" puts the hosts with an idle or hot GPU first, the most first)."""
    needle = text.strip().lower()
    chosen = [h for h in hosts if needle in h.host.lower()] if needle else list(hosts)
    by_name = sorted(chosen, key=lambda h: natural_key(h.host))
    if sort == "attention":
        return sorted(by_name, key=lambda h: (-(len(h.idle) + len(h.hot)), -h.heat))
    if sort == "least busy":
        return sorted(by_name, key=lambda h: _low_first(h.util_mean))
    if sort == "busiest":
        return sorted(by_name, key=lambda h: -(h.util_mean or 0.0))
    if sort == "hottest":
        return sorted(by_name, key=lambda h: (-h.heat, -(h.hottest_c or 0.0)))
    if sort == "memory":
        return sorted(by_name, key=lambda h: -(h.memory_fraction or 0.0))
    return by_name
