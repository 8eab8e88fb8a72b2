"""The cluster editor's file actions: New, Open, Save, Save As, Paste and the recent files, and
reading and writing the cluster file on short-lived threads (the GUI thread never waits on disk).

A mixin of :class:`gui.editor.widget.ClusterEditor`, which lays out the form and validates it.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6 import QtCore, QtGui, QtWidgets

from core.cluster.problems import ERROR, Problem
from core.cluster.spec import parse_text, toml_text, write_atomically
from core.cluster.spec.write import rebase_workdir
from gui.editor.cluster import ClusterForm
from gui.editor.files import RecentFiles, reason
from gui.editor.paste import PasteDialog
from gui.offthread import Relay, run_off_thread


class EditorFileActions(QtWidgets.QWidget):
    """The editor's file: which one, opening it, saving it, and the actions that do so."""

    # What the editor provides (see gui.editor.widget.ClusterEditor).
    sig_path_changed: QtCore.Signal
    sig_saved: QtCore.Signal
    form: ClusterForm
    status_label: QtWidgets.QLabel
    _settings: QtCore.QSettings
    _relay: Relay
    _path: Path | None
    _file_text: str
    _clean_data: dict[str, Any] | None
    _data: dict[str, Any]
    _local_problems: list[Problem]

    if TYPE_CHECKING:  # provided by the editor; no stubs at run time to shadow the real ones

        @property
        def is_dirty(self) -> bool: ...

        def new_cluster(self) -> None: ...

        def problems(self) -> list[Problem]: ...

        def import_text(self, text: str, command: str | None = None) -> list[Problem]: ...

        def _flush(self, *, force: bool = False) -> None: ...

        def _fail(self, message: str) -> None: ...

        def _base(self) -> Path: ...

        def _update_file_label(self) -> None: ...

    def _build_actions(self) -> None:
        def action(text: str, slot: Callable[[], object], *, shortcut: Any = None, tip: str = "") -> QtGui.QAction:
            act = QtGui.QAction(text, self)
            act.triggered.connect(lambda _checked=False: slot())
            if shortcut is not None:
                act.setShortcut(QtGui.QKeySequence(shortcut))
            act.setToolTip(tip or text)
            act.setStatusTip(tip or text)
            self.addAction(act)  # shortcuts work with the editor alone, too
            return act

        self.action_new = action(
            "New cluster", self._on_new_triggered, tip="Start from a small 1 ps + 2 workers cluster"
        )
        self.action_open = action(
            "Open...",
            self._on_open_triggered,
            shortcut=QtGui.QKeySequence.StandardKey.Open,
            tip="Open a cluster file (TOML)",
        )
        self.action_save = action(
            "Save", self._on_save_triggered, shortcut=QtGui.QKeySequence.StandardKey.Save, tip="Save the cluster file"
        )
        # No shortcut for Save As: Ctrl+Shift+S is the window's "Stop all".
        self.action_save_as = action("Save As...", self.save_as, tip="Save the cluster under another name")
        self.action_paste = action(
            "Paste command line / TF_CONFIG...",
            self.show_paste_dialog,
            shortcut="Ctrl+Shift+V",
            tip="Fill the form from a classic command line (--ps_hosts ...) or a TF_CONFIG",
        )
        self.recent = RecentFiles(self._settings, self._on_recent, self)
        self.recent_menu = self.recent.menu

    # ------------------------------------------------------------------ files

    def open_file(self, path: Path) -> None:
        """Read ``path`` on a worker thread, then fill the form (``sig_path_changed``) or say why not
        (``sig_file_failed``). Does not ask about unsaved changes: the actions do."""
        path = Path(path).expanduser().resolve()
        self.status_label.setText(f"opening {path.name}...")
        run_off_thread(
            self._relay,
            lambda: path.read_text(encoding="utf-8"),
            lambda text, err: self._on_read(path, text, err),
            name="editor-io",
        )

    def save(self, path: Path | None = None) -> bool:
        """Write the form to ``path`` (default: the current file; none: ask) on a worker thread.

        Returns False when there was nowhere to save. The form's own tables are written, so
        job-level GPUs, commands and env stay where the user put them; a cluster with errors can
        be saved too (work in progress), and the status line says how many it has."""
        self._flush()
        if path is None and self._path is None:
            return self.save_as()
        target = Path(path or self._path or ".").expanduser().resolve()
        data = rebase_workdir(self._data, self._base(), target.parent)
        text = toml_text(data)
        errors = sum(p.severity == ERROR for p in self.problems())

        def done(_result: Any, err: BaseException | None) -> None:
            if err is not None:
                self._fail(f"cannot save {target}: {reason(err)}; fix: choose a folder you can write to (Save As)")
                return
            self.form.set_workdir_text(str(data.get("workdir", ".")))
            path_changed = self._set_path(target)
            self._file_text = text
            self._clean_data = data
            self.recent.remember(target)
            self._flush(force=True)
            note = f" (with {errors} error{'s' if errors != 1 else ''})" if errors else ""
            self.status_label.setText(f"saved {target.name}{note}")
            if path_changed:
                self.sig_path_changed.emit(target)
            self.sig_saved.emit(target)

        self.status_label.setText(f"saving {target.name}...")
        run_off_thread(self._relay, lambda: write_atomically(target, text), done, name="editor-io")
        return True

    def save_as(self) -> bool:
        start = str(self._path or Path.cwd() / f"{self.form.name_edit.text() or 'cluster'}.toml")
        name, _ = QtWidgets.QFileDialog.getSaveFileName(self, "Save cluster file", start, "Cluster files (*.toml)")
        if not name:
            return False
        return self.save(Path(name) if name.endswith(".toml") else Path(name + ".toml"))

    def paste_dialog(self) -> PasteDialog:
        return PasteDialog(self, self.form.command_edit.text(), self.import_text)

    def show_paste_dialog(self) -> None:
        dialog = self.paste_dialog()
        dialog.setAttribute(QtCore.Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.open()

    def recent_files(self) -> list[Path]:
        """The last opened or saved files, newest first (at most 10)."""
        return self.recent.files()

    # ------------------------------------------------------------------ actions

    def _confirm_discard(self) -> bool:
        if not self.is_dirty:
            return True
        answer = QtWidgets.QMessageBox.question(
            self,
            "Unsaved changes",
            "The cluster has changes that are not saved. Discard them?",
            QtWidgets.QMessageBox.StandardButton.Discard | QtWidgets.QMessageBox.StandardButton.Cancel,
        )
        return answer == QtWidgets.QMessageBox.StandardButton.Discard

    def _on_new_triggered(self) -> None:
        if self._confirm_discard():
            self.new_cluster()

    def _on_open_triggered(self) -> None:
        if not self._confirm_discard():
            return
        start = str(self._path.parent if self._path else Path.cwd())
        name, _ = QtWidgets.QFileDialog.getOpenFileName(
            self, "Open cluster file", start, "Cluster files (*.toml);;All files (*)"
        )
        if name:
            self.open_file(Path(name))

    def _on_save_triggered(self) -> None:
        self.save()

    def _on_recent(self, path: Path) -> None:
        if self._confirm_discard():
            self.open_file(path)

    # ------------------------------------------------------------------ loading

    def _on_read(self, path: Path, text: Any, err: BaseException | None) -> None:
        if err is not None:
            if isinstance(err, FileNotFoundError):
                self.recent.forget(path)
            self._fail(f"cannot open {path}: {reason(err)}; fix: check the path, or pick the file with Open")
            return
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            # The form cannot show a file that is no TOML; say exactly what validate says.
            _spec, problems = parse_text(text, path)
            # p.format() carries validate's own fix line.
            self._fail("cannot open " + path.name + ": " + "; ".join(p.format() for p in problems))
            return
        self._load_data(data, path, text)
        self.recent.remember(path)
        self.status_label.setText(f"opened {path.name}")

    def _load_data(self, data: dict[str, Any], path: Path | None, text: str) -> None:
        self.form.set_data(data)
        path_changed = self._set_path(path)
        self._file_text = text
        self._clean_data = self.form.data()[0]
        self._local_problems = []
        self._flush(force=True)
        # Signals last: a slot that reads (or edits) the editor finds it whole.
        if path_changed:
            self.sig_path_changed.emit(path)

    def _set_path(self, path: Path | None) -> bool:
        """Set the path without telling anyone yet; True when it changed (emit sig_path_changed)."""
        changed = path != self._path
        self._path = path
        self.form.base_dir = path.parent if path is not None else None
        self._update_file_label()
        return changed
