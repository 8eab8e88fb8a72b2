"""The cluster editor: every field of a cluster file in a form, checked as the user types.

Validation is ``core.cluster.spec.parse_data`` on the TOML table the form describes, so every message is
the one ``python main.py validate`` prints; each problem's field path leads to its widget (tinted,
with the message and the fix in its tooltip) and the list under the form shows them all, with
line numbers while the form matches the file on disk. The checks against this machine
(``core.preflight.checks.check_local``: command and script exist, ports free) and all file reads and writes
run on short-lived threads; the GUI thread only ever parses in memory.

While a cluster runs the form stays editable and says, in a banner, that changes apply to the
next launch: the running roles keep the cluster they were started with, and refusing edits would
only stop the user from preparing the next run.

Its file actions (New, Open, Save, Paste, the recent files) are :mod:`gui.editor.file_actions`.

``python -m gui.editor [FILE] [--screenshot PNG]`` shows the editor alone (gui/editor/__main__.py).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from PySide6 import QtCore, QtWidgets

from core.cluster.pasted import import_pasted
from core.cluster.problems import ERROR, Problem
from core.cluster.spec import ClusterSpec, locate, parse_data, to_data
from core.cluster.spec.locate import path_parts
from core.cluster.spec.write import starter_data
from core.preflight.checks import check_local
from gui.editor.cluster import ClusterForm
from gui.editor.fields import ERROR_INK, WARNING_INK
from gui.editor.file_actions import EditorFileActions
from gui.editor.files import reason
from gui.editor.problems import ProblemList
from gui.offthread import Relay, run_off_thread

VALIDATE_DELAY_MS = 120  # coalesces the signals of one edit (and fast typing) into one parse
LOCAL_CHECK_DELAY_MS = 400  # ports and paths: once the user pauses


class ClusterEditor(EditorFileActions, QtWidgets.QWidget):
    """Edits a cluster file. Embed it, and put its actions in a menu or toolbar.

    Signals: ``sig_spec_changed(object)`` after the form changed (the new ``ClusterSpec``, or None
    while it has errors); ``sig_validity_changed(bool)``: whether it can launch (no errors,
    including this machine's checks); ``sig_path_changed(object)``: the file (Path or None);
    ``sig_dirty_changed(bool)``; ``sig_saved(object)``: a save finished (its Path);
    ``sig_file_failed(str)``: opening or saving failed (the message is also shown).
    """

    sig_spec_changed = QtCore.Signal(object)
    sig_validity_changed = QtCore.Signal(bool)
    sig_path_changed = QtCore.Signal(object)
    sig_dirty_changed = QtCore.Signal(bool)
    sig_saved = QtCore.Signal(object)
    sig_file_failed = QtCore.Signal(str)

    def __init__(self, parent: QtWidgets.QWidget | None = None, settings: QtCore.QSettings | None = None) -> None:
        super().__init__(parent)
        # Tests pass their own QSettings (an ini file in a temp dir): the user's are never touched.
        self._settings = settings if settings is not None else QtCore.QSettings()
        self._relay = Relay(self)
        self._path: Path | None = None
        self._file_text = ""  # the file as on disk, for line numbers while the form matches it
        self._clean_data: dict[str, Any] | None = None
        self._launched_data: dict[str, Any] | None = None
        self._running = False
        self._dirty = False
        self._valid: bool | None = None
        self._spec: ClusterSpec | None = None
        self._check_spec: ClusterSpec | None = None  # what this machine's checks read: errors and all
        self._data: dict[str, Any] = {}
        self._parse_problems: list[Problem] = []
        self._local_problems: list[Problem] = []
        self._check_generation = 0
        self._checking = False
        self._pending = False
        self._build()
        self._build_actions()
        self._validate_timer = QtCore.QTimer(self, singleShot=True, interval=VALIDATE_DELAY_MS)
        self._validate_timer.timeout.connect(self._flush)
        self._check_timer = QtCore.QTimer(self, singleShot=True, interval=LOCAL_CHECK_DELAY_MS)
        self._check_timer.timeout.connect(self._start_local_check)
        self.new_cluster()

    # ------------------------------------------------------------------ layout

    def _build(self) -> None:
        self.banner = QtWidgets.QLabel()
        self.banner.setWordWrap(True)
        self.banner.setStyleSheet(
            "background: #fff3cd; color: #5c4400; border: 1px solid #e0c060; border-radius: 4px; padding: 6px;"
        )
        self.banner.hide()
        self.form = ClusterForm(self._suggest_address)
        self.form.sig_changed.connect(self._on_form_changed)

        self.problems_view = ProblemList(lambda field: self.form.has_unknown_key(path_parts(field)))
        self.problems_view.sig_field_clicked.connect(self._on_problem_clicked)
        self.problems_view.sig_remove_requested.connect(self.remove_unknown_key)
        self.problem_list = self.problems_view.list  # every problem, one item each

        splitter = QtWidgets.QSplitter(QtCore.Qt.Orientation.Vertical)
        splitter.addWidget(self.form)
        splitter.addWidget(self.problems_view)
        splitter.setStretchFactor(0, 4)
        splitter.setStretchFactor(1, 1)
        splitter.setChildrenCollapsible(False)
        splitter.setSizes([700, 130])

        self.file_label = QtWidgets.QLabel()
        self.file_label.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        self.status_label = QtWidgets.QLabel()
        status = QtWidgets.QHBoxLayout()
        status.addWidget(self.file_label, 1)
        status.addWidget(self.status_label)

        layout = QtWidgets.QVBoxLayout(self)
        layout.addWidget(self.banner)
        layout.addWidget(splitter, 1)
        layout.addLayout(status)

    # ------------------------------------------------------------------ public API

    @property
    def path(self) -> Path | None:
        """The cluster file the form was opened from or saved to; None for a new cluster."""
        return self._path

    @property
    def is_dirty(self) -> bool:
        self._flush()
        return self._dirty

    @property
    def is_valid(self) -> bool:
        """No errors: the form's, validate's, and this machine's checks as last reported."""
        self._flush()
        return bool(self._valid)

    @property
    def is_checking(self) -> bool:
        """This machine's checks (ports, paths) are pending or running for the current form."""
        self._flush()
        return self._checking or self._check_timer.isActive()

    @property
    def is_running(self) -> bool:
        return self._running

    def new_cluster(self) -> None:
        """A small starting point: 1 ps + 2 workers on this machine."""
        self._load_data(starter_data(), None, "")

    def set_spec(self, spec: ClusterSpec, path: Path | None = None) -> None:
        """Show ``spec``, read from ``path`` (which the form then counts as saved)."""
        base = path.resolve().parent if path is not None else None
        self._load_data(to_data(spec, base), path.resolve() if path is not None else None, "")

    def current_spec(self) -> ClusterSpec | None:
        """The cluster the form describes, or None while it has errors (see :meth:`problems`)."""
        self._flush()
        return self._spec

    def problems(self) -> list[Problem]:
        """Every problem shown: the form's and ``validate``'s, then this machine's checks."""
        self._flush()
        return self._parse_problems + self._local_problems

    def set_running(self, *, running: bool) -> None:
        """Mark the cluster as running: edits stay possible and are labelled as for the next launch."""
        self._flush()
        was_running, self._running = self._running, running
        self._launched_data = dict(self._data) if running else None
        self._update_banner()
        if was_running != running and self._check_spec is not None:
            self._check_generation += 1
            self._check_timer.start()  # ports are checked again once the cluster is down

    def import_text(self, text: str, command: str | None = None) -> list[Problem]:
        """Fill the jobs, command, strategy and launch style from a pasted command line or
        TF_CONFIG; returns the importer's problems (and changes nothing) when it cannot."""
        base = self._path.parent if self._path else None
        spec, problems = import_pasted(text, command or self.form.command_edit.text() or None, base)
        if spec is None:
            return problems
        self.form.replace_cluster(to_data(spec, base or Path.cwd()))
        self._flush(force=True)
        self.status_label.setText("filled from the pasted " + ("TF_CONFIG" if "{" in text else "command line"))
        return []

    # ------------------------------------------------------------------ file state

    def _fail(self, message: str) -> None:
        self.status_label.setText(f"<span style='color:{ERROR_INK}'>{_escape(message)}</span>")
        self.sig_file_failed.emit(message)

    def _base(self) -> Path:
        return self._path.parent if self._path is not None else Path.cwd()

    # ------------------------------------------------------------------ validation

    def _on_form_changed(self) -> None:
        self._pending = True
        self._validate_timer.start()

    def _flush(self, *, force: bool = False) -> None:
        if not (self._pending or force):
            return
        self._pending = False
        self._validate_timer.stop()
        data, form_problems = self.form.data()
        dirty = self._clean_data is not None and data != self._clean_data
        # Line numbers only while the form says what the file says; after an edit they would lie.
        text = self._file_text if not dirty else ""
        # partial: this machine's checks (script, workdir, ports) run beside the form's errors, so
        # the list holds every problem at once, as validate prints them.
        spec, problems = parse_data(data, text, base=self._base(), source=self._path, partial=True)
        changed = data != self._data
        self._data = data
        self._parse_problems = _with_lines(form_problems, text) + problems
        self._check_spec = spec
        self._spec = spec if not any(p.severity == ERROR for p in self._parse_problems) else None
        if changed or force:
            self._check_generation += 1  # a check still running for the old form is now stale
        if self._check_spec is None:
            self._local_problems = []
            self._checking = False
            self._check_timer.stop()
        elif changed or force:
            self._check_timer.start()
        dirty_changed = dirty != self._dirty
        self._dirty = dirty
        self._show_problems()
        if dirty_changed:
            self._update_file_label()
            self.sig_dirty_changed.emit(dirty)
        self._update_banner()
        if changed:
            self.sig_spec_changed.emit(self._spec)

    def _start_local_check(self) -> None:
        spec = self._check_spec
        if spec is None:
            return
        partial = self._spec is None
        generation = self._check_generation
        text = self._file_text if not self._dirty else ""
        self._checking = True
        self._show_problems()

        def done(result: Any, err: BaseException | None) -> None:
            if generation != self._check_generation:
                return  # the form changed meanwhile; a newer check is on its way
            self._checking = False
            self._local_problems = (
                list(result or [])
                if err is None
                else [Problem("", f"could not check this machine: {reason(err)}", "try again; see the log", ERROR)]
            )
            self._show_problems()

        # While the cluster runs its own roles hold the ports: checking them would only cry wolf.
        check_ports = not self._running
        run_off_thread(
            self._relay,
            lambda: check_local(spec, text, check_ports=check_ports, partial=partial),
            done,
            name="editor-check",
        )

    def _show_problems(self) -> None:
        problems = self._parse_problems + self._local_problems
        self.form.mark(problems)
        source = self._path.name if self._path else ""
        self.problems_view.show_problems(
            problems, source, edited_file=self._dirty and self._path is not None, checking=self._checking
        )
        valid = self._spec is not None and not any(p.severity == ERROR for p in problems)
        if valid != self._valid:
            self._valid = valid
            self.sig_validity_changed.emit(valid)

    def _on_problem_clicked(self, field: str) -> None:
        self.form.focus_field(path_parts(field))

    def remove_unknown_key(self, field: str) -> bool:
        """Drop a key the form has no widget for (``validate`` calls it unknown); True if it was there."""
        removed = self.form.remove_unknown_key(path_parts(field))
        if removed:
            self._flush(force=True)
        return removed

    # ------------------------------------------------------------------ labels

    def _update_file_label(self) -> None:
        name = str(self._path) if self._path else "new cluster (not saved yet)"
        mark = f"  <b style='color:{WARNING_INK}'>● modified</b>" if self._dirty else ""
        self.file_label.setText(f"{_escape(name)}{mark}")

    def _update_banner(self) -> None:
        if not self._running:
            self.banner.hide()
            return
        if self._launched_data is not None and self._data != self._launched_data:
            self.banner.setText(
                "<b>The cluster is running; your changes apply to the next launch.</b> The running roles keep "
                "the cluster they were launched with. Stop and launch again to use the changes."
            )
        else:
            self.banner.setText(
                "<b>The cluster is running.</b> Changes you make here apply to the next launch, not to the "
                "running roles."
            )
        self.banner.show()

    def _suggest_address(self, job: str) -> tuple[str, int]:
        """Where a new task goes: the job's last host (else any, else this machine), next free port."""
        addresses = self.form.addresses()
        hosts = [h for j, h, _p in addresses if j == job and h] or [h for _j, h, _p in addresses if h]
        ports = {int(p) for _j, _h, p in addresses if p.isdigit()}
        port = max(ports) + 1 if ports else 2222
        while port in ports:
            port += 1
        return (hosts[-1] if hosts else "127.0.0.1"), min(port, 65535)


def _with_lines(problems: list[Problem], text: str) -> list[Problem]:
    if not text:
        return problems
    return [replace(p, line=locate(text, tuple(path_parts(p.field)))) for p in problems]


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
