"""Help > About: TowerDeck's version, where its runs and settings live, and the versions of what it
runs with (Qt, PySide6, pyqtgraph, TensorFlow, NVML); and the window's icon.

Qt's versions are in memory and shown at once; the rest (``core.install.about``: package metadata
read from the disk, NVML's driver calls) is gathered on a thread of its own and filled in when it
comes back, so the GUI thread never waits on it.
"""

from __future__ import annotations

import html
from typing import Any

import pyqtgraph
import PySide6
from PySide6 import QtCore, QtGui, QtWidgets

from core.install import about
from core.install.desktop import APP_ID, ICON_SOURCE
from gui.offthread import Relay, run_off_thread
from gui.window import settings

PENDING = "…"
MIN_WIDTH_PX = 680  # a venv's python path and an NVML reason on one or two lines, not cut


def app_icon() -> QtGui.QIcon:
    """TowerDeck's icon (resources/icons/towerdeck.svg; the desktop entry's is the same file)."""
    return QtGui.QIcon(str(ICON_SOURCE))


def set_application_identity(app: QtWidgets.QApplication) -> None:
    """The icon and the desktop entry's name (``install-desktop``): the taskbar and the dock show
    the icon and group the window under the menu's entry."""
    app.setWindowIcon(app_icon())
    app.setDesktopFileName(APP_ID)


class AboutDialog(QtWidgets.QDialog):
    """The facts as label/value rows, their text selectable (to paste into a bug report)."""

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("About TowerDeck")
        self.setWindowIcon(app_icon())
        self.setMinimumWidth(MIN_WIDTH_PX)
        layout = QtWidgets.QVBoxLayout(self)
        header = QtWidgets.QHBoxLayout()
        logo = QtWidgets.QLabel()
        logo.setPixmap(app_icon().pixmap(64, 64))
        header.addWidget(logo)
        self.title = QtWidgets.QLabel("<b>TowerDeck</b>")
        self.title.setTextFormat(QtCore.Qt.TextFormat.RichText)
        font = self.title.font()
        font.setPointSizeF(font.pointSizeF() * 1.4)
        self.title.setFont(font)
        header.addWidget(self.title, 1)
        layout.addLayout(header)
        layout.addWidget(QtWidgets.QLabel("Launch and watch distributed TensorFlow clusters."))
        self.form = QtWidgets.QFormLayout()
        layout.addLayout(self.form)
        self.values: dict[str, QtWidgets.QLabel] = {}
        for label, value in self._rows_now():
            self._set(label, value)
        buttons = QtWidgets.QDialogButtonBox(QtWidgets.QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.close)
        layout.addWidget(buttons)
        self._relay = Relay(self)
        run_off_thread(self._relay, about.gather, self._on_gathered, name="about-facts")

    @staticmethod
    def _rows_now() -> list[tuple[str, str]]:
        """What is known without waiting: Qt's versions and the settings file's path."""
        return [
            ("Version", PENDING),
            ("Runs (data)", PENDING),
            ("Settings", settings.store().fileName()),
            ("Python", PENDING),
            ("Qt", QtCore.qVersion()),
            ("PySide6", PySide6.__version__),
            ("pyqtgraph", str(pyqtgraph.__version__)),
            ("TensorFlow", PENDING),
            ("NVML", PENDING),
        ]

    def _set(self, label: str, value: str) -> None:
        shown = self.values.get(label)
        if shown is None:
            shown = QtWidgets.QLabel()
            shown.setTextFormat(QtCore.Qt.TextFormat.PlainText)  # paths and versions are never markup
            shown.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
            shown.setWordWrap(True)
            self.form.addRow(f"{label}:", shown)
            self.values[label] = shown
        shown.setText(value)

    def _on_gathered(self, facts: Any, error: BaseException | None) -> None:
        if error is not None or not isinstance(facts, about.About):
            self._set("Version", f"could not be read: {error}")
            return
        self.title.setText(f"<b>TowerDeck {html.escape(facts.version)}</b>")
        for label, value in facts.rows():
            self._set(label, value)
        self.adjustSize()  # the values are longer than the placeholders they replace

    def text(self) -> str:
        """Every row as ``label: value`` lines (what the dialog shows)."""
        return "\n".join(f"{label}: {shown.text()}" for label, shown in self.values.items())
