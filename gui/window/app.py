"""``python main.py [FILE] [--demo] [--launch] [--run RUN] [--tab TAB] [--screenshot PNG --after SECONDS]``:
the window."""

from __future__ import annotations

import argparse
import os
import sys
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING

from core.cli.helptree import Parser
from core.cli.window_args import RUN_TABS, add_window_arguments
from core.cluster.demo import DEMO_CLUSTER
from core.controller.session import load_checked

if TYPE_CHECKING:
    from gui.window.main_window import MainWindow


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="python main.py", description="TowerDeck's window. `python main.py --help` lists the command line."
    )
    parser.example = "python main.py --demo --tab training"
    add_window_arguments(parser)  # core/cli/window_args.py: `python main.py --help` lists the same
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if sys.platform.startswith("linux") and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY") or os.environ.get("QT_QPA_PLATFORM")
    ):
        print(
            "no display to open the window on (DISPLAY is not set).\n"
            "    run it on a desktop, under `xvfb-run`, or headless: make demo-cli (python main.py launch FILE)",
            file=sys.stderr,
        )
        return 2
    from core.run import rundir

    run_path = None
    if args.run is not None:
        try:
            run_path = rundir.resolve(args.run)
        except FileNotFoundError as exc:
            print(f"--run: {exc}", file=sys.stderr)
            return 2
    spec = None
    path = DEMO_CLUSTER if args.demo else args.file
    if path is None and run_path is None:
        path = _last_cluster()
    if path is not None and run_path is None:
        spec = load_checked(path, sys.stderr)
        if spec is None and not _opens_in_form(path):
            return 2
    import pyqtgraph as pg
    from PySide6 import QtCore, QtWidgets

    from gui.window.main_window import MainWindow

    existing = QtWidgets.QApplication.instance()
    app = existing if isinstance(existing, QtWidgets.QApplication) else QtWidgets.QApplication(sys.argv[:1])
    app.setApplicationName("TowerDeck")
    from gui.window.about import set_application_identity

    set_application_identity(app)
    pg.setConfigOptions(antialias=True)
    from gui.window import settings

    # The demo opens as an unsaved copy: Save asks where, so the bundled file is never changed.
    window = MainWindow(spec, cluster_path=None if args.demo or path is None else path)
    if args.size:
        try:
            width, height = (int(v) for v in args.size.lower().split("x"))
        except ValueError:
            print(f"--size {args.size!r}: give WIDTHxHEIGHT in pixels, e.g. 1920x1080", file=sys.stderr)
            return 2
        window.resize(width, height)
    window.show()
    if run_path is not None:
        window.open_run(run_path)
    elif path is not None and not args.demo:
        settings.remember_cluster(path.resolve())
    if args.launch and run_path is None:
        window.launch()
    if args.tab:
        show_tab(window, args.tab)
    if args.screenshot is not None:

        def shoot() -> None:
            window.answer_close_question("stop")  # a screenshot run cleans up after itself
            window.grab().save(str(args.screenshot))
            print(f"saved {args.screenshot}", file=sys.stderr)
            window.close()

        QtCore.QTimer.singleShot(int(args.after * 1000), shoot)
    app.setQuitOnLastWindowClosed(True)
    return int(app.exec())


def _opens_in_form(path: Path) -> bool:
    """Whether a cluster file with problems opens in the form, as *File > Open* shows it: red
    fields and every problem listed, Launch disabled until they are fixed. A file that cannot be
    read, or is no TOML, has no form to show (its one problem is printed above)."""
    try:
        tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False
    return True


def _last_cluster() -> Path | None:
    """The cluster file of the last session, if it still exists (else the window opens empty)."""
    from gui.window import settings

    last = settings.last_cluster()
    return last if last is not None and last.is_file() else None


def show_tab(window: MainWindow, tab: str) -> None:
    """Bring ``--tab``'s page or tab to the front (one of core/cli/window_args.py's ``TABS``)."""
    if tab == "cluster":
        window.pages.setCurrentWidget(window.editor)
    elif tab == "runs":
        window.pages.setCurrentWidget(window.runs_page)
    else:
        window.pages.setCurrentWidget(window.monitor)
        panels = (window.training, window.gpus, window.placement, window.logs, window.profiler.panel)
        # The profile tab: the run's captures, the latest chosen.
        window.tabs.setCurrentWidget(dict(zip(RUN_TABS, panels, strict=True))[tab])
