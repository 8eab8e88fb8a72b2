"""Export from the window: the current tab's plots as PNG or SVG (pyqtgraph's exporters), and the
run's figures as CSV files (:mod:`core.run.csv_export`, on a worker thread).

The plots are rendered on the GUI thread (Qt painting must be), into bytes; only writing them to
disk and the CSV export run off it (:func:`gui.offthread.run_off_thread`). Right-clicking a plot
opens pyqtgraph's own *Export...* dialog, which offers the same formats and more.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyqtgraph as pg
import pyqtgraph.exporters
from PySide6 import QtCore, QtGui, QtWidgets

from gui.offthread import Relay, run_off_thread
from gui.window.hosts import ExportHost

FORMATS = {".png": "PNG image (*.png)", ".svg": "SVG drawing (*.svg)"}


def _close_paths_safely(correct: Callable[..., None]) -> Callable[..., None]:
    """pyqtgraph 0.14's SVG exporter reads every token of a path as ``x,y`` and raises on the
    ``Z`` (close path) that Qt writes for rectangles (a ViewBox's background): every SVG export of
    a plot failed, ours and the right-click dialog's (reported upstream: pyqtgraph/pyqtgraph#3485). Hide the ``Z``s from
    it and put them back after."""
    if getattr(correct, "towerdeck_patched", False):
        return correct

    def correct_coordinates(node: Any, *args: Any, **kwargs: Any) -> None:
        closed = []
        for path in node.getElementsByTagName("path"):
            tokens = path.getAttribute("d").split()
            if any(t in ("Z", "z") for t in tokens):
                path.setAttribute("d", " ".join(t for t in tokens if t not in ("Z", "z")))
                closed.append(path)
        correct(node, *args, **kwargs)
        for path in closed:
            path.setAttribute("d", path.getAttribute("d").rstrip() + " Z")

    correct_coordinates.towerdeck_patched = True  # type: ignore[attr-defined]
    return correct_coordinates


_svg_module = sys.modules[pyqtgraph.exporters.SVGExporter.__module__]
_svg_module.correctCoordinates = _close_paths_safely(_svg_module.correctCoordinates)  # type: ignore[attr-defined]


MAX_KEY_ENTRIES = 12


def series_names(window: ExportHost, plot: pg.PlotWidget) -> list[tuple[Any, str]]:
    """The curves of ``plot`` and what each is (a role), for the exported file's key: the window
    shows its key beside the plots, which an exported plot would lose."""
    training = window.training
    if plot is training.loss_plot:
        return [(smooth, role) for role, (_raw, smooth) in training.loss_curves.items() if smooth.isVisible()]
    if plot is training.time_plot:
        return [(curve, role) for role, curve in training.time_curves.items() if curve.isVisible()]
    return [(c, c.name()) for c in plot.getPlotItem().listDataItems() if c.name() and c.isVisible()]


def plot_bytes(plot: pg.PlotWidget, suffix: str, key: list[tuple[Any, str]] | None = None) -> bytes:
    """``plot`` rendered as a PNG or SVG file's bytes (on the GUI thread), with a key of ``key``'s
    curves added for the export and removed after."""
    item = plot.getPlotItem()
    legend = None
    if key and item.legend is None:
        legend = pg.LegendItem(offset=(-10, 10), brush=pg.mkBrush(255, 255, 255, 200), labelTextColor="k")
        legend.setParentItem(item.vb)
        for curve, name in key[:MAX_KEY_ENTRIES]:
            legend.addItem(curve, name)
    try:
        return _render(item, suffix)
    finally:
        if legend is not None and legend.scene() is not None:
            legend.scene().removeItem(legend)


def _render(item: pg.PlotItem, suffix: str) -> bytes:
    if suffix == ".svg":
        data = pyqtgraph.exporters.SVGExporter(item).export(toBytes=True)
        return bytes(data)
    image: QtGui.QImage = pyqtgraph.exporters.ImageExporter(item).export(toBytes=True)
    buffer = QtCore.QBuffer()
    buffer.open(QtCore.QIODevice.OpenModeFlag.WriteOnly)
    if not image.save(buffer, "PNG"):  # type: ignore[call-overload]  # PySide6 takes a str here at run time
        raise ValueError("the plot could not be encoded as PNG")
    return bytes(buffer.data().data())


def visible_plots(widget: QtWidgets.QWidget) -> list[pg.PlotWidget]:
    """The plots of a tab that are on screen (a tab may hide some, e.g. per view mode)."""
    return [p for p in widget.findChildren(pg.PlotWidget) if p.isVisibleTo(widget)]


def plot_title(plot: pg.PlotWidget) -> str:
    title = plot.getPlotItem().titleLabel.text or ""
    return re.sub(r"<[^>]+>", "", title).strip()


def file_names(target: Path, plots: list[pg.PlotWidget]) -> list[Path]:
    """One plot: ``target``; several: ``target``'s stem with each plot's number and title."""
    if len(plots) == 1:
        return [target]
    names = []
    for i, plot in enumerate(plots, 1):
        slug = re.sub(r"[^A-Za-z0-9]+", "-", plot_title(plot)).strip("-").lower()[:40]
        names.append(target.with_name(f"{target.stem}-{i}{'-' + slug if slug else ''}{target.suffix}"))
    return names


class Exporter(QtCore.QObject):
    """The window's *File > Export plot...* and *File > Export run figures as CSV...*."""

    def __init__(self, window: ExportHost) -> None:
        super().__init__(window.window())
        self.window = window
        self.relay = Relay(self)
        self.last_written: list[Path] = []
        self.last_error: str | None = None
        self.action_plot = QtGui.QAction("Export plot (PNG, SVG)...", window.window())
        self.action_plot.setToolTip("Save the plots of the tab on screen as PNG or SVG files")
        self.action_plot.triggered.connect(lambda _c=False: self.choose_plot_file())
        self.action_csv = QtGui.QAction("Export run figures as CSV...", window.window())
        self.action_csv.setToolTip("Metrics, TensorBoard scalars, samples and role states of this run, as CSV files")
        self.action_csv.triggered.connect(lambda _c=False: self.choose_csv_dir())
        menu = window.controls.file_menu
        before = window.controls.quit
        menu.insertAction(before, self.action_plot)
        menu.insertAction(before, self.action_csv)
        menu.insertSeparator(before)

    # ------------------------------------------------------------------ plots

    def choose_plot_file(self) -> None:
        plots = visible_plots(self.window.tabs.currentWidget())
        if not plots:
            self.window.statusBar().showMessage("this tab has no plot to export", 10000)
            return
        name, chosen = QtWidgets.QFileDialog.getSaveFileName(
            self.window.window(), "Export plot", str(Path.home() / "plot.png"), ";;".join(FORMATS.values())
        )
        if name:
            target = Path(name)
            if target.suffix.lower() not in FORMATS:
                suffix = next((s for s, f in FORMATS.items() if f == chosen), ".png")
                target = target.with_name(target.name + suffix)
            self.export_plots(target)

    def export_plots(self, target: Path) -> None:
        """Render the current tab's plots here, write them off the GUI thread."""
        plots = visible_plots(self.window.tabs.currentWidget())
        files = [
            (path, plot_bytes(plot, target.suffix.lower(), series_names(self.window, plot)))
            for path, plot in zip(file_names(target, plots), plots, strict=True)
        ]

        def write() -> list[Path]:
            for path, data in files:
                path.write_bytes(data)
            return [path for path, _ in files]

        run_off_thread(self.relay, write, self._on_written, name="export-plots")

    # ------------------------------------------------------------------ CSV

    def choose_csv_dir(self) -> None:
        source = self.window.source
        if source is None:
            self.window.statusBar().showMessage("no run to export: launch a cluster or open a run first", 10000)
            return
        chosen = QtWidgets.QFileDialog.getExistingDirectory(
            self.window.window(), "Export the run's figures into", str(Path.home())
        )
        if chosen:
            self.export_csv(Path(chosen) / f"{source.path.name}-csv")

    def export_csv(self, out_dir: Path) -> None:
        """Write the run's CSV files into ``out_dir`` on a worker thread (a snapshot if it is live)."""
        from core.run.csv_export import export_csv

        source = self.window.source
        if source is None:
            return
        run_path = source.path
        self.window.statusBar().showMessage(f"exporting {run_path.name} as CSV...")
        run_off_thread(self.relay, lambda: export_csv(run_path, out_dir), self._on_csv_written, name="export-csv")

    def _on_csv_written(self, result: object, error: BaseException | None) -> None:
        if error is not None:
            self._fail(f"CSV export failed: {error}")
            return
        self.last_error = None
        self.last_written = [Path(getattr(result, "directory", ""))]
        self.window.statusBar().showMessage(str(getattr(result, "summary", lambda: "")()), 20000)

    def _on_written(self, result: object, error: BaseException | None) -> None:
        if error is not None:
            self._fail(f"export failed: {error}")
            return
        self.last_error = None
        self.last_written = list(result) if isinstance(result, list) else []
        self.window.statusBar().showMessage("wrote " + ", ".join(str(p) for p in self.last_written), 20000)

    def _fail(self, message: str) -> None:
        self.last_error = message
        self.window.statusBar().showMessage(message, 20000)
