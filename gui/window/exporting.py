"""Export from the window: the current tab's plots as PNG or SVG (pyqtgraph's exporters), and the
run's figures as CSV files (:mod:`core.run.csv_export`, on a worker thread).

The plots are rendered on the GUI thread (Qt painting must be), into bytes; only writing them to
disk and the CSV export run off it (:func:`gui.offthread.run_off_thread`). Right-clicking a plot
opens pyqtgraph's own *Export...* dialog, which offers the same formats and more.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyqtgraph as pg
import pyqtgraph.exporters
from PySide6 import QtCore, QtGui, QtWidgets

from gui.offthread import Relay, run_off_thread
from gui.window.export_dialog import ExportPlotDialog
from gui.window.hosts import ExportHost
from gui.window.plot_render import PlotExport, PlotImage, plot_title, render, render_stack, screen_order, slug


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


def series_names(window: ExportHost, plot: pg.PlotWidget) -> list[tuple[Any, str]]:
    """The curves of ``plot`` and what each is (a role), for the exported file's key: the window
    shows its key beside the plots, which an exported plot would lose."""
    training = window.training
    if plot is training.loss_plot:
        return [(smooth, role) for role, (_raw, smooth) in training.loss_curves.items() if smooth.isVisible()]
    if plot is training.time_plot:
        return [(curve, role) for role, curve in training.time_curves.items() if curve.isVisible()]
    return [(c, c.name()) for c in plot.getPlotItem().listDataItems() if c.name() and c.isVisible()]


def visible_plots(widget: QtWidgets.QWidget) -> list[pg.PlotWidget]:
    """The plots of a tab that are on screen (a tab may hide some, e.g. per view mode), in the
    order they have there: top to bottom, left to right."""
    return screen_order(widget)


def file_names(run: str, tab: str, plots: list[pg.PlotWidget], *, choice: PlotExport) -> list[Path]:
    """``<run>-<plot>.<ext>`` per plot in screen order, or ``<run>-<tab>.<ext>`` for one image;
    two plots with the same title get a number after the second."""
    stem = slug(run, fallback="plot")
    if choice.one_image:
        return [choice.folder / f"{stem}-{slug(tab, fallback='plots')}{choice.suffix}"]
    names: list[Path] = []
    for i, plot in enumerate(plots, 1):
        name = f"{stem}-{slug(plot_title(plot), fallback=f'plot-{i}')}"
        while any(p.stem == name for p in names):
            name += f"-{i}"
        names.append(choice.folder / f"{name}{choice.suffix}")
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

    def run_name(self) -> str:
        """The run's id (its folder's name), else the cluster's name: the exported files' first part."""
        source = self.window.source
        if source is not None:
            return source.path.name
        spec = self.window.spec
        return spec.name if spec is not None else "towerdeck"

    def default_folder(self) -> Path:
        """The run's folder, where its logs and figures already are; the home folder before a run."""
        source = self.window.source
        return source.path if source is not None else Path.home()

    def choose_plot_file(self) -> None:
        tab = self.window.tabs.currentWidget()
        plots = visible_plots(tab)
        if not plots:
            self.window.statusBar().showMessage("this tab has no plot to export", 10000)
            return
        tab_name = self.window.tabs.tabText(self.window.tabs.currentIndex())
        dialog = ExportPlotDialog(
            self.window.window(),
            folder=self.default_folder(),
            on_screen=(plots[0].width(), plots[0].height()),
            names=lambda choice: file_names(self.run_name(), tab_name, plots, choice=choice),
        )
        if dialog.exec() == QtWidgets.QDialog.DialogCode.Accepted:
            self.export_plots(dialog.choice())

    def export_plots(self, choice: PlotExport) -> None:
        """Render the current tab's plots here, write them off the GUI thread."""
        tab = self.window.tabs.currentWidget()
        plots = visible_plots(tab)
        tab_name = self.window.tabs.tabText(self.window.tabs.currentIndex())
        names = file_names(self.run_name(), tab_name, plots, choice=choice)
        images = [PlotImage(plot, series_names(self.window, plot)) for plot in plots]
        if choice.one_image:
            files = [(names[0], render_stack(images, choice.suffix, choice.size))]
        else:
            files = [
                (path, render(image, choice.suffix, choice.size)) for path, image in zip(names, images, strict=True)
            ]

        def write() -> list[Path]:
            for path, data in files:
                path.parent.mkdir(parents=True, exist_ok=True)
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
