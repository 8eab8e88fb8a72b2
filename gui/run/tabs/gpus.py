"""GPU panel: per host and GPU, live utilization and memory with current values, temperature,
power, and which roles (and TensorFlow devices) use it. A host without GPUs says so and shows its
CPU and memory instead.

Past ``grid_from`` GPUs (default 8: more cards than a screen holds) the panel leads with a
:class:`~gui.run.gpu_grid.GpuGrid`, a small tile per GPU grouped by host, and shows the full card of
the GPU clicked there only; every GPU's history is kept either way, so a card opens with it.
Past ``hosts_from`` hosts or ``gpus_from`` GPUs (128 hosts of 8 GPUs) it leads with a
:class:`~gui.run.gpu_host_grid.GpuHostGrid` instead, a tile per host, sorted and filtered from the
bar above it; a host clicked there shows its GPUs' tiles, a GPU its card, and the bar's
breadcrumb (*All hosts › host › GPU*) goes back. Only that host's boxes and cards are made.

Cards are made when shown, and at most ``CARDS_PER_FRAME`` a frame (a plot widget
costs 50-300 ms on a loaded machine, and the first frame on the GPUs tab of a 64-GPU run made
17 of them at once, 6.7 s without turning the event loop; two a frame still took 0.52 s of
GUI-thread CPU in one turn on a loaded CI machine). The samples go to the history
whether or not a card exists, so a card made later opens with all of it.

Fed with the agents' ``sample`` and ``gpu_status`` events. The figures (every GPU's history, the
latest samples, the cards' texts, which card shows) are kept, Qt-free, by
:class:`core.views.gpu_figures.GpuFigures`, which the panel owns; every plot reads one of its
bounded :class:`~core.views.series.Series`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyqtgraph as pg
from PySide6 import QtCore, QtWidgets

from core.views.gpu_figures import HISTORY_CAPACITY, GpuFigures, GpuKey
from core.views.gpu_hosts import HOST_SORTS
from core.views.series import Series
from gui.run.gpu_grid import GpuGrid
from gui.run.gpu_host_grid import GpuHostGrid
from gui.run.tabs.plotting import FollowX, axis_label, fit_to_pixels, light_grid, plot_with_menu_on_demand, settle

UTIL_COLOUR = "#2b6cb0"
MEMORY_COLOUR = "#d9822b"
PERCENT_MARGIN = 6  # percentage points of empty view below 0 % and above 100 %
CARDS_PER_FRAME = 1
CARD_HISTORY_ROOM = 0.25  # a card's time axis: room kept for its history to grow into, a share of it


def _drawn_key(card: _Card) -> tuple[int, ...]:
    """What a card's curves show: its two series, and how many points each had."""
    return (id(card.first), card.first.appended, id(card.second), card.second.appended)


@dataclass
class _Card:
    """One GPU (or a host's CPU/memory) with its two series and widgets."""

    box: QtWidgets.QGroupBox
    values: QtWidgets.QLabel
    users: QtWidgets.QLabel
    plot: pg.PlotWidget
    first: Series = field(default_factory=lambda: Series(capacity=HISTORY_CAPACITY))
    second: Series = field(default_factory=lambda: Series(capacity=HISTORY_CAPACITY))
    curves: tuple[pg.PlotDataItem, pg.PlotDataItem] | None = None
    drawn: tuple[int, ...] = ()  # the series (and their lengths) the curves were last set from
    follow: FollowX | None = None  # the X range on the whole history, newest at 0


