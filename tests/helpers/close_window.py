"""The window as a user runs it, closed with "stop" once every role runs: ``python
tests/helpers/close_window.py CLUSTER``. It is ``python main.py CLUSTER --launch`` (the same entry,
the same window), with a timer that, once every role of the launched run is running, answers the
close question "stop" and closes the window, as a user's click on the window's close button does.
The process then exits as the real one does when its last window closes: what the window's run
left unfinished on a daemon thread is cut short there, which an in-process test would never see.
Prints ``run: PATH`` (the run directory) on stdout once the run is bound.
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
    said: set[Path] = set()

    def check() -> None:
        windows = [w for w in app.topLevelWidgets() if isinstance(w, MainWindow)]
        source = windows[0].source if windows else None
        if source is None:
            return
        if source.path not in said:
            said.add(source.path)
            print(f"run: {source.path}", flush=True)
        roles = source.status().roles
        if roles and all(r.state == "running" for r in roles):
            timer.stop()
            windows[0].answer_close_question("stop")
            windows[0].close()

    timer = QtCore.QTimer()
    timer.timeout.connect(check)
    timer.start(100)
    return window_main([*argv, "--launch"]) if app is not None else 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
