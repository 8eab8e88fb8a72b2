"""*Profile* and *Why is this worker slow?* on the workers the spread view names.

Past a handful of workers the Training tab draws the median and its bands with the slowest workers
on top, named in each plot's key (:class:`gui.run.tabs.spread.SpreadPlot`). Those names are links:
a click opens a menu for that worker; a right-click on a key lists every worker it names, slowest
first, each with both entries. The menu only asks: the window connects the signals to its own
actions (``gui/window``: the Profile and Why actions on the chosen worker).

Signals:
    sig_profile_requested(str): *Profile* was chosen for this worker (``worker:7``).
    sig_why_requested(str): *Why is this worker slow?* was chosen for this worker.
"""

from __future__ import annotations

from collections.abc import Iterable

from PySide6 import QtCore, QtGui, QtWidgets

PROFILE_TEXT = "Profile {role}"
WHY_TEXT = "Why is {role} slow?"


class SlowestWorkersMenu(QtCore.QObject):
    """The menus of the spread plots' keys, for the workers they name (slowest first)."""

    sig_profile_requested = QtCore.Signal(str)
    sig_why_requested = QtCore.Signal(str)

    def __init__(self, parent: QtWidgets.QWidget, keys: Iterable[QtWidgets.QLabel]) -> None:
        super().__init__(parent)
        self.widget = parent
        self.roles: tuple[str, ...] = ()  # the named workers, slowest first; set by the Training tab
        self.notes: dict[str, str] = {}  # a worker -> its note in the key ("412 ms")
        for key in keys:
            key.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.LinksAccessibleByMouse)
            key.setOpenExternalLinks(False)
            key.linkActivated.connect(lambda role: self.menu([role]).popup(QtGui.QCursor.pos()))
            key.setContextMenuPolicy(QtCore.Qt.ContextMenuPolicy.CustomContextMenu)
            key.customContextMenuRequested.connect(lambda pos, k=key: self.menu(self.roles).popup(k.mapToGlobal(pos)))
            key.setToolTip("Click a worker's name (or right-click here) to profile it or ask why it is slow")

    def menu(self, roles: Iterable[str]) -> QtWidgets.QMenu:
        """A menu with *Profile* and *Why* for each of ``roles``: the entries themselves for one
        worker, a submenu each for several."""
        menu = QtWidgets.QMenu(self.widget)
        menu.aboutToHide.connect(menu.deleteLater)
        roles = list(roles)
        if not roles:
            menu.addAction("no worker is named in the spread yet").setEnabled(False)
        for role in roles:
            target = menu
            if len(roles) > 1:
                note = self.notes.get(role, "")
                target = menu.addMenu(f"{role} {note if note.startswith('(') else f'({note})'}" if note else role)
            target.addAction(PROFILE_TEXT.format(role=role)).triggered.connect(
                lambda _c=False, r=role: self.sig_profile_requested.emit(r)
            )
            target.addAction(WHY_TEXT.format(role=role)).triggered.connect(
                lambda _c=False, r=role: self.sig_why_requested.emit(r)
            )
        return menu


def role_link(role: str, colour: str, text: str) -> str:
    """A worker's name in a key as a link to its menu, in its curve's colour."""
    return f'<a href="{role}" style="color:{colour}; text-decoration:none">{text}</a>'
