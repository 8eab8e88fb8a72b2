"""The GPUs tab's figures, without the drawing: per host and GPU, the whole run's utilisation and
memory history (a host's CPU and memory as GPU index -1), each host's latest sample, the
TensorFlow devices on each GPU, the tile board, and which GPU's card shows past ``grid_from``
GPUs. Fed by the agents' ``sample`` events. Qt-free.

:class:`GpuFigures` is owned by the tab (:class:`gui.run.tabs.gpus.GpuPanel`), which makes a card
per GPU and draws from it at most once a frame: :attr:`GpuFigures.version` moves on every change a
card could show. The cards' texts are worked out here too (:meth:`GpuFigures.card_text`).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from core.telemetry.pci import normalize_bus_id
from core.views.gpu_hosts import GPUS_FROM, HOSTS_FROM
from core.views.gpu_tiles import GpuTileBoard
from core.views.series import Series

__all__ = ["GRID_FROM", "HISTORY_CAPACITY", "GpuFigures", "GpuKey"]

GRID_FROM = 8  # past this many GPUs, more cards than a screen holds: a tile each, one card shown
HISTORY_CAPACITY = 2048
GpuKey = tuple[str, int]  # (host, GPU index); index -1 is the host's CPU and memory


def _mib(n: Any) -> str:
    """Memory as people write it: ``612 MiB`` under a GiB, ``39.0 GiB`` from there (a GPU's 81,920 MiB
    read as a number to count digits of)."""
    if not isinstance(n, (int, float)):
        return "?"
    return f"{n / 2**30:,.1f} GiB" if n >= 2**30 else f"{n / 2**20:,.0f} MiB"


def _num(value: Any, fmt: str, unit: str) -> str:
    return f"{value:{fmt}}{unit}" if isinstance(value, (int, float)) else "n/a"


class GpuFigures:
    """Every GPU's (and host's) figures, bounded, as the samples bring them."""

    def __init__(self) -> None:
        # Every GPU's (and host's, index -1) two series, busy % and memory used %, whether or
        # not the tab has made its card (it makes a few a frame).
        self.history: dict[GpuKey, tuple[Series, Series]] = {}
        self.latest: dict[str, Mapping[str, Any]] = {}  # host -> its latest sample
        self.hosts: list[str] = []  # every host sampled, in the order they came
        self.tf_devices: dict[str, list[str]] = {}  # normalized PCI bus id -> TF devices by role
        self.board = GpuTileBoard()  # the tiles past grid_from GPUs
        self.gpu_count = 0
        self.grid_from = GRID_FROM
        self.hosts_from = HOSTS_FROM  # past this many hosts with GPUs, or gpus_from GPUs: a tile per host
        self.gpus_from = GPUS_FROM
        self.focus: GpuKey | None = None  # the GPU whose card shows, in grid mode
        self.version = 0  # moves on every change a card could show

    def clear(self) -> None:
        """Forget every figure (another run is shown)."""
        self.history.clear()
        self.latest.clear()
        self.hosts.clear()
        self.board.clear()
        self.gpu_count = 0
        self.focus = None
        self.version += 1

    # ------------------------------------------------------------------ input

    def add_sample(self, data: Mapping[str, Any]) -> None:
        """Take one ``sample`` event's data."""
        self.add_samples([data])

    def add_samples(self, batch: Iterable[Mapping[str, Any]]) -> None:
        """Take ``sample`` events' data, in order: what :meth:`add_sample` on each gives, with one
        :meth:`Series.extend` per series and one tile board update (a reopened run hands over
        thousands of samples a frame, a live one a few)."""
        # Per series key, the batch's points: busy times, busy values, memory times, memory values.
        # Gathered inline, a tuple less per reading: a reopened day hands over ~70,000.
        points: dict[GpuKey, tuple[list[float], list[float], list[float], list[float]]] = {}
        number = (int, float)
        tiles: list[dict[str, Any]] = []
        for data in batch:
            host = str(data.get("host", "?"))
            t = data.get("t")
            t = float(t) if isinstance(t, number) else time.time()
            if host not in self.latest:
                self.hosts.append(host)
            self.latest[host] = data
            figures: Mapping[str, Any] = data["figures"] if isinstance(data.get("figures"), dict) else {}
            readings = [
                (-1, figures.get("cpu_percent"), figures.get("memory_used_bytes"), figures.get("memory_total_bytes"))
            ]
            gpus = data.get("gpus") or []
            for gpu in gpus:
                if isinstance(gpu, dict) and isinstance(gpu.get("index"), int):
                    readings.append(
                        (
                            int(gpu["index"]),
                            gpu.get("utilization_gpu_percent"),
                            gpu.get("memory_used_bytes"),
                            gpu.get("memory_total_bytes"),
                        )
                    )
            for index, busy, used, total in readings:  # a host's CPU % or a GPU's utilisation; memory used %
                key = (host, index)
                acc = points.get(key)
                if acc is None:
                    self._series(key)
                    acc = points[key] = ([], [], [], [])
                if isinstance(busy, number):
                    acc[0].append(t)
                    acc[1].append(float(busy))
                if isinstance(used, number) and isinstance(total, number) and total > 0:
                    acc[2].append(t)
                    acc[3].append(100.0 * used / total)
            if gpus:
                tiles.append({"host": host, "t": t, "gpus": gpus})
            if self.grid_mode and self.focus is None:
                self.focus = min((k for k in self.history if k[1] >= 0), default=None)
        for key, (busy_t, busy_v, memory_t, memory_v) in points.items():
            pair = self.history[key]
            if busy_t:
                pair[0].extend(busy_t, busy_v)
            if memory_t:
                pair[1].extend(memory_t, memory_v)
        self.board.add_samples(tiles)
        self.version += 1

    def _series(self, key: GpuKey) -> tuple[Series, Series]:
        pair = self.history.get(key)
        if pair is None:  # not setdefault: it built two 2048-point Series per GPU per sample
            pair = self.history[key] = (Series(capacity=HISTORY_CAPACITY), Series(capacity=HISTORY_CAPACITY))
            self.gpu_count += key[1] >= 0
        return pair

    def set_tf_devices(self, devices: dict[str, list[str]]) -> None:
        """TensorFlow devices per normalized PCI bus id, e.g. ``worker:0 /device:GPU:0``."""
        if devices != self.tf_devices:
            self.tf_devices = devices
            self.version += 1

    def select(self, key: GpuKey) -> None:
        """Show ``key``'s card (a tile was picked)."""
        if key != self.focus:
            self.focus = key
            self.version += 1

    # ------------------------------------------------------------------ reading

    @property
    def grid_mode(self) -> bool:
        """Past ``grid_from`` GPUs: a tile each, and only the focused GPU's card."""
        return self.gpu_count > self.grid_from

    @property
    def host_mode(self) -> bool:
        """Past ``hosts_from`` hosts with GPUs or ``gpus_from`` GPUs: a tile per host leads, a
        host's tiles and its cards show only when picked."""
        return self.gpu_count > self.gpus_from or self.board.host_count > self.hosts_from

    def shown(self, key: GpuKey) -> bool:
        """Whether ``key``'s card shows: always for a host's CPU card and below ``grid_from`` GPUs;
        past ``hosts_from`` hosts only the focused GPU's and its host's (1,024 hosts' CPU cards
        are 1,024 plots)."""
        if key[1] < 0 and self.host_mode:
            return self.focus is not None and key[0] == self.focus[0]
        return key[1] < 0 or not self.grid_mode or key == self.focus

    def pending(self, made: Collection[GpuKey]) -> list[GpuKey]:
        """The cards that should show but are not among those ``made`` yet: the focused GPU's
        first, then the hosts' and the GPUs' in order."""
        keys = [k for k in self.history if k not in made and self.shown(k)]
        return sorted(keys, key=lambda k: (k != self.focus, k[1] >= 0, k))

    def card_text(self, key: GpuKey) -> tuple[str, str, str]:
        """What ``key``'s card says from the latest sample: its title, its figures, and who uses
        it (a host's roles, or a GPU's processes and TensorFlow devices)."""
        host, index = key
        sample = self.latest.get(host, {})
        if index < 0:
            return "CPU and memory", _host_text(sample), _host_users(sample)
        gpu = next((g for g in sample.get("gpus") or [] if isinstance(g, dict) and g.get("index") == index), {})
        return f"GPU {index}: {gpu.get('name') or 'unknown'}", _gpu_text(gpu), self._gpu_users(gpu)

    def _gpu_users(self, gpu: Mapping[str, Any]) -> str:
        users = []
        for proc in gpu.get("processes") or []:
            if not isinstance(proc, dict):
                continue
            who = proc.get("role") or f"pid {proc.get('pid')} (not a role of this run)"
            users.append(f"{who} {_mib(proc.get('used_memory_bytes'))}")
        text = "used by: " + (", ".join(users) if users else "no process")
        devices = self.tf_devices.get(normalize_bus_id(gpu.get("pci_bus_id")) or "", [])
        if devices:
            text += "\nTensorFlow devices: " + ", ".join(devices)
        return text


