"""The cluster's recovery, in one line above the run: what failed, what is being restarted, and how
it ended (``recovering: ps:0 killed by SIGKILL; restarting ps:0 and chief:0 (recovery 1 of 3)``).

The words are the journal's (:meth:`core.run.events.RecoveryChanged.text`, carried by
``ClusterStatus.recovery``), so the window, ``ctl RUN status`` and ``launch`` say the same thing.
Amber while a recovery is under way, red when one failed, and quiet grey once training went on.
"""

from __future__ import annotations

from PySide6 import QtWidgets

from core.run.status import ClusterStatus

STYLES = {
    "recovering": "background: #fff1c7; color: #5c3d00; padding: 4px 8px; font-weight: bold;",
    "failed": "background: #fde2e2; color: #7f1d1d; padding: 4px 8px; font-weight: bold;",
    "recovered": "background: #eef2f7; color: #334155; padding: 4px 8px;",
}


def banner_kind(status: ClusterStatus | None) -> str | None:
    """Which of :data:`STYLES` the status calls for, or None for no banner."""
    if status is None or not status.recovery:
        return None
    if status.recovering:
        return "recovering"
    return "failed" if status.recovery.startswith("recovery failed") else "recovered"


class RecoveryBanner(QtWidgets.QLabel):
    """See the module docstring; hidden while the run has had no recovery."""

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWordWrap(True)
        self.setObjectName("recovery-banner")
        self.hide()

    def show_status(self, status: ClusterStatus | None) -> None:
        kind = banner_kind(status)
        if kind is None or status is None:
            self.hide()
            return
        if self.text() != status.recovery:
            self.setText(status.recovery)
        self.setStyleSheet(STYLES[kind])
        self.show()
