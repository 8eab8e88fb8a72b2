"""*File > Export plot...*: where, which format, which size, one file per plot or one image.

The answer is a :class:`gui.window.plot_render.PlotExport`; the file names it will write are shown
as the choices change, so nothing is overwritten by surprise.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6 import QtWidgets

from gui.window.plot_render import DEFAULT_SIZE, TWICE, PlotExport

SUFFIXES = {"PNG image": ".png", "SVG drawing (vectors)": ".svg"}


class ExportPlotDialog(QtWidgets.QDialog):
    """Asks how to export the tab's plots; :meth:`choice` is the answer once accepted."""

    def __init__(
        self,
        parent: QtWidgets.QWidget,
        *,
        folder: Path,
        on_screen: tuple[int, int],
        names: Callable[[PlotExport], list[Path]],
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Export plot")
        self._names = names
        self.folder = QtWidgets.QLineEdit(str(folder))
        browse = QtWidgets.QPushButton("Browse...")
        browse.clicked.connect(self._browse)
        self.format = QtWidgets.QComboBox()
        self.format.addItems(list(SUFFIXES))
        self.size_choice = QtWidgets.QComboBox()
        self.size_choice.addItem(f"{DEFAULT_SIZE[0]} x {DEFAULT_SIZE[1]} px, laid out for a report")
        self.size_choice.addItem(f"{TWICE}x the size on screen ({TWICE * on_screen[0]} x {TWICE * on_screen[1]} px)")
        self.one_image = QtWidgets.QCheckBox("All of the tab's plots in one image")
        self.files = QtWidgets.QLabel()
        self.files.setWordWrap(True)
        buttons = QtWidgets.QDialogButtonBox(
            QtWidgets.QDialogButtonBox.StandardButton.Save | QtWidgets.QDialogButtonBox.StandardButton.Cancel
        )
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        where = QtWidgets.QHBoxLayout()
        where.addWidget(self.folder, 1)
        where.addWidget(browse)
        form = QtWidgets.QFormLayout(self)
        form.addRow("Folder", where)
        form.addRow("Format", self.format)
        form.addRow("Size", self.size_choice)
        form.addRow("", self.one_image)
        form.addRow("Writes", self.files)
        form.addRow(buttons)
        for signal in (self.folder.textChanged, self.format.currentIndexChanged, self.one_image.toggled):
            signal.connect(lambda *_: self._show_names())
        self._show_names()
        self.resize(640, self.sizeHint().height())

    def choice(self) -> PlotExport:
        return PlotExport(
            folder=Path(self.folder.text()).expanduser(),
            suffix=SUFFIXES[self.format.currentText()],
            size=DEFAULT_SIZE if self.size_choice.currentIndex() == 0 else None,
            one_image=self.one_image.isChecked(),
        )

    def _show_names(self) -> None:
        self.files.setText("\n".join(p.name for p in self._names(self.choice())))

    def _browse(self) -> None:
        chosen = QtWidgets.QFileDialog.getExistingDirectory(self, "Export the plots into", self.folder.text())
        if chosen:
            self.folder.setText(chosen)
