"""A plot drawn for a report: at a size of its own, its key beside the data, as PNG or SVG bytes.

The plot on screen is laid out for the window (a 1340x150 strip is common); an exported plot is
laid out again at the size asked for (default 1600x900) or drawn at twice the size it has on
screen, with a key to the right of the view box, outside the curves. The plot's own item is
re-laid out for the export and put back before the GUI thread paints again, so the window never
shows the export's layout. SVG comes from pyqtgraph's exporter: curves, axes and text as vectors.
Several plots in one image are stacked in the order they have on screen.
"""

from __future__ import annotations

import re
import xml.dom.minidom
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyqtgraph as pg
import pyqtgraph.exporters
from PySide6 import QtCore, QtGui, QtWidgets

DEFAULT_SIZE = (1600, 900)
TWICE = 2  # the other size offered: the on-screen one, doubled
MAX_KEY_ENTRIES = 12
KEY_ROW, KEY_COLUMN = 2, 4  # the PlotItem's grid: the view box is (2, 2), the right axis (2, 3)


@dataclass(frozen=True)
class PlotExport:
    """What *Export plot* writes: into ``folder``, as ``suffix`` (``.png``, ``.svg``), at ``size``
    (None: twice the on-screen size), one file per plot or (``one_image``) the tab's plots in one."""

    folder: Path
    suffix: str = ".png"
    size: tuple[int, int] | None = DEFAULT_SIZE
    one_image: bool = False


@dataclass(frozen=True)
class PlotImage:
    """One plot to draw: the widget, and its curves with their names for the key."""

    plot: pg.PlotWidget
    key: list[tuple[Any, str]]


def screen_order(tab: QtWidgets.QWidget) -> list[pg.PlotWidget]:
    """The plots of ``tab`` that are on screen, top to bottom then left to right."""
    plots = [p for p in tab.findChildren(pg.PlotWidget) if p.isVisibleTo(tab)]

    def place(plot: pg.PlotWidget) -> tuple[int, int]:
        corner = plot.mapTo(tab, QtCore.QPoint(0, 0))
        return corner.y(), corner.x()

    return sorted(plots, key=place)


def plot_title(plot: pg.PlotWidget) -> str:
    """The plot's title, else the titles of the boxes around it, outermost first (a GPU card's plot
    has none of its own: ``Host 127.0.0.1 GPU 0``)."""
    title = re.sub(r"<[^>]+>", "", plot.getPlotItem().titleLabel.text or "").strip()
    if title:
        return title
    boxes = []
    parent = plot.parentWidget()
    while parent is not None:
        if isinstance(parent, QtWidgets.QGroupBox) and parent.title():
            boxes.append(parent.title().split(":")[0])  # "GPU 0: NVIDIA H100 ...": the GPU's number is enough
        parent = parent.parentWidget()
    return " ".join(reversed(boxes))


def slug(text: str, *, fallback: str) -> str:
    """A file-name part: letters, digits and dashes only (a title or run name may hold anything)."""
    made = re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()[:60]
    return made or fallback


def export_size(plot: pg.PlotWidget, size: tuple[int, int] | None) -> tuple[int, int]:
    """``size``, or twice the plot's size on screen when ``size`` is None."""
    if size is not None:
        return size
    return TWICE * max(plot.width(), 1), TWICE * max(plot.height(), 1)


def render(image: PlotImage, suffix: str, size: tuple[int, int] | None) -> bytes:
    """``image``'s plot as PNG or SVG bytes (on the GUI thread: Qt paints there): laid out at
    ``size`` with its key to the right of the data, or (``size`` None) as on screen, drawn at twice
    its pixels."""
    item = image.plot.getPlotItem()
    with _laid_out(item, image.key, None if size is None else size):
        if suffix == ".svg":
            return bytes(pyqtgraph.exporters.SVGExporter(item).export(toBytes=True))
        return _png(_image(item, export_size(image.plot, size)[0]))


