"""The cluster overview: hosts as boxes, their roles inside as tiles coloured by state (a straggler
in a colour of its own), each with its own batches/s and a bar for its GPUs' utilisation; the legend
gives the run's global steps/s and examples/s (:mod:`core.views.rates`). Clicking a tile selects
that role everywhere.

One painted widget rather than a widget per role: 64 workers on 8 hosts cost one ``paintEvent``
at the frame rate, and only when the model changed. Tiles shrink to fit the space (down to a
legible minimum, then the widget asks its scroll area for more height).

Past ``host_tiles_from`` roles (256; 1,024 workers on 128 hosts) a tile per role stops meaning
anything: the overview shows a tile per host instead (its roles running of all, the spread of its
batches/s, its worst state first as its colour, a strip of a cell per role), the hosts in trouble
first. Clicking a host shows its roles' tiles; the legend's "‹ All hosts" goes back.

Signals:
    sig_role_selected(str): a tile was clicked; the payload is the role (``worker:3``).
    sig_role_menu(str, QPoint): a tile was right-clicked (selected first); the role and the
        global position for its context menu.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from PySide6 import QtCore, QtGui, QtWidgets

from core.views.overview import (
    HOST_TILES_FROM,
    HostBox,
    HostTile,
    Overview,
    RoleCell,
    RoleLike,
    build_overview,
    host_tiles,
)
from core.views.rates import BATCHES, StepRates, cluster_text, rate_text, role_text

STRAGGLER_COLOUR = "#00838f"  # teal: slow, not broken; apart from every state's colour
CATEGORY_COLOURS = {
    "failed": "#c62828",
    "crash-looping": "#f2a900",  # amber: not backoff's orange, failed's red or stalled's brown
    "stalled": "#b45309",
    "waiting": "#6a1b9a",
    "backoff": "#d9822b",
    "straggler": STRAGGLER_COLOUR,
    "starting": "#b8860b",
    "running": "#2e7d32",
    "stopping": "#b8860b",
    "pending": "#8a8a8a",
    "succeeded": "#2b6cb0",
    "stopped": "#6b6b6b",
}
GAP = 8
PAD = 6
HEADER_H = 20
LEGEND_H = 24
CELL_GAP = 4
MAX_CELL = QtCore.QSize(112, 46)  # a name and a rate: taller tiles took the plots' room
MIN_CELL = QtCore.QSize(40, 30)
MIN_TEXT_PX = 8  # the smallest tile text, still legible
MIN_BOX_W = 200  # 8 hosts side by side on a 1920-pixel screen; a long host name is elided
DARK_TEXT_CATEGORIES = frozenset({"crash-looping"})  # white on amber does not read: dark text there
HOST_TILE = QtCore.QSize(176, 58)  # a host's name, its roles running and its rates; 10 a row at 1,920 px
BACK_TEXT = "‹ All hosts"


@dataclass(frozen=True)
class _Layout:
    boxes: tuple[QtCore.QRect, ...]
    cells: tuple[tuple[QtCore.QRect, str], ...]  # role names: the cells are read from the model at paint
    cell_size: QtCore.QSize
    height: int
    host_tiles: tuple[tuple[QtCore.QRect, str], ...] = ()  # host mode, nothing picked: hosts, read at paint
    back: QtCore.QRect | None = None  # the legend's way back to every host


def _rate_texts(rate: float | None) -> tuple[str, ...]:
    """What a tile may say of its batches/s, longest first: ``34.1 batches/s``, ``34.1/s``."""
    if rate is None:
        return ("",)
    return (f"{rate_text(rate)} {BATCHES}", f"{rate_text(rate)}/s")


def _fit(font: QtGui.QFont, name: str, rest: tuple[str, ...], *, box: QtCore.QRect) -> tuple[int, list[str]]:
    """The largest pixel size (0: the font's own) at which a tile shows its name and the lines
    under it (its rate; a state's words), stacked or on one line; a small tile drops the middle
    lines, then shows only the last (the figure, or the countdown: what the tile is there for)."""
    if not rest:
        return 0, [name]
    size = font.pixelSize() if font.pixelSize() > 0 else QtGui.QFontInfo(font).pixelSize()
    font = QtGui.QFont(font)
    for lines in ([name, *rest], [name, rest[-1]]) if len(rest) > 1 else ([name, *rest],):
        for pixels in range(size, MIN_TEXT_PX - 1, -1):
            font.setPixelSize(pixels)
            metrics = QtGui.QFontMetrics(font)
            widest = max(metrics.horizontalAdvance(line) for line in lines)
            if len(lines) * metrics.height() <= box.height() and widest <= box.width():
                return pixels, lines
            if len(lines) == 2 and metrics.horizontalAdvance(" ".join(lines)) <= box.width():
                return pixels, [" ".join(lines)]
    return MIN_TEXT_PX, [rest[-1]]  # the tile's place and tooltip name it


class ClusterOverview(QtWidgets.QWidget):
    """Paints an :class:`~core.views.overview.Overview`; see the module docstring."""

    sig_role_selected = QtCore.Signal(str)
    sig_role_menu = QtCore.Signal(str, QtCore.QPoint)

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setMouseTracking(True)
        self.setSizePolicy(QtWidgets.QSizePolicy.Policy.Expanding, QtWidgets.QSizePolicy.Policy.Expanding)
        self._model = build_overview(())
        self._selected: str | None = None
        self._layout: _Layout | None = None
        self.repaints = 0  # for tests and the frame benchmark: paints actually done
        self.painted_text: dict[str, str] = {}  # role -> the text its tile shows (for tests)
        self._fitted: dict[tuple[str, tuple[str, ...], int, int], tuple[int, list[str]]] = {}
        self.model_changes = 0  # set_roles calls that changed what is shown
        self.host_tiles_from = HOST_TILES_FROM
        self.drill: str | None = None  # in host mode, the host whose roles show
        self._host_tiles: tuple[HostTile, ...] | None = None  # built at layout from the model
        self._content_heights: dict[int, int] = {}  # width -> content_height, while the structure stands

    # -- inputs -------------------------------------------------------------------------------
    def set_roles(self, roles: Sequence[RoleLike], rates: StepRates | None = None) -> None:
        """Rebuild from the latest statuses and the run's rates; repaints only when something
        visible changed."""
        model = build_overview(roles, rates=rates)
        if model != self._model:
            structure_changed = [h.host for h in model.hosts] != [h.host for h in self._model.hosts] or [
                len(h.cells) for h in model.hosts
            ] != [len(h.cells) for h in self._model.hosts]
            if self.host_mode_for(model) and self.drill is None:
                # Host tiles: laid out again when their order (worst state first) moves.
                order = [t.host for t in host_tiles(model)]
                structure_changed = structure_changed or order != [t.host for t in self._tiles()]
            self._model = model
            self._host_tiles = None
            self.model_changes += 1
            if structure_changed:
                self._layout = None
                self._content_heights.clear()
                self.updateGeometry()
            self.update()

    def select_role(self, role: str | None) -> None:
        """Outline ``role`` (the selection made elsewhere, e.g. in the roles table)."""
        if role != self._selected:
            self._selected = role
            self.update()

    def show_host(self, host: str | None) -> None:
        """In host mode, show ``host``'s roles as tiles; None: a tile per host again."""
        if host != self.drill:
            self.drill = host
            self._layout = None
            self._content_heights.clear()
            self.updateGeometry()
            self.update()

    # -- what it shows (also read by tests) ---------------------------------------------------
    @property
    def model(self) -> Overview:
        return self._model

    def host_mode_for(self, model: Overview) -> bool:
        return model.role_count > self.host_tiles_from

    @property
    def host_mode(self) -> bool:
        """Past ``host_tiles_from`` roles: a tile per host (see the module docstring)."""
        return self.host_mode_for(self._model)

    def _tiles(self) -> tuple[HostTile, ...]:
        if self._host_tiles is None:
            self._host_tiles = host_tiles(self._model)
        return self._host_tiles

    def _hosts(self) -> tuple[HostBox, ...]:
        """The hosts whose roles are laid out as tiles: every host, or the one picked in host mode."""
        if not self.host_mode:
            return self._model.hosts
        return tuple(h for h in self._model.hosts if h.host == self.drill)

    def host_tile_rect(self, host: str) -> QtCore.QRect | None:
        return next((rect for rect, name in self._ensure_layout().host_tiles if name == host), None)

    def _current_tiles(self) -> dict[str, HostTile]:
        return {tile.host: tile for tile in self._tiles()}

    def shown_host_tiles(self) -> list[HostTile]:
        current = self._current_tiles()
        return [current[name] for _, name in self._ensure_layout().host_tiles if name in current]

    def back_rect(self) -> QtCore.QRect | None:
        return self._ensure_layout().back

    def host_tile_at(self, pos: QtCore.QPoint) -> HostTile | None:
        name = next((name for rect, name in self._ensure_layout().host_tiles if rect.contains(pos)), None)
        return None if name is None else self._current_tiles().get(name)

    def legend_text(self) -> str:
        parts = [f"{n} {cat}" for cat, n in self._model.counts]
        if said := cluster_text(self._model.rates):
            parts.append(said)
        return " · ".join(parts) if parts else "no roles"

    def cell_rect(self, role: str) -> QtCore.QRect | None:
        return next((rect for rect, name in self._ensure_layout().cells if name == role), None)

    def host_rect(self, host: str) -> QtCore.QRect | None:
        layout = self._ensure_layout()
        return next((rect for rect, box in zip(layout.boxes, self._hosts(), strict=True) if box.host == host), None)

    def role_at(self, pos: QtCore.QPoint) -> RoleCell | None:
        name = next((name for rect, name in self._ensure_layout().cells if rect.contains(pos)), None)
        return None if name is None else self._model.cell(name)

    # -- layout -------------------------------------------------------------------------------
    def _compute_layout(self, width: int, height: int) -> _Layout:
        if self.host_mode and self.drill is None:
            return self._host_layout(width)
        back = QtCore.QRect(GAP, 4, 110, LEGEND_H - 6) if self.host_mode else None
        hosts = self._hosts()
        if not hosts:
            return _Layout((), (), MAX_CELL, LEGEND_H, back=back)
        width = max(width, MIN_BOX_W + 2 * GAP)
        columns = max(1, min(len(hosts), (width - GAP) // (MIN_BOX_W + GAP)))
        box_w = (width - GAP * (columns + 1)) // columns
        inner_w = box_w - 2 * PAD
        chosen = None
        for cell_w in range(MAX_CELL.width(), MIN_CELL.width() - 1, -4):
            cell_h = max(MIN_CELL.height(), round(cell_w * MAX_CELL.height() / MAX_CELL.width()))
            per_row = max(1, (inner_w + CELL_GAP) // (cell_w + CELL_GAP))
            box_heights = [
                HEADER_H + 2 * PAD + math.ceil(len(h.cells) / per_row) * (cell_h + CELL_GAP) - CELL_GAP for h in hosts
            ]
            rows = [max(box_heights[i : i + columns]) for i in range(0, len(hosts), columns)]
            total = LEGEND_H + GAP + sum(rows) + GAP * len(rows)
            chosen = (cell_w, cell_h, per_row, box_heights, rows, total)
            if total <= height:
                break
        assert chosen is not None
        cell_w, cell_h, per_row, box_heights, rows, total = chosen
        # A box is no wider than its widest row of tiles needs (3 roles on one host stay compact).
        widest = max(min(len(h.cells), per_row) for h in hosts)
        box_w = max(MIN_BOX_W, min(box_w, widest * (cell_w + CELL_GAP) - CELL_GAP + 2 * PAD))
        boxes, cells = [], []
        y = LEGEND_H + GAP
        for row_index, row_h in enumerate(rows):
            for col in range(columns):
                i = row_index * columns + col
                if i >= len(hosts):
                    break
                x = GAP + col * (box_w + GAP)
                boxes.append(QtCore.QRect(x, y, box_w, box_heights[i]))
                for k, cell in enumerate(hosts[i].cells):
                    cx = x + PAD + (k % per_row) * (cell_w + CELL_GAP)
                    cy = y + PAD + HEADER_H + (k // per_row) * (cell_h + CELL_GAP)
                    cells.append((QtCore.QRect(cx, cy, cell_w, cell_h), cell.role))
            y += row_h + GAP
        return _Layout(tuple(boxes), tuple(cells), QtCore.QSize(cell_w, cell_h), total, back=back)

    def _host_layout(self, width: int) -> _Layout:
        tiles = self._tiles()
        per_row = max(1, (max(width, HOST_TILE.width() + 2 * GAP) - GAP) // (HOST_TILE.width() + GAP))
        placed = tuple(
            (
                QtCore.QRect(
                    GAP + (k % per_row) * (HOST_TILE.width() + GAP),
                    LEGEND_H + GAP + (k // per_row) * (HOST_TILE.height() + GAP),
                    HOST_TILE.width(),
                    HOST_TILE.height(),
                ),
                tile.host,
            )
            for k, tile in enumerate(tiles)
        )
        height = LEGEND_H + GAP + math.ceil(len(tiles) / per_row) * (HOST_TILE.height() + GAP)
        return _Layout((), (), HOST_TILE, height, host_tiles=placed)

    def _ensure_layout(self) -> _Layout:
        layout = self._layout
        if layout is None:
            layout = self._layout = self._compute_layout(self.width(), self.height())
            if layout.height > self.height():
                # May resize us at once (resizeEvent drops the cached layout): use this one now.
                self.setMinimumHeight(layout.height)
        return layout

    def resizeEvent(self, event: QtGui.QResizeEvent) -> None:
        self._layout = None
        super().resizeEvent(event)

    def content_height(self, width: int) -> int:
        """The height the hosts and tiles need at ``width`` with tiles at their full size: the
        window gives the overview that much, up to a limit (then the tiles shrink, then scroll).

        Laid out again only when the hosts, their roles or the host shown change: the window asks
        every frame, and the layout of 257 roles' tiles tried every tile size each time."""
        heights = self._content_heights
        if width not in heights:
            if len(heights) > 16:  # a resize drags through many widths
                heights.clear()
            heights[width] = self._compute_layout(width, 1 << 20).height
        return heights[width]

    def sizeHint(self) -> QtCore.QSize:
        return QtCore.QSize(800, self.content_height(max(self.width(), 800)))

    # -- painting -----------------------------------------------------------------------------
    def paintEvent(self, event: QtGui.QPaintEvent) -> None:
        self.repaints += 1
        layout = self._ensure_layout()
        painter = QtGui.QPainter(self)
        painter.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing)
        palette = self.palette()
        self._paint_legend(painter, palette, back=layout.back)
        clip = event.rect()
        # The layout is kept while the hosts and their order stay; what each tile shows is the
        # current model's (its rates move every frame).
        tiles = self._current_tiles() if layout.host_tiles else {}
        for rect, name in layout.host_tiles:
            tile = tiles.get(name)
            if tile is not None and rect.intersects(clip):  # 128 hosts and more: only those in view
                self._paint_host_tile(painter, rect, tile, palette=palette)
        for rect, host in zip(layout.boxes, self._hosts(), strict=True):
            painter.setPen(QtGui.QPen(palette.color(QtGui.QPalette.ColorRole.Mid), 1))
            painter.setBrush(palette.color(QtGui.QPalette.ColorRole.AlternateBase))
            painter.drawRoundedRect(rect, 6, 6)
            header = QtCore.QRect(rect.x() + PAD, rect.y() + 2, rect.width() - 2 * PAD, HEADER_H)
            painter.setPen(palette.color(QtGui.QPalette.ColorRole.WindowText))
            font = painter.font()
            font.setBold(True)
            painter.setFont(font)
            summary = ", ".join(f"{n} {c}" for c, n in host.counts)
            text = f"{host.host}   {summary}"
            painter.drawText(
                header,
                QtCore.Qt.AlignmentFlag.AlignVCenter | QtCore.Qt.AlignmentFlag.AlignLeft,
                painter.fontMetrics().elidedText(text, QtCore.Qt.TextElideMode.ElideRight, header.width()),
            )
        # The layout is kept while the hosts and their role counts stay; what each tile shows
        # (state, rate, GPU use) is always the current model's.
        current = {cell.role: cell for host in self._hosts() for cell in host.cells}
        for rect, name in layout.cells:
            cell = current.get(name)
            if cell is not None:
                self._paint_cell(painter, rect, cell)
        painter.end()

    def _paint_host_tile(
        self, painter: QtGui.QPainter, rect: QtCore.QRect, tile: HostTile, *, palette: QtGui.QPalette
    ) -> None:
        """A host: coloured by its worst state, its name and roles running of all, its batches/s
        spread or its trouble, and a strip of a cell per role in its state's colour."""
        colour = QtGui.QColor(CATEGORY_COLOURS.get(tile.worst, CATEGORY_COLOURS["pending"]))
        painter.setPen(QtCore.Qt.PenStyle.NoPen)
        painter.setBrush(colour)
        painter.drawRoundedRect(rect, 5, 5)
        if any(r == self._selected for r in tile.roles_named):
            painter.setBrush(QtCore.Qt.BrushStyle.NoBrush)
            painter.setPen(QtGui.QPen(palette.color(QtGui.QPalette.ColorRole.Highlight), 3))
            painter.drawRoundedRect(rect.adjusted(-1, -1, 1, 1), 6, 6)
        ink = QtGui.QColor("#1f1f1f" if tile.worst in DARK_TEXT_CATEGORIES else "white")
        inner = rect.adjusted(6, 3, -6, -10)
        font = QtGui.QFont(self.font())
        font.setBold(True)
        painter.setFont(font)
        painter.setPen(ink)
        metrics = painter.fontMetrics()
        line_h = metrics.height()
        counts = f"{tile.running}/{tile.roles}"
        counts_w = metrics.horizontalAdvance(counts) + 6
        top = QtCore.QRect(inner.x(), inner.y(), inner.width(), line_h)
        painter.drawText(top, QtCore.Qt.AlignmentFlag.AlignRight, counts)
        painter.drawText(
            top.adjusted(0, 0, -counts_w, 0),
            QtCore.Qt.AlignmentFlag.AlignLeft,
            metrics.elidedText(tile.host, QtCore.Qt.TextElideMode.ElideMiddle, inner.width() - counts_w),
        )
        font.setBold(False)
        painter.setFont(font)
        second = QtCore.QRect(inner.x(), inner.y() + line_h, inner.width(), line_h)
        text = self.host_tile_line(tile)
        painter.drawText(
            second,
            QtCore.Qt.AlignmentFlag.AlignLeft,
            painter.fontMetrics().elidedText(text, QtCore.Qt.TextElideMode.ElideRight, second.width()),
        )
        self.painted_text[tile.host] = f"{tile.host} {counts} {text}"
        # The strip: a cell per role in its state's colour, on a darker track.
        strip = QtCore.QRectF(rect.x() + 4, rect.bottom() - 8, rect.width() - 8, 5)
        painter.setBrush(colour.darker(150))
        painter.drawRect(strip)
        n = max(len(tile.categories), 1)
        cell_w = strip.width() / n
        for i, cat in enumerate(tile.categories):
            if cat != "running":  # running is the tile's green already: the strip names the rest
                painter.setBrush(QtGui.QColor(CATEGORY_COLOURS.get(cat, CATEGORY_COLOURS["pending"])).lighter(130))
                painter.drawRect(QtCore.QRectF(strip.x() + i * cell_w, strip.y(), max(cell_w, 2.0), strip.height()))

    @staticmethod
    def host_tile_line(tile: HostTile) -> str:
        """A host tile's second line: its trouble when it has some, else its batches/s spread."""
        if tile.trouble:
            return ", ".join(f"{n} {c}" for c, n in tile.trouble)
        if tile.rate_median is None:
            return ", ".join(f"{n} {c}" for c, n in tile.counts) or "no roles"
        assert tile.rate_min is not None and tile.rate_max is not None
        if rate_text(tile.rate_min) == rate_text(tile.rate_max):
            return f"{rate_text(tile.rate_median)} {BATCHES}"
        return f"{rate_text(tile.rate_min)}–{rate_text(tile.rate_max)} {BATCHES}"

    def _paint_legend(self, painter: QtGui.QPainter, palette: QtGui.QPalette, *, back: QtCore.QRect | None) -> None:
        x = GAP
        metrics = painter.fontMetrics()
        if back is not None:
            # Drilled into a host: the way back first, then the whole cluster's counts.
            painter.setPen(palette.color(QtGui.QPalette.ColorRole.Link))
            painter.drawText(back, QtCore.Qt.AlignmentFlag.AlignVCenter | QtCore.Qt.AlignmentFlag.AlignLeft, BACK_TEXT)
            x = back.right() + 8
        for cat, n in self._model.counts:
            painter.setPen(QtCore.Qt.PenStyle.NoPen)
            painter.setBrush(QtGui.QColor(CATEGORY_COLOURS[cat]))
            painter.drawRoundedRect(QtCore.QRect(x, 7, 12, 12), 2, 2)
            label = f"{n} {cat}"
            painter.setPen(palette.color(QtGui.QPalette.ColorRole.WindowText))
            painter.drawText(QtCore.QPoint(x + 16, 17), label)
            x += 16 + metrics.horizontalAdvance(label) + 14
        if said := cluster_text(self._model.rates):
            painter.drawText(QtCore.QPoint(x + 8, 17), said)

    def _paint_cell(self, painter: QtGui.QPainter, rect: QtCore.QRect, cell: RoleCell) -> None:
        colour = QtGui.QColor(CATEGORY_COLOURS[cell.category])
        painter.setPen(QtCore.Qt.PenStyle.NoPen)
        painter.setBrush(colour)
        painter.drawRoundedRect(rect, 4, 4)
        if cell.gpus:
            # The bottom strip: how busy this role's GPUs are (dark track, light fill).
            bar = QtCore.QRect(rect.x() + 3, rect.bottom() - 6, rect.width() - 6, 4)
            painter.setBrush(colour.darker(160))
            painter.drawRect(bar)
            util = cell.gpu_utilization_percent
            if util is not None:
                fill = QtCore.QRect(bar.x(), bar.y(), round(bar.width() * max(0.0, min(util, 100.0)) / 100), 4)
                painter.setBrush(QtGui.QColor("#e8f5e9"))
                painter.drawRect(fill)
        painter.setPen(QtGui.QColor("#1f1f1f" if cell.category in DARK_TEXT_CATEGORIES else "white"))
        text_rect = rect.adjusted(3, 1, -3, -7 if cell.gpus else -1)
        lines = self._fit_tile_text(painter, cell, text_rect)
        self.painted_text[cell.role] = " ".join(lines)
        if len(lines) > 1:
            # The name in bold on top, the lines under it plain, spread over the tile's height.
            line_h = painter.fontMetrics().height()
            gap = (text_rect.height() - len(lines) * line_h) / (len(lines) + 1) if len(lines) > 2 else 0
            for i, line in enumerate(lines):
                if len(lines) == 2:
                    y = text_rect.top() if i == 0 else text_rect.bottom() - line_h + 1
                else:
                    y = round(text_rect.top() + gap + i * (line_h + gap))
                painter.drawText(
                    QtCore.QRect(text_rect.left(), y, text_rect.width(), line_h),
                    QtCore.Qt.AlignmentFlag.AlignHCenter | QtCore.Qt.AlignmentFlag.AlignVCenter,
                    line,
                )
                if i == 0:
                    font = painter.font()
                    font.setBold(False)
                    painter.setFont(font)
        else:
            painter.drawText(text_rect, QtCore.Qt.AlignmentFlag.AlignCenter, lines[0])
        painter.setFont(self.font())
        if cell.role == self._selected:
            painter.setBrush(QtCore.Qt.BrushStyle.NoBrush)
            painter.setPen(QtGui.QPen(self.palette().color(QtGui.QPalette.ColorRole.Highlight), 3))
            painter.drawRoundedRect(rect.adjusted(-1, -1, 1, 1), 5, 5)

    def _fit_tile_text(self, painter: QtGui.QPainter, cell: RoleCell, text_rect: QtCore.QRect) -> list[str]:
        """Set a bold font for the tile and say what it shows: its name, its state's words and its
        own batches/s, stacked or on one line, in a smaller font where a small tile needs it; every
        tile shows its rate (``w10 2.00/s`` on a 40-pixel tile at 64 workers), never only some."""
        font = QtGui.QFont(self.font())
        font.setBold(True)
        texts = _rate_texts(cell.batches_per_s)
        key = (cell.short, (*cell.notes, texts[0]), text_rect.width(), text_rect.height())
        fitted = self._fitted.get(key)
        if fitted is None:
            own = QtGui.QFontInfo(font).pixelSize()
            tries = [
                _fit(font, cell.short, (*cell.notes, text) if text else cell.notes, box=text_rect) for text in texts
            ]
            # The figure's name where every line fits at the tile's own size, else the short form.
            every = 2 + len(cell.notes)
            fitted = next((t for t in tries[:-1] if t[0] in (0, own) and len(t[1]) == every), tries[-1])
            self._fitted[key] = fitted
            if len(self._fitted) > 4096:  # rates change: keep the cache small
                self._fitted.clear()
        pixels, lines = fitted
        if pixels:
            font.setPixelSize(pixels)
        painter.setFont(font)
        return lines

    # -- interaction --------------------------------------------------------------------------
    def mousePressEvent(self, event: QtGui.QMouseEvent) -> None:
        pos = event.position().toPoint()
        back = self.back_rect()
        if back is not None and back.contains(pos):
            self.show_host(None)
            return
        tile = self.host_tile_at(pos)
        if tile is not None:
            self.show_host(tile.host)
            return
        cell = self.role_at(pos)
        if cell is not None:
            self.select_role(cell.role)
            self.sig_role_selected.emit(cell.role)
        super().mousePressEvent(event)

    def contextMenuEvent(self, event: QtGui.QContextMenuEvent) -> None:
        cell = self.role_at(event.pos())
        if cell is None:
            super().contextMenuEvent(event)
            return
        self.select_role(cell.role)
        self.sig_role_selected.emit(cell.role)
        self.sig_role_menu.emit(cell.role, event.globalPos())

    def event(self, event: QtCore.QEvent) -> bool:
        if event.type() == QtCore.QEvent.Type.ToolTip:
            assert isinstance(event, QtGui.QHelpEvent)
            cell = self.role_at(event.pos())
            tile = self.host_tile_at(event.pos())
            if tile is not None:
                lines = [f"{tile.host}: {tile.running} of {tile.roles} roles running"]
                lines.append(", ".join(f"{n} {c}" for c, n in tile.counts))
                if tile.rate_median is not None:
                    lines.append(
                        f"{BATCHES}: median {rate_text(tile.rate_median)}, "
                        f"lowest {rate_text(tile.rate_min or 0.0)}, highest {rate_text(tile.rate_max or 0.0)}"
                    )
                lines.append("click: its roles")
                QtWidgets.QToolTip.showText(event.globalPos(), "\n".join(lines), self)
            elif cell is None:
                QtWidgets.QToolTip.hideText()
            else:
                lines = [f"{cell.role}: {cell.category}"]
                if cell.trouble:
                    lines.append(cell.trouble)
                if cell.straggler:
                    lines.append(cell.straggler)
                if said := role_text(self._model.rates, cell.role):
                    lines.append(said)
                if cell.gpus:
                    util = "" if cell.gpu_utilization_percent is None else f", {cell.gpu_utilization_percent:.0f}% busy"
                    lines.append("GPUs " + ",".join(map(str, cell.gpus)) + util)
                QtWidgets.QToolTip.showText(event.globalPos(), "\n".join(lines), self)
            return True
        return super().event(event)