def _host_text(sample: Mapping[str, Any]) -> str:
    f: Mapping[str, Any] = sample["figures"] if isinstance(sample.get("figures"), dict) else {}
    return (
        f"CPU {_num(f.get('cpu_percent'), '.0f', ' %')} of {f.get('cpu_count', '?')} cores   "
        f"load {_num(f.get('load1'), '.2f', '')}   "
        f"memory {_mib(f.get('memory_used_bytes'))} of {_mib(f.get('memory_total_bytes'))}"
    )


def _host_users(sample: Mapping[str, Any]) -> str:
    roles: Mapping[str, Any] = sample["roles"] if isinstance(sample.get("roles"), dict) else {}
    parts = []
    for name, fig in sorted(roles.items()):
        if isinstance(fig, dict) and fig.get("alive", True):
            parts.append(f"{name} {_num(fig.get('cpu_percent'), '.0f', '%')} CPU, {_mib(fig.get('rss_bytes'))}")
    return "roles: " + ("; ".join(parts) if parts else "none running")


def _gpu_text(gpu: Mapping[str, Any]) -> str:
    return (
        f"utilization {_num(gpu.get('utilization_gpu_percent'), '.0f', ' %')}   "
        f"memory {_mib(gpu.get('memory_used_bytes'))} of {_mib(gpu.get('memory_total_bytes'))}   "
        f"{_num(gpu.get('temperature_c'), '.0f', ' °C')}   "
        f"power {_num(gpu.get('power_w'), '.0f', ' W')} of {_num(gpu.get('power_limit_w'), '.0f', ' W')}   "
        f"SM clock {_num(gpu.get('sm_clock_mhz'), '.0f', ' MHz')}"
    )
