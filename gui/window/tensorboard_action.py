"""*File > Open in TensorBoard*: the run's event files in the pinned TensorBoard
(:mod:`core.run.tensorboard`), started on a worker thread, opened in the browser, and stopped
when the window shows another run or closes (its whole process group; nothing left listening).
The Runs page's *TensorBoard* opens the selected runs the same way, overlaid in one TensorBoard
(each role named ``<run name>/<role>``)."""

from __future__ import annotations

import threading
from pathlib import Path

from PySide6 import QtCore, QtGui

from core.cluster.spec import ClusterSpec
from core.run.tensorboard import TensorBoardError, TensorBoardServer
from gui.offthread import Relay, run_off_thread, start_thread
from gui.window.hosts import MenuHost


def _start_runs(paths: list[Path]) -> TensorBoardServer:
    """Read each run's spec and start one TensorBoard over them (off the GUI thread: disk, process)."""
    from core.run.rundir import SPEC_FILE, read_run_spec
    from core.run.tensorboard import start_runs

    runs: list[tuple[Path, ClusterSpec]] = []
    for path in paths:
        spec, problems = read_run_spec(path)
        if spec is None:
            raise TensorBoardError(f"{path / SPEC_FILE}: {problems[0].format() if problems else 'unreadable'}")
        runs.append((path, spec))
    return start_runs(runs)


class TensorBoardAction(QtCore.QObject):
    """One TensorBoard per window at a time: for the run it shows, or for runs chosen on the Runs page."""

    def __init__(self, window: MenuHost) -> None:
        super().__init__(window.window())
        self.window = window
        self.relay = Relay(self)
        self.server: TensorBoardServer | None = None
        self.starting = False
        self.last_error: str | None = None
        self.open_browser = True  # tests turn it off
        self._for_path: object = None
        self.action = QtGui.QAction("Open in TensorBoard", window.window())
        self.action.setToolTip("Start TensorBoard on this run's event files (127.0.0.1) and open it in the browser")
        self.action.triggered.connect(lambda _c=False: self.open())
        window.controls.file_menu.insertAction(window.controls.quit, self.action)
        window.controls.file_menu.insertSeparator(window.controls.quit)

    def open(self) -> None:
        source = self.window.source
        if source is None:
            self.window.statusBar().showMessage("no run to open: launch a cluster or open a run first", 10000)
            return
        if self.server is not None and self._for_path == source.path and self.server.alive():
            self._show(self.server)
            return
        if self.starting:
            return
        self.stop()
        from core.run.tensorboard import start

        path, spec = source.path, source.spec
        self.starting = True
        self._for_path = path
        self.window.statusBar().showMessage(f"starting TensorBoard on {path.name}...")
        run_off_thread(self.relay, lambda: start(path, spec), self._on_started, name="tensorboard-start")

    def open_runs(self, paths: list[Path]) -> None:
        """One TensorBoard over ``paths`` (run directories), their roles named ``<run name>/<role>``."""
        chosen = tuple(paths)
        if not chosen:
            return
        if self.server is not None and self._for_path == chosen and self.server.alive():
            self._show(self.server)
            return
        if self.starting:
            return
        self.stop()
        self.starting = True
        self._for_path = chosen
        self.window.statusBar().showMessage(f"starting TensorBoard on {len(chosen)} run(s)...")
        run_off_thread(self.relay, lambda: _start_runs(list(chosen)), self._on_started, name="tensorboard-start")

    def _on_started(self, server: object, error: BaseException | None) -> None:
        self.starting = False
        if error is not None or not isinstance(server, TensorBoardServer):
            self.last_error = f"TensorBoard: {error}"
            self.window.statusBar().showMessage(self.last_error, 20000)
            return
        source = self.window.source
        # Runs chosen on the Runs page (a tuple) do not depend on the run the window shows.
        moved_on = not isinstance(self._for_path, tuple) and (source is None or source.path != self._for_path)
        if moved_on:  # the window moved on meanwhile
            _stop_off_thread(server)
            return
        self.last_error = None
        self.server = server
        self._show(server)

    def _show(self, server: TensorBoardServer) -> None:
        missing = "; ".join(f"{role} {why}" for role, why in server.dirs.missing.items())
        self.window.statusBar().showMessage(
            f"TensorBoard on {server.url}" + (f" (not shown: {missing})" if missing else ""), 30000
        )
        if self.open_browser:
            QtGui.QDesktopServices.openUrl(QtCore.QUrl(server.url))

    def stop(self) -> None:
        """Stop the running TensorBoard, if any: SIGTERM now, the wait and SIGKILL off this thread."""
        server, self.server = self.server, None
        if server is not None:
            _stop_off_thread(server)


def _stop_off_thread(server: TensorBoardServer) -> None:
    server.terminate()
    start_thread(threading.Thread(target=server.stop, name="tensorboard-stop", daemon=True))
