"""The GPU host grid: one small tile per host for clusters past a tile per GPU (128 hosts of 8
GPUs, up to 1,024 hosts: 8,192 GPUs). A tile gives the host's GPUs' mean utilisation with its
min and max, memory used, the hottest temperature and a strip of a cell per GPU (how busy, its
heat as the cell's edge); it stands out when a GPU a role holds sits idle (amber) or one is hot
(the heat colour). Clicking a tile asks for that host's GPUs.

One painted widget reading :class:`~core.views.gpu_hosts.HostSummaries`; only the tiles in the
scrolled view are painted, and ``refresh()`` (the window's frame timer) repaints only when the
board, the order or the filter changed: only the tiles of the hosts whose samples came (or that
moved), a share a frame, unless the order, the filter or a link changed. The 32 tiles of a 256-GPU
run repainted for each host's sample were 3-4 ms of most frames on the GPUs tab.

Signals:
    sig_host_selected(str): a tile was clicked; the host.
"""

from __future__ import annotations

import functools
import math

from PySide6 import QtCore, QtGui, QtWidgets

from core.views.gpu_hosts import GpuHost, HostSummaries, select_hosts
from core.views.gpu_tiles import GpuTileBoard
from gui.run.gpu_grid import HEAT_COLOURS, UTIL_COLOUR, repaint_share

TILE = QtCore.QSize(204, 70)
GAP = 6
IDLE_COLOUR = "#f2a900"  # amber, as a crash loop's: a GPU a role holds that does nothing
LOST_COLOUR = "#c62828"
# Tiles repainted a frame for new samples, at least; more past TILE_SHARES times that many tiles,
# so each is repainted within a second at 10 frames a second. A second's samples of 32 hosts come
# within a frame or two: 13-21 tiles, 2-4 ms of one frame's paint.
TILES_PER_FRAME = 6
TILE_SHARES = 10


def _cell_colour(util: float | None) -> QtGui.QColor:
    """Utilisation as the strength of the utilisation blue: empty is near white, 100 % full."""
    return _colour_at(None if util is None else round(max(0.0, min(util, 100.0))))


@functools.lru_cache(maxsize=128)
def _colour_at(percent: int | None) -> QtGui.QColor:
    """:func:`_cell_colour` by whole percent: made once each (a host's tiles repaint every second)."""
    if percent is None:
        return QtGui.QColor("#d0d0d0")
    base = QtGui.QColor(UTIL_COLOUR)
    f = percent / 100.0
    return QtGui.QColor(
        round(255 + (base.red() - 255) * f), round(255 + (base.green() - 255) * f), round(255 + (base.blue() - 255) * f)
    )


@functools.lru_cache(maxsize=16)
def _pen(colour: str, width: int) -> QtGui.QPen:
    return QtGui.QPen(QtGui.QColor(colour), width)