class GpuPanel(QtWidgets.QWidget):
    """Cards per host: the host's CPU and memory, then one card per GPU, drawn from its
    :class:`~core.views.gpu_figures.GpuFigures`."""

    def __init__(self) -> None:
        super().__init__()
        self.figures = GpuFigures()
        self.hosts: dict[str, QtWidgets.QGroupBox] = {}
        self.host_status: dict[str, QtWidgets.QLabel] = {}
        self.cards: dict[GpuKey, _Card] = {}
        self._dirty = False  # a change of the panel's own (a card scrolled into view): redraw
        self._figures_drawn = -1  # the figures' version the cards show
        self._cards_waited = False  # the last refresh left the cards to this one (the host grid's)
        self._live = True  # the run shown is live: the cards' time axes keep room for their histories
        self._hosts_listed = 0  # how many of the figures' hosts have their box
        self.grid = GpuGrid(self.figures.board)
        self.grid.sig_gpu_selected.connect(self._on_gpu_selected)
        self.grid_scroll = QtWidgets.QScrollArea()
        self.grid_scroll.setWidgetResizable(True)
        self.grid_scroll.setWidget(self.grid)
        self.grid_scroll.hide()
        self.drill: str | None = None  # in host mode, the host whose GPUs show
        self.host_states: dict[str, tuple[str, str]] = {}  # host -> link state, reason
        self.gpu_status: dict[str, str] = {}  # host -> the agent's line about NVML
        self.host_grid = GpuHostGrid(self.figures.board)
        self.host_grid.sig_host_selected.connect(self.show_host)
        self.host_scroll = QtWidgets.QScrollArea()
        self.host_scroll.setWidgetResizable(True)
        self.host_scroll.setWidget(self.host_grid)
        self.host_scroll.hide()
        self.back = QtWidgets.QPushButton("‹ All hosts")
        self.back.setFlat(True)
        self.back.clicked.connect(lambda: self.show_host(None))
        self.crumbs = QtWidgets.QLabel()
        self.sort = QtWidgets.QComboBox()
        self.sort.addItems(list(HOST_SORTS))
        self.sort.setToolTip("Order of the host tiles: attention puts idle and hot GPUs first")
        self.filter = QtWidgets.QLineEdit()
        self.filter.setPlaceholderText("filter hosts")
        self.filter.setClearButtonEnabled(True)
        self.filter.setMaximumWidth(220)
        for signal in (self.sort.currentTextChanged, self.filter.textChanged):
            signal.connect(lambda _text: self.host_grid.set_order(self.sort.currentText(), self.filter.text()))
        self.bar = QtWidgets.QWidget()
        row = QtWidgets.QHBoxLayout(self.bar)
        row.setContentsMargins(4, 2, 4, 2)
        row.addWidget(self.back)
        row.addWidget(self.crumbs, 1)
        row.addWidget(QtWidgets.QLabel("sort"))
        row.addWidget(self.sort)
        row.addWidget(self.filter)
        self.bar.hide()
        top = QtWidgets.QWidget()
        top_layout = QtWidgets.QVBoxLayout(top)
        top_layout.setContentsMargins(0, 0, 0, 0)
        top_layout.setSpacing(0)
        top_layout.addWidget(self.bar)
        top_layout.addWidget(self.host_scroll)
        top_layout.addWidget(self.grid_scroll)
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
        self.split.addWidget(top)
        # The grids' half shows only with a grid in it: before the first samples (or with a card
        # per GPU) it was an empty half of the tab above the hosts' boxes.
        self.top = top
        top.hide()
        self.split.addWidget(scroll)
        self.split.setSizes([400, 400])
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.split)

    def pending_cards(self) -> list[GpuKey]:
        """The cards that should show but are not made yet (focused first, see
        :meth:`GpuFigures.pending`); :meth:`refresh` makes ``CARDS_PER_FRAME`` of them."""
        return self.figures.pending(self.cards)

    def _in_view(self, card: _Card) -> bool:
        """Whether any of ``card``'s plot is inside the cards' scrolled view (or not laid out yet)."""
        if not card.plot.isVisible():
            return True  # not shown yet (a card made this frame): draw it, it is about to show
        viewport = self.cards_scroll.viewport()
        corner = card.plot.mapTo(viewport, QtCore.QPoint(0, 0))
        return QtCore.QRect(corner, card.plot.size()).intersects(viewport.rect())

    def _on_cards_moved(self, *_args: object) -> None:
        shown = self.figures.shown
        stale = (c for k, c in self.cards.items() if c.drawn != _drawn_key(c) and shown(k) and self._in_view(c))
        if any(stale):
            self._dirty = True
            self.refresh()

    def show_host(self, host: str | None) -> None:
        """In host mode: show ``host``'s GPU tiles, its CPU card and its first GPU's card; None:
        back to a tile per host."""
        self.drill = host
        self.grid.show_host(host)
        if host is not None:
            first = next(iter(self.figures.board.latest_of(host)), None)
            if first is not None and (self.figures.focus is None or self.figures.focus[0] != host):
                self.figures.select((host, first.index))
        self._dirty = True
        self.refresh()

    def breadcrumb(self) -> str:
        """Where the GPUs tab is in host mode: ``All hosts (128) › 127.0.0.5 › GPU 3``."""
        parts = [f"All hosts ({self.figures.board.host_count:,})"]
        if self.drill is not None:
            parts.append(self.drill)
            focus = self.figures.focus
            if focus is not None and focus[0] == self.drill:
                parts.append(f"GPU {focus[1]}")
        return " › ".join(parts)

    def _on_gpu_selected(self, host: str, index: int) -> None:
        self.figures.select((host, index))
        self._card(host, index)
        self._dirty = True
        self.refresh()

    def clear(self) -> None:
        for box in self.hosts.values():
            box.deleteLater()
        self.hosts.clear()
        self.host_status.clear()
        self.cards.clear()
        self.figures.clear()  # its tile board too: the grid's
        self._hosts_listed = 0
        self.host_states.clear()
        self.gpu_status.clear()
        self.host_grid.link_states.clear()
        self.drill = None
        self.grid.show_host(None)
        self.grid_scroll.hide()
        self.host_scroll.hide()
        self.bar.hide()
        self.top.hide()
        self.empty.show()

    def set_live(self, *, live: bool) -> None:
        """Whether the run shown is live: only then does a card's time axis keep room for its
        history to grow into (a finished run's ends at its oldest sample)."""
        if live == self._live:
            return
        self._live = live
        for card in self.cards.values():
            if card.follow is not None and card.follow.set_room(behind=CARD_HISTORY_ROOM if live else 0.0):
                card.drawn = ()  # redrawn, to fit its range
        self._dirty = True

    # ------------------------------------------------------------------ input

    def add_sample(self, data: dict[str, Any]) -> None:
        """Take one ``sample`` event's data."""
        self.add_samples([data])

    def add_samples(self, batch: list[dict[str, Any]]) -> None:
        """Take ``sample`` events' data, in order (:meth:`GpuFigures.add_samples`); a new host
        gets its box at once."""
        self.figures.add_samples(batch)
        hosts = self.figures.hosts
        if not self.figures.host_mode:  # else a host's box is made when it is picked
            for host in hosts[self._hosts_listed :]:
                self._host(host)
        self._hosts_listed = len(hosts)

    def set_gpu_status(self, host: str, status: str) -> None:
        """Take a ``gpu_status`` event: the agent's one line about NVML on ``host``."""
        self.gpu_status[host] = status
        if host in self.hosts or not self.figures.host_mode:
            self._host(host)
            self.host_status[host].setText(status)

    def set_link_state(self, host: str, state: str, reason: str) -> None:
        """Take a ``host_state`` event: how TowerDeck's link to that host's agent is doing."""
        self.host_states[host] = (state, reason)
        self.host_grid.set_link_state(host, state)
        if host in self.hosts or not self.figures.host_mode:
            self._show_link_state(self._host(host), host)

    def _show_link_state(self, box: QtWidgets.QGroupBox, host: str) -> None:
        state, reason = self.host_states.get(host, ("connected", ""))
        box.setTitle(f"Host {host}" if state == "connected" else f"Host {host}: {state}")
        box.setToolTip(reason)
        box.setStyleSheet("" if state in ("connected", "connecting") else "QGroupBox { color: #c62828; }")

    def set_tf_devices(self, devices: dict[str, list[str]]) -> None:
        """TensorFlow devices per normalized PCI bus id, e.g. ``worker:0 /device:GPU:0``."""
        self.figures.set_tf_devices(devices)

    # ------------------------------------------------------------------ widgets

    def _host(self, host: str) -> QtWidgets.QGroupBox:
        box = self.hosts.get(host)
        if box is None:
            self.empty.hide()
            box = QtWidgets.QGroupBox(f"Host {host}")
            layout = QtWidgets.QGridLayout(box)
            status = QtWidgets.QLabel(self.gpu_status.get(host, "waiting for the agent's GPU report"))
            status.setWordWrap(True)
            layout.addWidget(status, 0, 0, 1, 2)
            self.host_status[host] = status
            self.hosts[host] = box
            self.host_layout.insertWidget(self.host_layout.count() - 1, box)
            if host in self.host_states:
                self._show_link_state(box, host)
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
        plot = plot_with_menu_on_demand()  # a card's menus when first asked for: see there
        axis_label(plot, "bottom", "time", unit="s, 0 = the latest sample")
        plot.setBackground("w")
        plot.setFixedHeight(190)
        # A figure at 100 % (a busy CPU) drawn on the top edge read as clipped: room above and below.
        plot.setYRange(-PERCENT_MARGIN, 100 + PERCENT_MARGIN, padding=0)
        plot.setMouseEnabled(x=True, y=False)
        light_grid(plot)
        axis_label(plot, "left", "", unit="%")
        first_name, second_name = ("CPU %", "memory %") if index < 0 else ("utilization %", "memory %")
        # The key above the plot, not a legend inside it: pyqtgraph's sat over the curves.
        key_label = QtWidgets.QLabel(
            f'<span style="color:{UTIL_COLOUR}">■</span> {first_name} &nbsp; '
            f'<span style="color:{MEMORY_COLOUR}">■</span> {second_name}'
        )
        key_label.setTextFormat(QtCore.Qt.TextFormat.RichText)
        layout = QtWidgets.QVBoxLayout(inner)
        layout.addWidget(values)
        layout.addWidget(users)
        layout.addWidget(key_label)
        layout.addWidget(plot)
        card = _Card(inner, values, users, plot)
        # Room for the history to grow into: at 1 %, the axis moved (and re-ticked) at every sample
        # of a history under 100 samples, each host's cards once a second.
        card.follow = FollowX(plot, headroom=0.01, behind=CARD_HISTORY_ROOM if self._live else 0.0)
        card.first, card.second = self.figures.history[(host, index)]  # kept from the first sample on
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
        figures = self.figures
        if not self._dirty and figures.version == self._figures_drawn:
            return
        self._dirty = False
        self._figures_drawn = figures.version
        pending = self.pending_cards()
        for key in pending[:CARDS_PER_FRAME]:
            self._card(*key)
        if len(pending) > CARDS_PER_FRAME:
            self._dirty = True  # the next frame makes the next few
        grid_mode, host_mode = figures.grid_mode, figures.host_mode
        self.bar.setVisible(host_mode)
        if self.top.isHidden() == (grid_mode or host_mode):
            self.top.setVisible(grid_mode or host_mode)
            if grid_mode or host_mode:  # the grid's half, as the tab opened with
                half = max(sum(self.split.sizes()), 800) // 2
                self.split.setSizes([half, half])
        self.host_scroll.setVisible(host_mode and self.drill is None)
        self.grid_scroll.setVisible(grid_mode and not (host_mode and self.drill is None))
        if host_mode:
            self.back.setEnabled(self.drill is not None)
            self.sort.setVisible(self.drill is None)
            self.filter.setVisible(self.drill is None)
            self.crumbs.setText(self.breadcrumb())
            shown_host = figures.focus[0] if figures.focus else None
            for host, box in self.hosts.items():
                box.setVisible(host == shown_host)
            if self.drill is None and self._cards_waited:
                # The cards' frame; the host grid's refresh on the next. Together they made one
                # frame at 256 GPUs: a host grid's refresh (the summaries of the hosts whose
                # samples came, their tiles' paint) and the cards'. With samples every frame
                # (1,024 hosts) the two take turns, each every other frame (5 a second).
                self._dirty = True
            elif self.drill is None:
                asked = self.host_grid.refresh()
                if self.host_grid.stale:
                    self._dirty = True  # its tiles' next share on the next frame
                if asked:
                    self._dirty = self._cards_waited = True  # the cards on the next frame
                    return
        self._cards_waited = False
        if grid_mode and not (host_mode and self.drill is None):
            self.grid.show_host(self.drill if host_mode else None)
            self.grid.select(*(figures.focus or (None, None)))
            self.grid.refresh()
            if self.grid.stale:
                self._dirty = True  # its tiles' next share on the next frame
        for key, card in self.cards.items():
            shown = figures.shown(key)
            card.box.setVisible(shown)
            if not shown:
                continue  # only the cards on screen are drawn
            title, values, users = figures.card_text(key)
            if card.box.title() != title:
                card.box.setTitle(title)
            card.values.setText(values)
            card.users.setText(users)
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
