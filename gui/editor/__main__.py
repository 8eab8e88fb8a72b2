"""``python -m gui.editor [FILE] [--screenshot PNG]``: the cluster editor alone, in a small window
with its File menu and toolbar, as the main window would embed it."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from PySide6 import QtCore, QtWidgets

from core.cluster.demo import DEMO_CLUSTER
from gui.editor.widget import ClusterEditor


def main(argv: list[str] | None = None) -> int:
    """``python -m gui.editor [FILE] [--screenshot PNG]``: the editor alone in a small window."""
    parser = argparse.ArgumentParser(prog="python -m gui.editor", description="TowerDeck's cluster editor, alone.")
    parser.add_argument("file", nargs="?", type=Path, default=DEMO_CLUSTER, help="a cluster file (default: the demo)")
    parser.add_argument("--screenshot", type=Path, metavar="PNG", help="save the window to PNG and quit")
    args = parser.parse_args(argv)
    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication(sys.argv[:1])
    app.setOrganizationName("TowerDeck")
    app.setApplicationName("TowerDeck")
    settings: QtCore.QSettings | None = None
    if args.screenshot is not None:  # a screenshot run never writes the user's recent files
        scratch = tempfile.TemporaryDirectory(prefix="towerdeck-editor-")  # removed when main returns
        settings = QtCore.QSettings(os.path.join(scratch.name, "settings.ini"), QtCore.QSettings.Format.IniFormat)
    window = QtWidgets.QMainWindow()
    editor = ClusterEditor(settings=settings)
    menu = window.menuBar().addMenu("&File")
    for act in (editor.action_new, editor.action_open):
        menu.addAction(act)
    menu.addMenu(editor.recent_menu)
    for act in (editor.action_save, editor.action_save_as, editor.action_paste):
        menu.addAction(act)
    bar = window.addToolBar("File")
    for act in (editor.action_open, editor.action_save, editor.action_paste):
        bar.addAction(act)
    window.setCentralWidget(editor)
    window.resize(1360, 860)
    editor.sig_path_changed.connect(
        lambda p: window.setWindowTitle(f"TowerDeck cluster editor - {p.name if p else 'new'}[*]")
    )
    editor.sig_dirty_changed.connect(window.setWindowModified)
    window.show()
    editor.open_file(args.file)
    if args.screenshot is not None:

        def shoot() -> None:
            if "worker" in editor.form.jobs:  # the picture shows the job with the most to see
                editor.form.tabs.setCurrentWidget(editor.form.jobs["worker"])
            window.grab().save(str(args.screenshot))
            print(f"saved {args.screenshot}", file=sys.stderr)
            window.close()

        # After the file is read and this machine's checks (ports, script) have reported.
        editor.sig_path_changed.connect(lambda _p: QtCore.QTimer.singleShot(1500, shoot))
        editor.sig_file_failed.connect(lambda _m: QtCore.QTimer.singleShot(500, shoot))
    return int(app.exec())


if __name__ == "__main__":
    raise SystemExit(main())
