"""The GPU grid: one small tile per GPU, grouped by host, for clusters with more GPUs than cards
fit on a screen (64 GPUs on 8 hosts). A tile shows utilisation and memory now and as sparklines
over the last samples, temperature/power as its border colour, and the roles on it. Clicking a
tile asks for that GPU's full card.

One painted widget reading a :class:`~core.views.gpu_tiles.GpuTileBoard`; ``refresh()`` (the
window's frame timer) repaints only what changed since the last paint: every tile for a new
layout, else the tiles of the GPUs whose samples came, a share a frame (:data:`TILES_PER_FRAME`).

Signals:
    sig_gpu_selected(str, int): a tile was clicked; host and GPU index.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from core.views.gpu_tiles import SPARK_POINTS, GpuTile, GpuTileBoard
from core.views.overview import short_role

UTIL_COLOUR = "#2b6cb0"
MEMORY_COLOUR = "#d9822b"
HEAT_COLOURS = ("#b0b0b0", "#d4a017", "#d9822b", "#c62828")
TILE = QtCore.QSize(176, 78)
GAP = 6
HOST_HEADER_H = 22
# GPUs whose new samples are repainted a frame: the agents sample in step, so a second's samples
# of 16 hosts come within a frame or two, and repainting all 128 tiles in that frame was 7 ms of
# its CPU (offscreen, quiet), the GPUs tab's p95 in bench_sim_scale at 128 workers (19.5 ms,
# against 10.9 at 256, whose host grid already went a share a frame). More GPUs than
# TILES_PER_FRAME x TILE_SHARES: a larger share, so every tile is repainted within a second.
TILES_PER_FRAME = 8
TILE_SHARES = 10


def repaint_share(
    widget: QtWidgets.QWidget, stale: dict[Any, None], rect_of: dict[Any, QtCore.QRect], *, share: int
) -> None:
    """Repaint the first ``share`` of ``stale``'s tiles (their places in ``rect_of``) and forget
    them: the GPU grid's and the host grid's tiles of new samples, a share a frame."""
    dirty = QtGui.QRegion()
    for key in list(stale)[:share]:
        del stale[key]
        place = rect_of.get(key)
        if place is not None:
            dirty += place
    widget.update(dirty)


def _gib(n: float | None) -> str:
    return "?" if n is None else f"{n / 2**30:.0f}"


class GpuGrid(QtWidgets.QWidget):
    """See the module docstring."""

    sig_gpu_selected = QtCore.Signal(str, int)

    def __init__(self, board: GpuTileBoard | None = None, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.board = board if board is not None else GpuTileBoard()  # an empty board is falsy (len 0)
        self._laid_out_version = -1  # the board's version the layout and the stale tiles are of
        self._stale: dict[tuple[str, int], None] = {}  # GPUs with a new sample not yet repainted, in order
        self._selected: tuple[str, int] | None = None
        self.only_host: str | None = None  # one host's GPUs only (a host picked in the host grid)
        self._rects: list[tuple[QtCore.QRect, GpuTile]] = []
        self._rect_of: dict[tuple[str, int], QtCore.QRect] = {}
        self._headers: list[tuple[QtCore.QRect, str]] = []
        self._laid_out_host: str | None = None
        self.repaints = 0
        self.tiles_painted = 0  # tiles painted, all paints together (read by tests)
        self.setMouseTracking(True)

    # -- inputs -------------------------------------------------------------------------------
    def refresh(self) -> bool:
        """Called at the frame rate: repaint what the board changed since the last call (a new
        layout: every tile; new samples: their GPUs' tiles, a share a frame). Returns whether a
        repaint was asked for."""
        if self.board.version != self._laid_out_version or self._laid_out_host != self.only_host:
            before, headers, height = self._rects, self._headers, self.minimumHeight()
            host_before = self._laid_out_host
            self._laid_out_version = self.board.version
            self._relayout()
            same = (
                host_before == self.only_host
                and self.minimumHeight() == height
                and [(r, t.key) for r, t in before] == [(r, t.key) for r, t in self._rects]
            )
            if not same:
                self._stale.clear()
                self.update()  # a new layout: every tile
                return True
            for (header, text), (_, said) in zip(self._headers, headers, strict=True):
                if text != said:
                    self.update(header)  # a host's summary line (cheap: one line of text)
            for (_, was), (_, tile) in zip(before, self._rects, strict=True):
                if was is not tile:  # a tile is the same object until its GPU's next sample
                    self._stale[tile.key] = None
        if not self._stale:
            return False
        repaint_share(self, self._stale, self._rect_of, share=max(TILES_PER_FRAME, -(-len(self._rects) // TILE_SHARES)))
        return True

    @property
    def stale(self) -> int:
        """GPUs whose new samples wait for a repaint (the next frames')."""
        return len(self._stale)

    def show_host(self, host: str | None) -> None:
        """Show ``host``'s GPUs only, or every host's (None)."""
        if host != self.only_host:
            self.only_host = host
            self.refresh()

    def select(self, host: str | None, index: int | None = None) -> None:
        key = None if host is None or index is None else (host, index)
        if key != self._selected:
            self._selected = key
            self.update()

    # -- what it shows (read by tests) --------------------------------------------------------
    def tile_rect(self, host: str, index: int) -> QtCore.QRect | None:
        return self._rect_of.get((host, index))

    def host_summary(self, host: str, tiles: list[GpuTile]) -> str:
        utils = [t.utilization_percent for t in tiles if t.utilization_percent is not None]
        text = f"{host}   {len(tiles)} GPU{'s' if len(tiles) != 1 else ''}"
        if utils:
            text += f" · mean {sum(utils) / len(utils):.0f}% busy"
        hot = sum(t.heat >= 2 for t in tiles)
        if hot:
            text += f" · {hot} hot"
        return text

    def headers(self) -> list[str]:
        return [text for _, text in self._headers]

    # -- layout -------------------------------------------------------------------------------
    def _relayout(self) -> None:
        width = max(self.width(), TILE.width() + 2 * GAP)
        per_row = max(1, (width - GAP) // (TILE.width() + GAP))
        rects, headers = [], []
        y = GAP
        self._laid_out_host = self.only_host
        hosts = (
            self.board.by_host() if self.only_host is None else [(self.only_host, self.board.tiles_of(self.only_host))]
        )
        for host, tiles in hosts:
            headers.append((QtCore.QRect(GAP, y, width - 2 * GAP, HOST_HEADER_H), self.host_summary(host, tiles)))
            y += HOST_HEADER_H
            for k, tile in enumerate(tiles):
                x = GAP + (k % per_row) * (TILE.width() + GAP)
                ty = y + (k // per_row) * (TILE.height() + GAP)
                rects.append((QtCore.QRect(x, ty, TILE.width(), TILE.height()), tile))
            y += math.ceil(len(tiles) / per_row) * (TILE.height() + GAP) + GAP
        self._rects, self._headers = rects, headers
        self._rect_of = {tile.key: rect for rect, tile in rects}
        if y != self.minimumHeight():
            self.setMinimumHeight(y)

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
        ink = palette.color(QtGui.QPalette.ColorRole.WindowText)
        font = painter.font()
        bold = QtGui.QFont(font)
        bold.setBold(True)
        clip = event.region()  # the tiles asked for (refresh), within what is on screen
        for rect, text in self._headers:
            if clip.intersects(rect):
                painter.setFont(bold)
                painter.setPen(ink)
                painter.drawText(rect, QtCore.Qt.AlignmentFlag.AlignVCenter, text)
        for rect, tile in self._rects:
            if clip.intersects(rect):  # only what is on screen
                self.tiles_painted += 1
                self._paint_tile(painter, rect, tile, font=font, bold=bold, palette=palette)
        painter.end()

    def _paint_tile(
        self,
        painter: QtGui.QPainter,
        rect: QtCore.QRect,
        tile: GpuTile,
        *,
        font: QtGui.QFont,
        bold: QtGui.QFont,
        palette: QtGui.QPalette,
    ) -> None:
        selected = tile.key == self._selected
        border = QtGui.QColor(HEAT_COLOURS[tile.heat])
        width = 3 if selected else (1 if tile.heat == 0 else 2)
        if selected:
            border = palette.color(QtGui.QPalette.ColorRole.Highlight)
        painter.setPen(QtGui.QPen(border, width))
        painter.setBrush(palette.color(QtGui.QPalette.ColorRole.Base))
        painter.drawRoundedRect(rect.adjusted(1, 1, -1, -1), 5, 5)
        inner = rect.adjusted(6, 3, -6, -3)
        ink = palette.color(QtGui.QPalette.ColorRole.Text)
        painter.setFont(bold)
        painter.setPen(ink)
        util = "n/a" if tile.utilization_percent is None else f"{tile.utilization_percent:.0f}%"
        painter.drawText(
            inner, QtCore.Qt.AlignmentFlag.AlignLeft | QtCore.Qt.AlignmentFlag.AlignTop, f"GPU {tile.index}  {util}"
        )
        painter.setFont(font)
        right = []
        if tile.temperature_c is not None:
            right.append(f"{tile.temperature_c:.0f}°C")
        if tile.power_w is not None:
            right.append(f"{tile.power_w:.0f} W")
        painter.setPen(QtGui.QColor(HEAT_COLOURS[tile.heat]) if tile.heat else ink)
        painter.drawText(inner, QtCore.Qt.AlignmentFlag.AlignRight | QtCore.Qt.AlignmentFlag.AlignTop, " ".join(right))
        line_h = painter.fontMetrics().height()
        spark = QtCore.QRectF(inner.x(), inner.y() + line_h + 2, inner.width(), inner.height() - 2 * line_h - 4)
        painter.setPen(QtGui.QPen(QtGui.QColor(MEMORY_COLOUR), 1.2))
        painter.drawPath(self._spark_path(spark, tile.memory_history))
        painter.setPen(QtGui.QPen(QtGui.QColor(UTIL_COLOUR), 1.6))
        painter.drawPath(self._spark_path(spark, tile.utilization_history))
        painter.setPen(ink)
        memory = f"{_gib(tile.memory_used_bytes)}/{_gib(tile.memory_total_bytes)} GiB"
        roles = " ".join(short_role(r) for r in tile.roles) or "no role"
        bottom = QtCore.QRect(inner.x(), inner.bottom() - line_h, inner.width(), line_h)
        memory_w = painter.fontMetrics().horizontalAdvance(memory) + 6
        painter.drawText(bottom, QtCore.Qt.AlignmentFlag.AlignRight, memory)
        roles_rect = bottom.adjusted(0, 0, -memory_w, 0)
        painter.drawText(
            roles_rect,
            QtCore.Qt.AlignmentFlag.AlignLeft,
            painter.fontMetrics().elidedText(roles, QtCore.Qt.TextElideMode.ElideRight, roles_rect.width()),
        )

    @staticmethod
    def _spark_path(area: QtCore.QRectF, values: tuple[float, ...]) -> QtGui.QPainterPath:
        """Values 0..1 across the tile's width, newest at the right; a NaN breaks the line.

        Built from arrays by pyqtgraph (``connect="finite"``): 64 tiles x 2 sparklines x 120
        points point by point in Python were most of the grid's paint."""
        if not values:
            return QtGui.QPainterPath()
        y = np.asarray(values, dtype=np.float64)
        step = area.width() / max(SPARK_POINTS - 1, 1)
        x = area.right() - step * np.arange(len(y) - 1, -1, -1, dtype=np.float64)
        path: QtGui.QPainterPath = pg.arrayToQPath(x, area.bottom() - y * area.height(), connect="finite")
        return path

    # -- interaction --------------------------------------------------------------------------
    def mousePressEvent(self, event: QtGui.QMouseEvent) -> None:
        pos = event.position().toPoint()
        tile = next((t for r, t in self._rects if r.contains(pos)), None)
        if tile is not None:
            self.select(tile.host, tile.index)
            self.sig_gpu_selected.emit(tile.host, tile.index)
        super().mousePressEvent(event)
