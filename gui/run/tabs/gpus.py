"""GPU panel: per host and GPU, live utilization and memory with current values, temperature,
power, and which roles (and TensorFlow devices) use it. A host without GPUs says so and shows its
CPU and memory instead.

Past ``grid_from`` GPUs (default 8: more cards than a screen holds) the panel leads with a
:class:`~gui.run.gpu_grid.GpuGrid`, a small tile per GPU grouped by host, and shows the full card of
the GPU clicked there only; every GPU's history is kept either way, so a card opens with it.

Cards are made when shown, and at most ``CARDS_PER_FRAME`` a frame (issue 19: a plot widget
costs 50-300 ms on a loaded machine, and the first frame on the GPUs tab of a 64-GPU run made
17 of them at once, 6.7 s without turning the event loop). The samples go to the history
whether or not a card exists, so a card made later opens with all of it.

Fed with the agents' ``sample`` and ``gpu_status`` events; every plot reads a bounded
:class:`~core.views.series.Series`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import pyqtgraph as pg
from PySide6 import QtCore, QtWidgets

# normalize_bus_id is imported by name from here too (gui.window.main_window): it lives in core.
from core.telemetry.pci import normalize_bus_id
from core.views.series import Series
from gui.run.gpu_grid import GpuGrid
from gui.run.tabs.plotting import FollowX, fit_to_pixels, light_grid, settle

UTIL_COLOUR = "#2b6cb0"
MEMORY_COLOUR = "#d9822b"
GRID_FROM = 8
CARDS_PER_FRAME = 2


def _drawn_key(card: _Card) -> tuple[int, ...]:
    """What a card's curves show: its two series, and how many points each had."""
    return (id(card.first), card.first.appended, id(card.second), card.second.appended)


def _mib(n: Any) -> str:
    return f"{n / 2**20:,.0f} MiB" if isinstance(n, (int, float)) else "?"


def _num(value: Any, fmt: str, unit: str) -> str:
    return f"{value:{fmt}}{unit}" if isinstance(value, (int, float)) else "n/a"


@dataclass
class _Card:
    """One GPU (or a host's CPU/memory) with its two series and widgets."""

    box: QtWidgets.QGroupBox
    values: QtWidgets.QLabel
    users: QtWidgets.QLabel
    plot: pg.PlotWidget
    first: Series = field(default_factory=lambda: Series(capacity=2048))
    second: Series = field(default_factory=lambda: Series(capacity=2048))
    curves: tuple[pg.PlotDataItem, pg.PlotDataItem] | None = None
    drawn: tuple[int, ...] = ()  # the series (and their lengths) the curves were last set from
    follow: FollowX | None = None  # the X range on the whole history, newest at 0


