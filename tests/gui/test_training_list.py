"""The Training tab lists a run's workers in natural order without a walk over its rows per worker:
at 256 workers (a reopened run lists them all at once) each new worker read every row's name and
sort key, 33,000 of each, on the GUI thread."""

from __future__ import annotations

import pytest

WORKERS = 256


def test_listing_256_workers_takes_one_sort_key_each(qtbot, monkeypatch: pytest.MonkeyPatch) -> None:
    from PySide6 import QtCore

    from gui.run.tabs import training
    from gui.run.tabs.training import TrainingPanel

    keys = [0]
    real_key = training.natural_key

    def counted(text: str) -> tuple[tuple[int, int | str], ...]:
        keys[0] += 1
        return real_key(text)

    monkeypatch.setattr(training, "natural_key", counted)
    panel = TrainingPanel()
    qtbot.addWidget(panel)
    # In order, as a reopened run lists them, then each again: one row each, in natural order (out
    # of order too: test_training_spread.py).
    for w in [*range(WORKERS), *reversed(range(WORKERS))]:
        panel._ensure_worker(f"worker:{w}")
    assert keys[0] <= WORKERS, keys[0]  # was 32,896: every listed row's key per worker listed
    user = QtCore.Qt.ItemDataRole.UserRole
    names = [panel.workers.item(i).data(user) for i in range(panel.workers.count())]
    assert names == [f"worker:{w}" for w in range(WORKERS)]
    panel._label_worker("worker:200", training.role_colour(3), straggler=True)
    assert panel.workers.item(200).text() == "worker:200  (straggler)"