def render_stack(images: list[PlotImage], suffix: str, size: tuple[int, int] | None) -> bytes:
    """Several plots in one image, stacked in the given order: each ``size``'s width and an equal
    share of its height (``size`` None: each at twice its on-screen size)."""
    parts: list[tuple[pg.PlotItem, tuple[int, int], list[tuple[Any, str]]]] = []
    for image in images:
        part = export_size(image.plot, None) if size is None else (size[0], max(1, size[1] // len(images)))
        parts.append((image.plot.getPlotItem(), part, image.key))
    if suffix == ".svg":
        return _svg_stack(parts, scaled=size is None)
    rendered = []
    for item, part, key in parts:
        with _laid_out(item, key, None if size is None else part):
            rendered.append(_image(item, part[0]))
    width = max(i.width() for i in rendered)
    out = QtGui.QImage(width, sum(i.height() for i in rendered), QtGui.QImage.Format.Format_ARGB32)
    out.fill(QtGui.QColor("white"))
    painter = QtGui.QPainter(out)
    y = 0
    for one in rendered:
        painter.drawImage(0, y, one)
        y += one.height()
    painter.end()
    return _png(out)


class _laid_out:
    """The plot item at ``size`` (None: as it is) with a key to the right of its view box, for the
    time of an export; as it was after."""

    def __init__(self, item: pg.PlotItem, key: list[tuple[Any, str]], size: tuple[int, int] | None) -> None:
        self.item = item
        self.key = key
        self.size = size
        self.geometry = item.geometry()
        self.legend: pg.LegendItem | None = None
        self.x_link: pg.ViewBox | None = None
        self.hidden_legend = item.legend if item.legend is not None and item.legend.isVisible() else None

    def __enter__(self) -> None:
        item = self.item
        if self.key:
            if self.hidden_legend is not None:
                self.hidden_legend.hide()  # drawn inside the view box, over the curves
            legend = pg.LegendItem(labelTextColor="k", labelTextSize="10pt")
            for curve, name in self.key[:MAX_KEY_ENTRIES]:
                legend.addItem(curve, name)
            # Its own size, not the row's: stretched to the view box's height, the key's rows
            # spread apart and a name stood far from its line.
            legend.setSizePolicy(QtWidgets.QSizePolicy.Policy.Fixed, QtWidgets.QSizePolicy.Policy.Fixed)
            item.layout.addItem(legend, KEY_ROW, KEY_COLUMN)
            item.layout.setAlignment(legend, QtCore.Qt.AlignmentFlag.AlignTop)
            self.legend = legend
        box = item.getViewBox()
        # A linked axis follows its partner by pixels: laid out alone at another size, it would
        # show another range (the step-time plot's steps ran past the loss plot's).
        self.x_link = box.linkedView(box.XAxis)
        if self.x_link is not None:
            box.setXLink(None)
        if self.size is not None:
            item.setGeometry(QtCore.QRectF(self.geometry.topLeft(), QtCore.QSizeF(*self.size)))
        item.layout.activate()
        item.getViewBox().updateMatrix()

    def __exit__(self, *_exc: object) -> None:
        item = self.item
        if self.legend is not None:
            item.layout.removeItem(self.legend)
            scene = self.legend.scene()
            if scene is not None:
                scene.removeItem(self.legend)
            self.legend.setParentItem(None)
        if self.hidden_legend is not None:
            self.hidden_legend.show()
        item.setGeometry(self.geometry)
        item.layout.activate()
        box = item.getViewBox()
        if self.x_link is not None:
            box.setXLink(self.x_link)
        box.updateMatrix()


def _image(item: pg.PlotItem, width: int) -> QtGui.QImage:
    exporter = pyqtgraph.exporters.ImageExporter(item)
    exporter.parameters()["width"] = width  # the height follows the item's aspect
    exporter.parameters()["background"] = pg.mkColor("w")
    image = exporter.export(toBytes=True)
    assert isinstance(image, QtGui.QImage)
    return image


def _png(image: QtGui.QImage) -> bytes:
    buffer = QtCore.QBuffer()
    buffer.open(QtCore.QIODevice.OpenModeFlag.WriteOnly)
    if not image.save(buffer, "PNG"):  # type: ignore[call-overload]  # PySide6 takes a str here at run time
        raise ValueError("the plot could not be encoded as PNG")
    return bytes(buffer.data().data())


def _svg_stack(parts: list[tuple[pg.PlotItem, tuple[int, int], list[tuple[Any, str]]]], *, scaled: bool) -> bytes:
    """The plots' SVG drawings one under the other in one ``<svg>``, each in a translated group."""
    out = xml.dom.minidom.Document()
    root = out.createElement("svg")
    root.setAttribute("xmlns", "http://www.w3.org/2000/svg")
    root.setAttribute("version", "1.2")
    out.appendChild(root)
    y = 0.0
    width = 0.0
    for item, part, key in parts:
        with _laid_out(item, key, None if scaled else part):
            drawn = bytes(pyqtgraph.exporters.SVGExporter(item).export(toBytes=True))
            height = item.geometry().height()
            width = max(width, item.geometry().width())
        # Our own exporter's output, made a line above: not outside input.
        svg = xml.dom.minidom.parseString(drawn).documentElement  # noqa: S318
        assert svg is not None
        group = out.createElement("g")
        group.setAttribute("transform", f"translate(0,{y:g})")
        for child in list(svg.childNodes):
            group.appendChild(out.importNode(child, True))
        root.appendChild(group)
        y += height
    root.setAttribute("width", f"{width:g}px")
    root.setAttribute("height", f"{y:g}px")
    root.setAttribute("viewBox", f"0 0 {width:g} {y:g}")
    return out.toxml(encoding="UTF-8")
