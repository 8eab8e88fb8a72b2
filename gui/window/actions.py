"""The main window's actions, menus and toolbar, built onto the window (kept apart from its logic)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from PySide6 import QtCore, QtGui, QtWidgets

if TYPE_CHECKING:
    from gui.window.main_window import MainWindow

TABS = ("Training", "GPUs", "Placement", "Logs")


def build_actions(window: MainWindow) -> None:
    """The window's actions, menus and toolbar (``window.action_*``, ``window.file_menu``...)."""

    def action(text: str, slot: Callable[[], Any], shortcut: str = "", tip: str = "") -> QtGui.QAction:
        a = QtGui.QAction(text, window)
        a.triggered.connect(lambda _checked=False: slot())
        if shortcut:
            a.setShortcut(QtGui.QKeySequence(shortcut))
            a.setToolTip(f"{tip or text} ({shortcut})")
        elif tip:
            a.setToolTip(tip)
        return a

    window.action_launch = action("Launch", window.launch, "Ctrl+L", "Launch every role of the cluster")
    window.action_stop_all = action("Stop all", window.stop_all, "Ctrl+Shift+S", "Stop every role")
    window.action_restart_all = action("Restart all", lambda: window._act(lambda s: s.restart_all()), "Ctrl+Shift+R")
    window.action_kill_all = action("Kill all", lambda: window._act(lambda s: s.kill_all()), "Ctrl+Shift+K")
    window.action_stop = action(
        "Stop role", lambda: window._on_role_action("stop"), "Ctrl+T", "Stop the selected roles"
    )
    window.action_restart = action("Restart role", lambda: window._on_role_action("restart"), "Ctrl+R")
    window.action_kill = action(
        "Kill role", lambda: window._on_role_action("kill"), "Ctrl+K", "SIGKILL the selected roles"
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
        window.tab_actions.append(action(name, functools.partial(window._show_tab, i), f"Ctrl+{i + 1}"))

    menu = window.menuBar()
    window.file_menu = menu.addMenu("&File")
    window.file_menu.addAction(window.action_open_run)
    window.file_menu.addAction(window.action_attach)
    window.recent_runs_menu = window.file_menu.addMenu("Recent runs")
    window.recent_runs_menu.aboutToShow.connect(window._fill_recent_runs)
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


def add_editor_actions(window: MainWindow) -> None:
    """The cluster editor's file actions in the File menu; the page shortcuts."""
    editor = window.editor
    first = window.file_menu.actions()[0]
    for a in (editor.action_new, editor.action_open, editor.action_save, editor.action_save_as):
        window.file_menu.insertAction(first, a)
    window.file_menu.insertMenu(first, editor.recent_menu).setText("Recent cluster files")
    window.file_menu.insertAction(first, editor.action_paste)
    window.file_menu.insertSeparator(first)
    window.action_show_editor = QtGui.QAction("Cluster (edit)", window)
    window.action_show_editor.setShortcut(QtGui.QKeySequence("Ctrl+E"))
    window.action_show_editor.triggered.connect(lambda _c=False: window.pages.setCurrentWidget(window.editor))
    window.action_show_run = QtGui.QAction("Run (roles and telemetry)", window)
    window.action_show_run.setShortcut(QtGui.QKeySequence("Ctrl+M"))
    window.action_show_run.triggered.connect(lambda _c=False: window.pages.setCurrentWidget(window.monitor))
    first_view = window.view_menu.actions()[0]
    window.view_menu.insertAction(first_view, window.action_show_editor)
    window.view_menu.insertAction(first_view, window.action_show_run)
    window.view_menu.insertSeparator(first_view)
