"""The window's icon and Help > About, as a user sees them: the version, where runs and settings
live, and what TowerDeck runs with (Qt, PySide6, pyqtgraph, TensorFlow, NVML)."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import pytest
from PySide6 import QtCore

from tests.helpers.project import ROOT

FAKE_NVML = ROOT / "tests" / "helpers" / "fake_nvml.py"


def _about_rows(qtbot, window) -> dict[str, str]:
    from gui.window.about import PENDING

    help_menu = window.controls.help_menu
    about = next(a for a in help_menu.actions() if a.text() == "About TowerDeck")
    about.trigger()
    dialog = window.about_dialog
    assert dialog is not None and dialog.isVisible()
    qtbot.waitUntil(lambda: PENDING not in [v.text() for v in dialog.values.values()], timeout=30_000)
    return {label: shown.text() for label, shown in dialog.values.items()}


@pytest.mark.timeout(120)
def test_the_window_has_its_icon_and_about_says_version_paths_and_versions(
    qtbot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data_dir: Path
):
    from gui.window.main_window import MainWindow

    monkeypatch.setenv("TOWERDECK_NVML_MODULE", str(FAKE_NVML))
    monkeypatch.setenv("FAKE_NVML_GPUS", "2")
    window = MainWindow(None, runs_root=tmp_path / "runs")
    qtbot.addWidget(window)
    window.show()
    icon = window.windowIcon()
    assert not icon.isNull()
    assert not icon.pixmap(16, 16).isNull()  # the SVG renders at the size a title bar shows it

    rows = _about_rows(qtbot, window)
    assert rows["Version"] == f"0.1.0, running from the checkout {ROOT}"
    assert rows["Runs (data)"] == str(data_dir / "runs")
    assert rows["Settings"].startswith(str(tmp_path / "towerdeck-settings"))
    assert rows["Qt"] == QtCore.qVersion()
    assert rows["PySide6"] == metadata.version("PySide6-Essentials")
    assert rows["pyqtgraph"] == metadata.version("pyqtgraph")
    assert rows["TensorFlow"] == f"{metadata.version('tensorflow-cpu')} (tensorflow-cpu)"
    assert rows["NVML"] == f"driver 550.0-fake, 2 GPUs, nvidia-ml-py {metadata.version('nvidia-ml-py')}"
    assert window.about_dialog is not None
    assert "TowerDeck 0.1.0" in window.about_dialog.title.text()
    window.about_dialog.close()


@pytest.mark.timeout(120)
def test_about_says_nvml_is_not_found_on_a_machine_without_it(qtbot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from gui.window.main_window import MainWindow

    monkeypatch.setenv("TOWERDECK_NVML_MODULE", str(FAKE_NVML))
    monkeypatch.setenv("FAKE_NVML_FAIL", "init")  # as a machine without the NVIDIA driver answers
    window = MainWindow(None, runs_root=tmp_path / "runs")
    qtbot.addWidget(window)
    window.show()
    rows = _about_rows(qtbot, window)
    assert rows["NVML"].startswith("not found (no NVML on ")
    assert window.about_dialog is not None
    window.about_dialog.close()