class GpuPanel(QtWidgets.QWidget):
    """Cards per host: the host's CPU and memory, then one card per GPU."""

    def __init__(self) -> None:
        super().__init__()
        self.hosts: dict[str, QtWidgets.QGroupBox] = {}
        self.host_status: dict[str, QtWidgets.QLabel] = {}
        self.cards: dict[tuple[str, int], _Card] = {}
        self.latest: dict[str, dict[str, Any]] = {}  # host -> latest sample
        self.tf_devices: dict[str, list[str]] = {}  # normalized pci bus id -> TF devices by role
        self._dirty = False
        # Every GPU's (and host's, index -1) two series, whether or not its card exists (a card
        # is made when shown, a few a frame).
        self.history: dict[tuple[str, int], tuple[Series, Series]] = {}
        self._gpu_count = 0
        self.grid_from = GRID_FROM
        self.focus: tuple[str, int] | None = None  # the GPU whose card shows, in grid mode
        self.grid = GpuGrid()
        self.grid.sig_gpu_selected.connect(self._on_gpu_selected)
        self.grid_scroll = QtWidgets.QScrollArea()
        self.grid_scroll.setWidgetResizable(True)
        self.grid_scroll.setWidget(self.grid)
        self.grid_scroll.hide()
        inner = QtWidgets.QWidget()
        self.host_layout = QtWidgets.QVBoxLayout(inner)
        self.host_layout.addStretch(1)
        self.empty = QtWidgets.QLabel("No samples yet: launch the cluster, or open a run.")
        self.host_layout.insertWidget(0, self.empty)
        scroll = QtWidgets.QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(inner)
        self.cards_scroll = scroll
        # Cards scrolled out of view are not redrawn (_in_view); one that comes into view (a
        # scroll, a resize of the area) is drawn at once, before it paints.
        for bar in (scroll.verticalScrollBar(), scroll.horizontalScrollBar()):
            bar.valueChanged.connect(self._on_cards_moved)
            bar.rangeChanged.connect(self._on_cards_moved)
        self.split = QtWidgets.QSplitter(QtCore.Qt.Orientation.Vertical)
        self.split.addWidget(self.grid_scroll)
        self.split.addWidget(scroll)
        self.split.setSizes([400, 400])
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.split)

    @property
    def grid_mode(self) -> bool:
        return self._gpu_count > self.grid_from

    def pending_cards(self) -> list[tuple[str, int]]:
        """The cards that should show but are not made yet: the focused GPU's first, then the
        hosts' and the GPUs' in order; :meth:`refresh` makes ``CARDS_PER_FRAME`` of them."""
        keys = [k for k in self.history if k not in self.cards and self.shown(k)]
        return sorted(keys, key=lambda k: (k != self.focus, k[1] >= 0, k))

    def shown(self, key: tuple[str, int]) -> bool:
        """Whether ``key``'s card shows: always for a host's CPU card and below ``grid_from`` GPUs."""
        return key[1] < 0 or not self.grid_mode or key == self.focus

    def _in_view(self, card: _Card) -> bool:
        """Whether any of ``card``'s plot is inside the cards' scrolled view (or not laid out yet)."""
        if not card.plot.isVisible():
            return True  # not shown yet (a card made this frame): draw it, it is about to show
        viewport = self.cards_scroll.viewport()
        corner = card.plot.mapTo(viewport, QtCore.QPoint(0, 0))
        return QtCore.QRect(corner, card.plot.size()).intersects(viewport.rect())

    def _on_cards_moved(self, *_args: object) -> None:
        stale = (c for k, c in self.cards.items() if c.drawn != _drawn_key(c) and self.shown(k) and self._in_view(c))
        if any(stale):
            self._dirty = True
            self.refresh()

    def _on_gpu_selected(self, host: str, index: int) -> None:
        self.focus = (host, index)
        self._card(host, index)
        self._dirty = True
        self.refresh()

    def clear(self) -> None:
        for box in self.hosts.values():
            box.deleteLater()
        self.hosts.clear()
        self.host_status.clear()
        self.cards.clear()
        self.latest.clear()
        self.history.clear()
        self._gpu_count = 0
        self.focus = None
        self.grid.board.clear()
        self.grid_scroll.hide()
        self.empty.show()

    # ------------------------------------------------------------------ input

    def add_sample(self, data: dict[str, Any]) -> None:
        """Take one ``sample`` event's data."""
        self.add_samples([data])

    def add_samples(self, batch: list[dict[str, Any]]) -> None:
        """Take ``sample`` events' data, in order: what :meth:`add_sample` on each gives, with one
        :meth:`Series.extend` per series and one tile board update (a reopened run hands over
        thousands of samples a frame, a live one a few)."""
        # Per series key, the batch's points: busy times, busy values, memory times, memory values.
        # Gathered inline, a tuple less per reading: a reopened day hands over ~70,000 (issue 25).
        points: dict[tuple[str, int], tuple[list[float], list[float], list[float], list[float]]] = {}
        number = (int, float)
        tiles: list[dict[str, Any]] = []
        for data in batch:
            host = str(data.get("host", "?"))
            t = data.get("t")
            t = float(t) if isinstance(t, number) else time.time()
            self.latest[host] = data
            figures: dict[str, Any] = data["figures"] if isinstance(data.get("figures"), dict) else {}
            self._host(host)
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
        self.grid.board.add_samples(tiles)
        self._dirty = True

    def _series(self, key: tuple[str, int]) -> tuple[Series, Series]:
        pair = self.history.get(key)
        if pair is None:  # not setdefault: it built two 2048-point Series per GPU per sample
            pair = self.history[key] = (Series(capacity=2048), Series(capacity=2048))
            self._gpu_count += key[1] >= 0
        return pair

    def set_gpu_status(self, host: str, status: str) -> None:
        """Take a ``gpu_status`` event: the agent's one line about NVML on ``host``."""
        self._host(host)
        self.host_status[host].setText(status)

    def set_link_state(self, host: str, state: str, reason: str) -> None:
        """Take a ``host_state`` event: how TowerDeck's link to that host's agent is doing."""
        box = self._host(host)
        box.setTitle(f"Host {host}" if state == "connected" else f"Host {host}: {state}")
        box.setToolTip(reason)
        box.setStyleSheet("" if state in ("connected", "connecting") else "QGroupBox { color: #c62828; }")

    def set_tf_devices(self, devices: dict[str, list[str]]) -> None:
        """TensorFlow devices per normalized PCI bus id, e.g. ``worker:0 /device:GPU:0``."""
        if devices != self.tf_devices:
            self.tf_devices = devices
            self._dirty = True

    # ------------------------------------------------------------------ widgets

    def _host(self, host: str) -> QtWidgets.QGroupBox:
        box = self.hosts.get(host)
        if box is None:
            self.empty.hide()
            box = QtWidgets.QGroupBox(f"Host {host}")
            layout = QtWidgets.QGridLayout(box)
            status = QtWidgets.QLabel("waiting for the agent's GPU report")
            status.setWordWrap(True)
            layout.addWidget(status, 0, 0, 1, 2)
            self.host_status[host] = status
            self.hosts[host] = box
            self.host_layout.insertWidget(self.host_layout.count() - 1, box)
        return box

    def _card(self, host: str, index: int) -> _Card:
        card = self.cards.get((host, index))
        if card is not None:
            return card
        box = self._host(host)
        title = "CPU and memory" if index < 0 else f"GPU {index}"
        inner = QtWidgets.QGroupBox(title)
        values = QtWidgets.QLabel()
        values.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        users = QtWidgets.QLabel()
        users.setWordWrap(True)
        plot = pg.PlotWidget()
        plot.setLabel("bottom", "seconds (0 = the latest sample)")
        plot.setBackground("w")
        plot.setFixedHeight(190)
        plot.setYRange(0, 100, padding=0.02)
        plot.setMouseEnabled(x=True, y=False)
        light_grid(plot)
        plot.setLabel("left", "%")
        plot.addLegend(offset=(5, 5))
        layout = QtWidgets.QVBoxLayout(inner)
        layout.addWidget(values)
        layout.addWidget(users)
        layout.addWidget(plot)
        card = _Card(inner, values, users, plot)
        card.follow = FollowX(plot, headroom=0.01)
        card.first, card.second = self._series((host, index))  # the history, kept from the first sample on
        first_name, second_name = ("CPU %", "memory %") if index < 0 else ("utilization %", "memory %")
        # One-pixel pens: a wider one is stroked point by point (see gui.run.tabs.training.PEN_PX).
        first = plot.plot(pen=pg.mkPen(UTIL_COLOUR, width=1), name=first_name)
        second = plot.plot(pen=pg.mkPen(MEMORY_COLOUR, width=1), name=second_name)
        for curve in (first, second):
            fit_to_pixels(curve)
        card.curves = (first, second)
        self.cards[(host, index)] = card
        grid = box.layout()
        assert isinstance(grid, QtWidgets.QGridLayout)
        # Its place by index (the host's card first), whatever order the cards were made in.
        made = sorted(k for k in self.cards if k[0] == host)
        first = made.index((host, index))
        for position, key in enumerate(made[first:], start=first):
            grid.removeWidget(self.cards[key].box)
            grid.addWidget(self.cards[key].box, 1 + position // 2, position % 2)
        return card

    # ------------------------------------------------------------------ drawing

    def refresh(self) -> None:
        if not self._dirty:
            return
        self._dirty = False
        pending = self.pending_cards()
        for key in pending[:CARDS_PER_FRAME]:
            self._card(*key)
        if len(pending) > CARDS_PER_FRAME:
            self._dirty = True  # the next frame makes the next few
        grid_mode = self.grid_mode
        self.grid_scroll.setVisible(grid_mode)
        if grid_mode:
            self.grid.select(*(self.focus or (None, None)))
            self.grid.refresh()
        for (host, index), card in self.cards.items():
            shown = self.shown((host, index))
            card.box.setVisible(shown)
            if not shown:
                continue  # only the cards on screen are drawn
            sample = self.latest.get(host, {})
            if index < 0:
                card.values.setText(self._host_text(sample))
                card.users.setText(self._host_users(sample))
            else:
                gpu = next((g for g in sample.get("gpus") or [] if isinstance(g, dict) and g.get("index") == index), {})
                card.box.setTitle(f"GPU {index}: {gpu.get('name') or 'unknown'}")
                card.values.setText(self._gpu_text(gpu))
                card.users.setText(self._gpu_users(gpu))
            assert card.curves is not None
            drawn = _drawn_key(card)
            if card.drawn == drawn:
                continue  # nothing new on this GPU: its curves stand as they are
            if not self._in_view(card):
                continue  # scrolled out of view: drawn when it comes back (_on_cards_moved)
            card.drawn = drawn
            now = max((s.last() or (0.0, 0.0))[0] for s in (card.first, card.second))
            oldest = 0.0
            for series, curve in zip((card.first, card.second), card.curves, strict=True):
                x, mean = series.arrays()  # pyqtgraph's peak downsampling fits them to the pixels
                curve.setData(x - now, mean, connect="finite")
                oldest = min(oldest, float(x[0] - now) if len(x) else 0.0)
            assert card.follow is not None
            card.follow.update(oldest, 0.0)  # moved only when the history outgrows it
            settle(card.plot)

    @staticmethod
    def _host_text(sample: dict[str, Any]) -> str:
        f: dict[str, Any] = sample["figures"] if isinstance(sample.get("figures"), dict) else {}
        return (
            f"CPU {_num(f.get('cpu_percent'), '.0f', ' %')} of {f.get('cpu_count', '?')} cores   "
            f"load {_num(f.get('load1'), '.2f', '')}   "
            f"memory {_mib(f.get('memory_used_bytes'))} of {_mib(f.get('memory_total_bytes'))}"
        )

    @staticmethod
    def _host_users(sample: dict[str, Any]) -> str:
        roles: dict[str, Any] = sample["roles"] if isinstance(sample.get("roles"), dict) else {}
        parts = []
        for name, fig in sorted(roles.items()):
            if isinstance(fig, dict) and fig.get("alive", True):
                parts.append(f"{name} {_num(fig.get('cpu_percent'), '.0f', '%')} CPU, {_mib(fig.get('rss_bytes'))}")
        return "roles: " + ("; ".join(parts) if parts else "none running")

    @staticmethod
    def _gpu_text(gpu: dict[str, Any]) -> str:
        return (
            f"utilization {_num(gpu.get('utilization_gpu_percent'), '.0f', ' %')}   "
            f"memory {_mib(gpu.get('memory_used_bytes'))} of {_mib(gpu.get('memory_total_bytes'))}   "
            f"{_num(gpu.get('temperature_c'), '.0f', ' °C')}   "
            f"power {_num(gpu.get('power_w'), '.0f', ' W')} of {_num(gpu.get('power_limit_w'), '.0f', ' W')}   "
            f"SM clock {_num(gpu.get('sm_clock_mhz'), '.0f', ' MHz')}"
        )

    def _gpu_users(self, gpu: dict[str, Any]) -> str:
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
