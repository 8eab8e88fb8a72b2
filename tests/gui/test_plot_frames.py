"""The Training plots at the frame rate: one paint per plot a frame, a step axis that follows the
run without moving at every point, and a user's pan or zoom left alone."""

from __future__ import annotations

from PySide6 import QtCore, QtWidgets


def _samples(steps: range) -> list[dict[str, object]]:
    return [
        {
            "t": 0.1 * s,
            "step": s,
            "loss": 1.0 / (1 + s),
            "step_time_s": 0.1,
            "steps_per_sec": None,
            "extra": {},
            "source": "x",
        }
        for s in steps
    ]


class _Paints(QtCore.QObject):
    def __init__(self, watched: QtWidgets.QWidget) -> None:
        super().__init__()
        self.count = 0
        watched.installEventFilter(self)

    def eventFilter(self, _watched: QtCore.QObject, event: QtCore.QEvent) -> bool:
        if event.type() == QtCore.QEvent.Type.Paint:
            self.count += 1
        return False


def test_a_new_point_paints_each_plot_once(qtbot) -> None:
    from gui.run.tabs.training import TrainingPanel

    panel = TrainingPanel()
    qtbot.addWidget(panel)
    panel.resize(1200, 700)
    panel.show()
    qtbot.waitExposed(panel)
    panel.add_samples("worker:0", _samples(range(0, 2000)))
    panel.refresh(force=True)
    QtWidgets.QApplication.processEvents()
    paints = _Paints(panel.loss_plot.viewport())
    for step in range(2000, 2010):  # ten frames, a point each, the view fitting the new data
        panel.add_samples("worker:0", _samples(range(step, step + 1)))
        panel.refresh(force=True)
        QtWidgets.QApplication.processEvents()
    assert paints.count <= 12  # pyqtgraph fits the range while painting and paints again: 20 or more


def test_the_step_axis_follows_the_run_until_the_user_pans(qtbot) -> None:
    from gui.run.tabs.training import TrainingPanel

    panel = TrainingPanel()
    qtbot.addWidget(panel)
    panel.show()
    box = panel.loss_plot.getViewBox()
    panel.add_samples("worker:0", _samples(range(0, 100)))
    panel.refresh(force=True)
    low, high = box.viewRange()[0]
    assert low <= 0 and high >= 99
    panel.add_samples("worker:0", _samples(range(100, 102)))  # inside the headroom: no move
    panel.refresh(force=True)
    assert box.viewRange()[0] == [low, high]
    panel.add_samples("worker:0", _samples(range(102, 1000)))  # past it: the axis follows
    panel.refresh(force=True)
    assert box.viewRange()[0][1] >= 999
    box.setXRange(10, 20, padding=0)  # the user zooms in (the mouse sends this signal)
    box.sigRangeChangedManually.emit(box.state["mouseEnabled"])
    panel.add_samples("worker:0", _samples(range(1000, 3000)))
    panel.refresh(force=True)
    assert box.viewRange()[0] == [10, 20]
    box.enableAutoRange(x=True)  # the 'A' button: follow again
    panel.add_samples("worker:0", _samples(range(3000, 3001)))
    panel.refresh(force=True)
    assert box.viewRange()[0][1] >= 3000
