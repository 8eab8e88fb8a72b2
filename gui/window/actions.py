"""The main window's actions, menus and toolbar, built onto the window (kept apart from its logic)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Protocol

from PySide6 import QtCore, QtGui, QtWidgets

from core.controller.session import RunSource
from gui.editor import ClusterEditor

TABS = ("Training", "GPUs", "Placement", "Logs")


class ActionWindow(Protocol):
    """What the actions need of the window they are built onto (:class:`gui.window.main_window.MainWindow`):
    the commands they trigger, the pages they switch, and the attributes they set."""

    action_attach: QtGui.QAction
    action_kill: QtGui.QAction
    action_kill_all: QtGui.QAction
    action_launch: QtGui.QAction
    action_open_run: QtGui.QAction
    action_preflight: QtGui.QAction
    action_quit: QtGui.QAction
    action_restart: QtGui.QAction
    action_restart_all: QtGui.QAction
    action_show_editor: QtGui.QAction
    action_show_log: QtGui.QAction
    action_show_run: QtGui.QAction
    action_stop: QtGui.QAction
    action_stop_all: QtGui.QAction
    tab_actions: list[QtGui.QAction]
    file_menu: QtWidgets.QMenu
    recent_runs_menu: QtWidgets.QMenu
    role_menu: QtWidgets.QMenu
    view_menu: QtWidgets.QMenu
    phase_label: QtWidgets.QLabel
    editor: ClusterEditor
    pages: QtWidgets.QTabWidget
    monitor: QtWidgets.QSplitter

    def window(self) -> QtWidgets.QWidget: ...  # the window itself: its actions' parent

    def menuBar(self) -> QtWidgets.QMenuBar: ...

    def addToolBar(self, title: str) -> QtWidgets.QToolBar: ...

    def close(self) -> bool: ...

    def launch(self) -> None: ...

    def stop_all(self) -> None: ...

    def act_on_source(self, fn: Callable[[RunSource], Future[str]]) -> None: ...

    def act_on_selected_roles(self, action: str) -> None: ...

    def show_log(self) -> None: ...

    def show_tab(self, index: int) -> None: ...

    def choose_run(self) -> None: ...

    def fill_recent_runs(self) -> None: ...

    def attach(self) -> bool: ...

    def check_hosts(self, launch_after: bool = False) -> None: ...


def build_actions(window: ActionWindow) -> None:
    """The window's actions, menus and toolbar (``window.action_*``, ``window.file_menu``...)."""

    def action(text: str, slot: Callable[[], Any], shortcut: str = "", tip: str = "") -> QtGui.QAction:
        a = QtGui.QAction(text, window.window())
        a.triggered.connect(lambda _checked=False: slot())
        if shortcut:
            a.setShortcut(QtGui.QKeySequence(shortcut))
            a.setToolTip(f"{tip or text} ({shortcut})")
        elif tip:
            a.setToolTip(tip)
        return a

    window.action_launch = action("Launch", window.launch, "Ctrl+L", "Launch every role of the cluster")
    window.action_stop_all = action("Stop all", window.stop_all, "Ctrl+Shift+S", "Stop every role")
    window.action_restart_all = action(
        "Restart all", lambda: window.act_on_source(lambda s: s.restart_all()), "Ctrl+Shift+R"
    )
    window.action_kill_all = action("Kill all", lambda: window.act_on_source(lambda s: s.kill_all()), "Ctrl+Shift+K")
    window.action_stop = action(
        "Stop role", lambda: window.act_on_selected_roles("stop"), "Ctrl+T", "Stop the selected roles"
    )
    window.action_restart = action("Restart role", lambda: window.act_on_selected_roles("restart"), "Ctrl+R")
    window.action_kill = action(
        "Kill role", lambda: window.act_on_selected_roles("kill"), "Ctrl+K", "SIGKILL the selected roles"
    )
    window.action_show_log = action("Show log", window.show_log, "Ctrl+G", "Show the selected role's output")
    window.action_open_run = action("Open run directory...", window.choose_run, "Ctrl+Shift+O")
    window.action_attach = action(
        "Attach to this run",
        window.attach,
        "Ctrl+Shift+A",
        "Take over a run whose launcher is gone while its roles still run (they were left running)",
    )
    window.action_preflight = action(
        "Check hosts",
        window.check_hosts,
        "Ctrl+Shift+P",
        "Pre-flight every host: SSH, python, TensorFlow, paths, ports",
    )
    window.action_quit = action("Quit", window.close, "Ctrl+Q")
    window.tab_actions = []
    for i, name in enumerate(TABS):
        window.tab_actions.append(action(name, functools.partial(window.show_tab, i), f"Ctrl+{i + 1}"))

    menu = window.menuBar()
    window.file_menu = menu.addMenu("&File")
    window.file_menu.addAction(window.action_open_run)
    window.file_menu.addAction(window.action_attach)
    window.recent_runs_menu = window.file_menu.addMenu("Recent runs")
    window.recent_runs_menu.aboutToShow.connect(window.fill_recent_runs)
    window.file_menu.addSeparator()
    window.file_menu.addAction(window.action_quit)
    cluster = menu.addMenu("&Cluster")
    for a in (window.action_launch, window.action_stop_all, window.action_restart_all, window.action_kill_all):
        cluster.addAction(a)
    cluster.addSeparator()
    cluster.addAction(window.action_preflight)
    role = menu.addMenu("&Role")
    for a in (window.action_stop, window.action_restart, window.action_kill, window.action_show_log):
        role.addAction(a)
    window.role_menu = role
    view = menu.addMenu("&View")
    for a in window.tab_actions:
        view.addAction(a)
    window.view_menu = view

    bar = window.addToolBar("Cluster")
    bar.setObjectName("cluster-toolbar")
    bar.setToolButtonStyle(QtCore.Qt.ToolButtonStyle.ToolButtonTextOnly)
    for a in (window.action_launch, window.action_stop_all, window.action_restart_all):
        bar.addAction(a)
    bar.addSeparator()
    for a in (window.action_stop, window.action_restart, window.action_kill, window.action_show_log):
        bar.addAction(a)
    bar.addSeparator()
    window.phase_label = QtWidgets.QLabel("not launched")
    window.phase_label.setContentsMargins(12, 0, 12, 0)
    bar.addWidget(window.phase_label)


def add_editor_actions(window: ActionWindow) -> None:
    """The cluster editor's file actions in the File menu; the page shortcuts."""
    editor = window.editor
    first = window.file_menu.actions()[0]
    for a in (editor.action_new, editor.action_open, editor.action_save, editor.action_save_as):
        window.file_menu.insertAction(first, a)
    window.file_menu.insertMenu(first, editor.recent_menu).setText("Recent cluster files")
    window.file_menu.insertAction(first, editor.action_paste)
    window.file_menu.insertSeparator(first)
    window.action_show_editor = QtGui.QAction("Cluster (edit)", window.window())
    window.action_show_editor.setShortcut(QtGui.QKeySequence("Ctrl+E"))
    window.action_show_editor.triggered.connect(lambda _c=False: window.pages.setCurrentWidget(window.editor))
    window.action_show_run = QtGui.QAction("Run (roles and telemetry)", window.window())
    window.action_show_run.setShortcut(QtGui.QKeySequence("Ctrl+M"))
    window.action_show_run.triggered.connect(lambda _c=False: window.pages.setCurrentWidget(window.monitor))
    first_view = window.view_menu.actions()[0]
    window.view_menu.insertAction(first_view, window.action_show_editor)
    window.view_menu.insertAction(first_view, window.action_show_run)
    window.view_menu.insertSeparator(first_view)
