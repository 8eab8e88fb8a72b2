"""*Cluster > Check hosts*: every host of the form's cluster pre-flighted off the GUI thread (SSH,
python, TensorFlow, paths, ports; :func:`core.preflight.runner.preflight`), then a table of what
was found; before a launch that needs it, the launch goes on by itself once every host is ready."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6 import QtCore, QtWidgets

from core.cluster.spec import ClusterSpec
from core.preflight.runner import PreflightRun
from gui.offthread import Relay, run_off_thread
from gui.window.preflight import PreflightDialog

PREFLIGHT_TIMEOUT_S = 60.0


class HostCheck(QtCore.QObject):
    """One pre-flight at a time, for one window; :meth:`cancel` (the window closing) kills its
    probes and the ssh under them at once."""

    def __init__(self, window: QtWidgets.QWidget, *, say: Callable[[str], None], launch: Callable[[], None]) -> None:
        super().__init__(window)
        self._window = window
        self._say = say
        self._launch = launch
        self._relay = Relay(self)
        self._run = PreflightRun()  # cancelled on close: the probes (and ssh) are killed
        self._launch_after = False
        self.running = False
        self.passed = False  # every host was ready for the launch that asked: it may go on once
        self.results: list[Any] = []

    def check(self, spec: ClusterSpec, *, launch_after: bool = False) -> None:
        """Pre-flight ``spec``'s hosts on a thread of their own (a dead host takes its whole
        timeout); the table follows, or, with ``launch_after`` and every host ready, the launch."""
        if self.running:
            return
        from core.preflight.runner import preflight

        self.running = True
        self._launch_after = launch_after
        run = self._run
        run_off_thread(
            self._relay,
            lambda: preflight(spec, PREFLIGHT_TIMEOUT_S, check_ports=True, run=run),
            self._on_checked,
            name="preflight",
        )
        self._say("checking hosts (SSH, python, TensorFlow, paths, ports)...")

    def take_pass(self) -> bool:
        """Whether the hosts passed for this launch; the next launch checks them again."""
        passed, self.passed = self.passed, False
        return passed

    def cancel(self) -> None:
        self._run.cancel()

    def _on_checked(self, results: object, error: BaseException | None) -> None:
        self.running = False
        if error is not None or not isinstance(results, list):
            self._say(f"the host check failed: {error}")
            return
        self.results = results
        ready = all(r.ok for r in results)
        if ready and self._launch_after:
            self.passed = True
            warnings = [f"{r.host}: {c.detail}" for r in results for c in r.warnings]
            self._say("every host is ready; launching" + (f" (warning: {'; '.join(warnings)})" if warnings else ""))
            self._launch()
            return
        dialog = PreflightDialog(self._window, results)
        dialog.setAttribute(QtCore.Qt.WidgetAttribute.WA_DeleteOnClose)  # one per check, not kept
        dialog.open()
