"""The window as a user runs it, launching a cluster and left open: ``python
tests/helpers/window_launch.py CLUSTER``. It is ``python main.py CLUSTER --launch``; once every role
of the launched run is running it prints ``run: PATH`` and runs on until it is killed (a test kills
it to see what becomes of the run when the window dies).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main(argv: list[str]) -> int:
    from PySide6 import QtCore, QtWidgets

    from gui.window.app import main as window_main
    from gui.window.main_window import MainWindow

    app = QtWidgets.QApplication(sys.argv[:1])

    def check() -> None:
        windows = [w for w in app.topLevelWidgets() if isinstance(w, MainWindow)]
        source = windows[0].source if windows else None
        if source is None:
            return
        roles = source.status().roles
        if roles and all(r.state == "running" for r in roles):
            timer.stop()
            print(f"run: {source.path}", flush=True)

    timer = QtCore.QTimer()
    timer.timeout.connect(check)
    timer.start(100)
    return window_main([*argv, "--launch"]) if app is not None else 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
