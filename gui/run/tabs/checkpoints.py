"""The run's checkpoints on the Training tab: a mark on the step axis of each plot for every
checkpoint the run saved (the one TensorFlow would restore labelled, the deleted ones faint) and for
where each recovery resumed (labelled with its checkpoint), and a short list of the checkpoints in
the directory in the tab's side column, under the workers, so the charts keep their room.

Drawn from :class:`core.views.checkpoints.CheckpointFigures` (fed with ``checkpoints`` and
``recovery`` events), and only when it changed.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from core.run.events import CheckpointsChanged, RecoveryChanged
from core.views.checkpoints import CheckpointFigures, Mark

MARKER_COLOUR = "#7c3aed"  # violet: no worker's curve colour (pg.intColor hues) is near it
RESUMED_COLOUR = "#b45309"  # the recovery banner's amber, darker to read on white
LIST_HEIGHT_PX = 130


class CheckpointsPanel(QtWidgets.QWidget):
    """The list of checkpoints, and the markers it draws on the plots it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.figures = CheckpointFigures()
        self._drawn = -1  # the figures' version on screen
        # Per plot (by id): the plot and the marker lines drawn on it.
        self._markers: dict[int, tuple[pg.PlotWidget, list[pg.InfiniteLine]]] = {}
        self.heading = QtWidgets.QLabel(self.figures.heading())
        self.problem = QtWidgets.QLabel()
        self.problem.setWordWrap(True)
        self.problem.setStyleSheet("color: #7f1d1d;")
        self.problem.hide()
        self.list = QtWidgets.QListWidget()
        self.list.setMaximumHeight(LIST_HEIGHT_PX)
        self.list.setToolTip(
            "Checkpoints in the run's checkpoint directory, newest first; ◀ the one a restart restores"
        )
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 0)
        layout.addWidget(self.heading)
        layout.addWidget(self.problem)
        layout.addWidget(self.list)

    def add(self, payload: CheckpointsChanged | RecoveryChanged) -> None:
        if isinstance(payload, RecoveryChanged):
            self.figures.apply_recovery(payload)
        else:
            self.figures.apply(payload)

    def clear(self) -> None:
        """Another run: no checkpoints, no markers (a plot's own clear() may have taken them already)."""
        self.figures.clear()
        for plot, lines in self._markers.values():
            for line in lines:
                if line.scene() is not None:
                    plot.removeItem(line)
        self._markers.clear()

    @property
    def changed(self) -> bool:
        return self.figures.version != self._drawn

    def refresh(self, plots: list[tuple[pg.PlotWidget, bool]]) -> None:
        """Redraw the list and the marks on ``plots`` if the checkpoints changed; each plot with
        whether its marks are labelled (the loss plots: a small plot below would only repeat them)."""
        if not self.changed:
            return
        self._drawn = self.figures.version
        figures = self.figures
        self.heading.setText(figures.heading())
        self.heading.setToolTip(figures.where())
        self.problem.setText(figures.problem)
        self.problem.setToolTip(figures.problem)
        self.problem.setVisible(bool(figures.problem))
        self.list.clear()
        for text, tip in figures.rows():
            item = QtWidgets.QListWidgetItem(text)
            item.setToolTip(tip)
            self.list.addItem(item)
        marks = figures.markers()
        for plot, labelled in plots:
            self._mark(plot, marks, labelled=labelled)

    def marks_on(self, plot: pg.PlotWidget) -> list[tuple[float, str]]:
        """The marks on ``plot``'s step axis: (step, what it is: a :class:`Mark` value)."""
        lines = self._markers.get(id(plot), (plot, []))[1]
        return [(float(line.value()), str(getattr(line, "mark", ""))) for line in lines]

    def marker_steps(self, plot: pg.PlotWidget, kinds: tuple[Mark, ...] = (Mark.LATEST, Mark.KEPT)) -> list[float]:
        """The steps of the marks of ``kinds`` on ``plot`` (by default: the checkpoints on disk)."""
        return [step for step, kind in self.marks_on(plot) if kind in kinds]

    def _mark(self, plot: pg.PlotWidget, marks: list[tuple[int, str, Mark]], *, labelled: bool) -> None:
        lines = self._markers.setdefault(id(plot), (plot, []))[1]
        while len(lines) > len(marks):
            plot.removeItem(lines.pop())
        while len(lines) < len(marks):
            line = pg.InfiniteLine(angle=90, movable=False)
            plot.addItem(line, ignoreBounds=True)  # a mark never widens the view
            lines.append(line)
        for line, (step, name, kind) in zip(lines, marks, strict=True):
            line.setValue(step)
            line.mark = kind
            line.setPen(_PENS[kind]())
            if kind == Mark.RESUMED:
                line.setToolTip(f"a recovery resumed training here (step {step:,})" + (f" from {name}" if name else ""))
                text = f"resumed from {name}" if name else "resumed"
            else:
                line.setToolTip(f"checkpoint {name} (step {step:,})" + ("; deleted since" if kind == Mark.GONE else ""))
                text = name if kind == Mark.LATEST else ""
            self._label(line, text if labelled else "", RESUMED_COLOUR if kind == Mark.RESUMED else MARKER_COLOUR)

    @staticmethod
    def _label(line: pg.InfiniteLine, text: str, colour: str) -> None:
        """The mark's label at the top of the plot (the resume a little lower: both may be near)."""
        label = getattr(line, "label", None)
        if not text:
            if label is not None:
                label.setVisible(False)
            return
        shown = text.replace("{", "{{").replace("}", "}}")  # the label's text is a format string
        position = 0.8 if colour == RESUMED_COLOUR else 0.95
        if label is None:
            line.label = pg.InfLineLabel(line, text=shown, position=position, anchors=[(1, 0), (1, 0)])
        else:
            line.label.setFormat(shown)
            line.label.setPosition(position)
            line.label.setVisible(True)
        line.label.setColor(colour)


def _pen(colour: str, alpha: int, style: QtCore.Qt.PenStyle, *, width: int = 1) -> QtGui.QPen:
    faint = QtGui.QColor(colour)
    faint.setAlpha(alpha)
    return pg.mkPen(faint, width=width, style=style)


_PENS = {
    Mark.LATEST: lambda: _pen(MARKER_COLOUR, 255, QtCore.Qt.PenStyle.DashLine),
    Mark.KEPT: lambda: _pen(MARKER_COLOUR, 130, QtCore.Qt.PenStyle.DashLine),
    Mark.GONE: lambda: _pen(MARKER_COLOUR, 60, QtCore.Qt.PenStyle.DotLine),
    Mark.RESUMED: lambda: _pen(RESUMED_COLOUR, 255, QtCore.Qt.PenStyle.SolidLine, width=2),
}