class GpuHostGrid(QtWidgets.QWidget):
    """See the module docstring."""

    sig_host_selected = QtCore.Signal(str)

    def __init__(self, board: GpuTileBoard, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.summaries = HostSummaries(board)
        self.sort = "host"
        self.filter_text = ""
        self.link_states: dict[str, str] = {}  # host -> its link's state when not connected
        self._painted: tuple[int, str, str, tuple[tuple[str, str], ...]] | None = None
        self._rects: list[tuple[QtCore.QRect, GpuHost]] = []
        self._rect_of: dict[str, QtCore.QRect] = {}  # host -> its tile
        self._stale: dict[str, None] = {}  # hosts whose tiles wait for a repaint, oldest first
        self.repaints = 0
        self.tiles_painted = 0  # read by tests: tiles drawn, over all repaints
        self.setMouseTracking(True)

    # -- inputs -------------------------------------------------------------------------------
    def _wanted(self) -> tuple[int, str, str, tuple[tuple[str, str], ...]]:
        return (self.summaries.board.version, self.sort, self.filter_text, tuple(sorted(self.link_states.items())))

    def refresh(self, *, force: bool = False) -> bool:
        """Called at the frame rate: re-lay out and repaint if the board, the order or the filter
        changed; the tiles of hosts whose samples came a share a frame (:data:`TILES_PER_FRAME`,
        every tile within a second). Returns whether a repaint was asked for."""
        wanted = self._wanted()
        if force or self._painted != wanted or self.summaries.behind:
            before, painted = self._rects, self._painted
            height = self.minimumHeight()
            self._painted = wanted
            self._relayout()
            if force or painted is None or painted[1:] != wanted[1:] or self.minimumHeight() != height:
                self._stale.clear()
                self.update()  # a new order, filter or link state: every tile
                return True
            # The same hosts in the same places: only the tiles whose summary is a new one (a
            # summary is the same object until its host's next sample: HostSummaries' cache).
            shown = {host.host: (rect, host) for rect, host in before}
            gone = QtGui.QRegion()
            for rect, host in self._rects:
                old = shown.pop(host.host, None)
                if old is None or old[1] is not host or old[0] != rect:
                    self._stale[host.host] = None
            for rect, _host in shown.values():  # a host gone from where it was
                gone += rect
            if not gone.isEmpty():
                self.update(gone)
        if not self._stale:
            return False
        repaint_share(self, self._stale, self._rect_of, share=self._share())
        return True

    @property
    def stale(self) -> int:
        """Tiles whose hosts' new figures wait for a summary or a repaint (the next frames')."""
        return len(self._stale) + self.summaries.behind

    def _share(self) -> int:
        """Hosts summarised and tiles repainted a frame for new samples: every one within a second."""
        return max(TILES_PER_FRAME, -(-self.summaries.board.host_count // TILE_SHARES))

    def set_order(self, sort: str, text: str) -> None:
        self.sort, self.filter_text = sort, text
        self.refresh()

    def set_link_state(self, host: str, state: str) -> None:
        if state in ("connected", "connecting"):
            self.link_states.pop(host, None)
        else:
            self.link_states[host] = state

    # -- what it shows (read by tests) --------------------------------------------------------
    def shown_hosts(self) -> list[GpuHost]:
        return [h for _, h in self._rects]

    def host_rect(self, host: str) -> QtCore.QRect | None:
        return self._rect_of.get(host)

    def host_at(self, pos: QtCore.QPoint) -> GpuHost | None:
        return next((h for r, h in self._rects if r.contains(pos)), None)

    # -- layout -------------------------------------------------------------------------------
    def _relayout(self) -> None:
        hosts = select_hosts(self.summaries.hosts(limit=self._share()), sort=self.sort, text=self.filter_text)
        width = max(self.width(), TILE.width() + 2 * GAP)
        per_row = max(1, (width - GAP) // (TILE.width() + GAP))
        self._rects = [
            (
                QtCore.QRect(
                    GAP + (k % per_row) * (TILE.width() + GAP),
                    GAP + (k // per_row) * (TILE.height() + GAP),
                    TILE.width(),
                    TILE.height(),
                ),
                host,
            )
            for k, host in enumerate(hosts)
        ]
        self._rect_of = {host.host: rect for rect, host in self._rects}
        height = GAP + math.ceil(len(hosts) / per_row) * (TILE.height() + GAP)
        if height != self.minimumHeight():
            self.setMinimumHeight(height)

    def resizeEvent(self, event: QtGui.QResizeEvent) -> None:
        self._relayout()
        super().resizeEvent(event)

    def sizeHint(self) -> QtCore.QSize:
        return QtCore.QSize(8 * (TILE.width() + GAP) + GAP, 400)

    # -- painting -----------------------------------------------------------------------------
    def paintEvent(self, event: QtGui.QPaintEvent) -> None:
        self.repaints += 1
        painter = QtGui.QPainter(self)
        painter.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing)
        palette = self.palette()
        font = painter.font()
        bold = QtGui.QFont(font)
        bold.setBold(True)
        clip = event.region()  # the tiles asked for (refresh), within what is on screen
        for rect, host in self._rects:
            if clip.intersects(rect):  # only what is on screen: 1,024 tiles, a screen shows ~100
                self._paint_tile(painter, rect, host, font=font, bold=bold, palette=palette)
        painter.end()

    def _border(self, host: GpuHost) -> tuple[QtGui.QColor, int]:
        if host.host in self.link_states:
            return QtGui.QColor(LOST_COLOUR), 3
        if host.heat >= 2:
            return QtGui.QColor(HEAT_COLOURS[host.heat]), 2
        if host.idle:
            return QtGui.QColor(IDLE_COLOUR), 2
        return QtGui.QColor(HEAT_COLOURS[host.heat]), 1

    def _paint_tile(
        self,
        painter: QtGui.QPainter,
        rect: QtCore.QRect,
        host: GpuHost,
        *,
        font: QtGui.QFont,
        bold: QtGui.QFont,
        palette: QtGui.QPalette,
    ) -> None:
        self.tiles_painted += 1
        border, width = self._border(host)
        painter.setPen(QtGui.QPen(border, width))
        painter.setBrush(palette.color(QtGui.QPalette.ColorRole.Base))
        painter.drawRoundedRect(rect.adjusted(1, 1, -1, -1), 5, 5)
        inner = rect.adjusted(6, 3, -6, -4)
        ink = palette.color(QtGui.QPalette.ColorRole.Text)
        left = QtCore.Qt.AlignmentFlag.AlignLeft | QtCore.Qt.AlignmentFlag.AlignTop
        right = QtCore.Qt.AlignmentFlag.AlignRight | QtCore.Qt.AlignmentFlag.AlignTop
        metrics = QtGui.QFontMetrics(bold)
        line_h = metrics.height()
        # Line 1: the host and its mean; the hottest GPU on the right, in its heat colour.
        state = self.link_states.get(host.host)
        hottest = f"{host.hottest_c:.0f}°C" if host.hottest_c is not None else ""
        painter.setFont(font)
        painter.setPen(QtGui.QColor(HEAT_COLOURS[host.heat]) if host.heat else ink)
        painter.drawText(inner, right, hottest)
        hottest_w = painter.fontMetrics().horizontalAdvance(hottest) + 6
        painter.setFont(bold)
        painter.setPen(QtGui.QColor(LOST_COLOUR) if state else ink)
        mean = "n/a" if host.util_mean is None else f"{host.util_mean:.0f}%"
        title = f"{host.host}  {state}" if state else f"{host.host}  {mean}"
        painter.drawText(
            QtCore.QRect(inner.x(), inner.y(), inner.width() - hottest_w, line_h),
            left,
            metrics.elidedText(title, QtCore.Qt.TextElideMode.ElideMiddle, inner.width() - hottest_w),
        )
        # Line 2: the spread and memory; or what needs a look.
        painter.setFont(font)
        second = QtCore.QRect(inner.x(), inner.y() + line_h, inner.width(), line_h)
        spread = f"{host.util_min:.0f}–{host.util_max:.0f}%" if host.util_min is not None else ""
        memory = "" if host.memory_fraction is None else f"mem {host.memory_fraction:.0%}"
        note = ""
        if host.idle:
            note = f"{len(host.idle)} idle"
        elif host.hot:
            note = f"{len(host.hot)} hot"
        painter.setPen(ink)
        painter.drawText(second, left, "  ".join(p for p in (spread, memory) if p))
        if note:
            painter.setPen(QtGui.QColor(IDLE_COLOUR if host.idle else HEAT_COLOURS[max(host.heat, 2)]))
            painter.setFont(bold)
            painter.drawText(second, right, note)
        # The strip: a cell per GPU by index, on whole pixels and without antialiasing: square
        # cells gain nothing from it, and antialiased they were most of a tile's paint.
        n = max(len(host.cells), 1)
        strip_top = second.bottom() + 4
        strip_h = max(6, inner.bottom() - strip_top)
        cell_w = (inner.width() - (n - 1) * 2) / n
        idle = set(host.idle)
        painter.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing, False)
        for i, (util, heat) in enumerate(zip(host.cells, host.cell_heat, strict=True)):
            x0 = inner.x() + round(i * (cell_w + 2))
            x1 = inner.x() + round(i * (cell_w + 2) + cell_w)
            if i in idle:
                edge = _pen(IDLE_COLOUR, 2)
            elif heat:
                edge = _pen(HEAT_COLOURS[heat], 2)
            else:
                edge = _pen("#9aa5b1", 1)
            painter.setPen(edge)
            painter.setBrush(_cell_colour(util))
            # A pen of width w straddles the rectangle's edge: inset so the cell keeps its size.
            inset = edge.width() // 2
            painter.drawRect(QtCore.QRect(x0 + inset, strip_top + inset, x1 - x0 - 1 - inset, strip_h - 1 - inset))
        painter.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing, True)

    # -- interaction --------------------------------------------------------------------------
    def mousePressEvent(self, event: QtGui.QMouseEvent) -> None:
        host = self.host_at(event.position().toPoint())
        if host is not None:
            self.sig_host_selected.emit(host.host)
        super().mousePressEvent(event)

    def event(self, event: QtCore.QEvent) -> bool:
        if event.type() == QtCore.QEvent.Type.ToolTip:
            assert isinstance(event, QtGui.QHelpEvent)
            host = self.host_at(event.pos())
            if host is None:
                QtWidgets.QToolTip.hideText()
            else:
                text = host.text().replace(" · ", "\n")
                if state := self.link_states.get(host.host):
                    text += f"\nlink: {state}"
                QtWidgets.QToolTip.showText(event.globalPos(), text + "\nclick: its GPUs", self)
            return True
        return super().event(event)
