"""The main window's actions, menus and toolbar: :class:`WindowActions` owns them, the window wires
them to what it does (:class:`WindowCommands`) and says each frame which of them can run."""

from __future__ import annotations

import functools
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Protocol

from PySide6 import QtCore, QtGui, QtWidgets

from core.controller.session import RunSource
from gui.editor import ClusterEditor
from gui.window import settings

TABS = ("Training", "GPUs", "Placement", "Logs")


class WindowCommands(Protocol):
    """What the actions ask of the window (:class:`gui.window.main_window.MainWindow`)."""

    def close(self) -> bool: ...

    def launch(self) -> None: ...

    def stop_all(self) -> None: ...

    def act_on_source(self, fn: Callable[[RunSource], Future[str]]) -> None: ...

    def act_on_selected_roles(self, command: Callable[[RunSource, str], Future[str]]) -> None: ...

    def show_log(self) -> None: ...

    def show_last_error(self) -> None: ...

    def show_tab(self, index: int) -> None: ...

    def choose_run(self) -> None: ...

    def open_run(self, path: Path) -> bool: ...

    def attach(self) -> bool: ...

    def check_hosts(self, *, launch_after: bool = False) -> None: ...

    def show_about(self) -> None: ...


class WindowActions:
    """The window's actions (``launch``, ``stop_all``... ``quit``), its menus and toolbar, and the
    phase label at the toolbar's end."""

    def __init__(self, window: QtWidgets.QMainWindow, commands: WindowCommands) -> None:
        def action(text: str, slot: Callable[[], Any], *, shortcut: str = "", tip: str = "") -> QtGui.QAction:
            a = QtGui.QAction(text, window)
            a.triggered.connect(lambda _checked=False: slot())
            if shortcut:
                a.setShortcut(QtGui.QKeySequence(shortcut))
                a.setToolTip(f"{tip or text} ({shortcut})")
            elif tip:
                a.setToolTip(tip)
            return a

        self.launch = action("Launch", commands.launch, shortcut="Ctrl+L", tip="Launch every role of the cluster")
        self.stop_all = action("Stop all", commands.stop_all, shortcut="Ctrl+Shift+S", tip="Stop every role")
        self.restart_all = action(
            "Restart all", lambda: commands.act_on_source(lambda s: s.restart_all()), shortcut="Ctrl+Shift+R"
        )
        self.kill_all = action(
            "Kill all", lambda: commands.act_on_source(lambda s: s.kill_all()), shortcut="Ctrl+Shift+K"
        )
        self.stop = action(
            "Stop role",
            lambda: commands.act_on_selected_roles(lambda s, role: s.stop_role(role)),
            shortcut="Ctrl+T",
            tip="Stop the selected roles",
        )
        self.restart = action(
            "Restart role",
            lambda: commands.act_on_selected_roles(lambda s, role: s.restart_role(role)),
            shortcut="Ctrl+R",
        )
        self.kill = action(
            "Kill role",
            lambda: commands.act_on_selected_roles(lambda s, role: s.kill_role(role)),
            shortcut="Ctrl+K",
            tip="SIGKILL the selected roles",
        )
        self.show_log = action("Show log", commands.show_log, shortcut="Ctrl+G", tip="Show the selected role's output")
        self.last_error = action(
            "Go to last error",
            commands.show_last_error,
            shortcut="Ctrl+Shift+E",
            tip="Open the selected role's log at its last error line",
        )
        self.open_run = action("Open run directory...", commands.choose_run, shortcut="Ctrl+Shift+O")
        self.attach = action(
            "Attach to this run",
            commands.attach,
            shortcut="Ctrl+Shift+A",
            tip="Take over a run whose launcher is gone while its roles still run (they were left running)",
        )
        self.preflight = action(
            "Check hosts",
            commands.check_hosts,
            shortcut="Ctrl+Shift+P",
            tip="Pre-flight every host: SSH, python, TensorFlow, paths, ports",
        )
        self.quit = action("Quit", commands.close, shortcut="Ctrl+Q")
        self.about = action("About TowerDeck", commands.show_about, tip="Version, where runs and settings live")
        self.about.setMenuRole(QtGui.QAction.MenuRole.AboutRole)
        self.show_editor = QtGui.QAction("Cluster (edit)", window)  # the pages' (add_page_actions)
        self.show_editor.setShortcut(QtGui.QKeySequence("Ctrl+E"))
        self.show_run = QtGui.QAction("Run (roles and telemetry)", window)
        self.show_run.setShortcut(QtGui.QKeySequence("Ctrl+M"))
        self.tabs = [
            action(name, functools.partial(commands.show_tab, i), shortcut=f"Ctrl+{i + 1}")
            for i, name in enumerate(TABS)
        ]

        menu = window.menuBar()
        self.file_menu = menu.addMenu("&File")
        self.file_menu.addAction(self.open_run)
        self.file_menu.addAction(self.attach)
        self.recent_runs_menu = self.file_menu.addMenu("Recent runs")
        self.recent_runs_menu.aboutToShow.connect(lambda: self._fill_recent_runs(commands.open_run))
        self.file_menu.addSeparator()
        self.file_menu.addAction(self.quit)
        cluster = menu.addMenu("&Cluster")
        for a in (self.launch, self.stop_all, self.restart_all, self.kill_all):
            cluster.addAction(a)
        cluster.addSeparator()
        cluster.addAction(self.preflight)
        self.role_menu = menu.addMenu("&Role")
        for a in self.role_actions():
            self.role_menu.addAction(a)
        self.view_menu = menu.addMenu("&View")
        for a in self.tabs:
            self.view_menu.addAction(a)
        self.help_menu = menu.addMenu("&Help")
        self.help_menu.addAction(self.about)

        bar = window.addToolBar("Cluster")
        bar.setObjectName("cluster-toolbar")
        bar.setToolButtonStyle(QtCore.Qt.ToolButtonStyle.ToolButtonTextOnly)
        for a in (self.launch, self.stop_all, self.restart_all):
            bar.addAction(a)
        bar.addSeparator()
        for a in self.role_actions():
            bar.addAction(a)
        bar.addSeparator()
        self.phase_label = QtWidgets.QLabel("not launched")
        self.phase_label.setContentsMargins(12, 0, 12, 0)
        bar.addWidget(self.phase_label)

    def role_actions(self) -> tuple[QtGui.QAction, ...]:
        """The actions on the selected roles (the roles table's context menu has them too)."""
        return (self.stop, self.restart, self.kill, self.show_log, self.last_error)

    def add_page_actions(self, editor: ClusterEditor, pages: QtWidgets.QTabWidget, monitor: QtWidgets.QWidget) -> None:
        """The cluster editor's file actions in the File menu; the page shortcuts in the View menu."""
        first = self.file_menu.actions()[0]
        for a in (editor.action_new, editor.action_open, editor.action_save, editor.action_save_as):
            self.file_menu.insertAction(first, a)
        self.file_menu.insertMenu(first, editor.recent_menu).setText("Recent cluster files")
        self.file_menu.insertAction(first, editor.action_paste)
        self.file_menu.insertSeparator(first)
        self.show_editor.triggered.connect(lambda _c=False: pages.setCurrentWidget(editor))
        self.show_run.triggered.connect(lambda _c=False: pages.setCurrentWidget(monitor))
        first_view = self.view_menu.actions()[0]
        self.view_menu.insertAction(first_view, self.show_editor)
        self.view_menu.insertAction(first_view, self.show_run)
        self.view_menu.insertSeparator(first_view)

    def enable(self, *, live: bool, launchable: bool, attachable: bool, checking: bool, switching: bool) -> None:
        """Which actions can run now. ``live``: the run shown can take commands; ``launchable``: the
        form holds a cluster; ``checking``: a pre-flight runs; ``switching``: a launch or an attach
        is under way off the GUI thread (the run it brings replaces the one shown, so nothing else
        may open, launch, attach or command meanwhile)."""
        # A finished run (launched here or opened) can be launched again from the form.
        self.launch.setEnabled(not live and launchable and not checking and not switching)
        self.attach.setEnabled(attachable and not switching)
        self.open_run.setEnabled(not switching)
        self.recent_runs_menu.setEnabled(not switching)
        self.preflight.setEnabled(not checking)
        for a in (self.stop_all, self.restart_all, self.kill_all, self.stop, self.restart, self.kill):
            a.setEnabled(live and not switching)

    def _fill_recent_runs(self, open_run: Callable[[Path], bool]) -> None:
        self.recent_runs_menu.clear()
        runs = settings.recent_runs()
        for path in runs:
            self.recent_runs_menu.addAction(path.name, functools.partial(open_run, path))
        if not runs:
            self.recent_runs_menu.addAction("(none yet)").setEnabled(False)
