"""The cluster editor's form: the cluster-wide fields on the left, one tab per job on the right."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6 import QtCore, QtGui, QtWidgets

from core.cluster.problems import ERROR, Problem
from core.cluster.spec import JOB_ORDER, LAUNCH_STYLES, STRATEGIES, TOP_KEYS
from core.cluster.spec.locate import path_parts
from gui.editor.fields import ERROR_INK, EnvTable, FileNumber, Marker, command_value, format_command, worst
from gui.editor.job import COMMAND, ENV, GPUS, HOST, JobEditor

STRATEGY_TEXT = {
    "between_graph": "between_graph: classic ps + workers",
    "parameter_server": "parameter_server: TF2 ParameterServerStrategy",
    "multi_worker_mirrored": "multi_worker_mirrored: TF2 all-reduce, no ps",
    "custom": "custom: anything else",
}
STYLE_TEXT = {
    "flags": "flags: --ps_hosts=... --task_index=N",
    "tf_config": "tf_config: the TF_CONFIG variable",
    "both": "both: flags and TF_CONFIG",
}
FIELD_KEYS = ("name", "strategy", "launch_style", "command", "workdir", "complete_when", "stop_grace_s", "start_s")
# The top-level keys this form has widgets for; the others are kept in ``extra``.
FORM_KEYS = frozenset((*FIELD_KEYS, "metric_patterns", "env", "jobs"))


class ClusterForm(QtWidgets.QWidget):
    """Every field of a cluster file; :meth:`data` is the TOML table the form describes."""

    sig_changed = QtCore.Signal()

    def __init__(self, suggest_address: Callable[[str], tuple[str, int]]) -> None:
        super().__init__()
        self._suggest_address = suggest_address
        self.jobs: dict[str, JobEditor] = {}
        # Top-level keys the form has no widget for ([hosts], ssh_config, stall_after_s, and unknown
        # ones): kept as they are, so a save or a launch never drops them and validate names typos.
        self.extra: dict[str, Any] = {}
        self.extra_jobs: dict[str, Any] = {}  # unknown jobs, likewise
        self.base_dir: Path | None = None  # the cluster file's directory: workdir is relative to it

        self.name_edit = QtWidgets.QLineEdit()
        self.name_edit.setToolTip(TOP_KEYS["name"])
        # Built from core's lists, so a strategy or style added there shows up here too.
        self.strategy_combo = _combo({s: STRATEGY_TEXT.get(s, s) for s in STRATEGIES}, TOP_KEYS["strategy"])
        self.style_combo = _combo({s: STYLE_TEXT.get(s, s) for s in LAUNCH_STYLES}, "How each role learns the cluster.")
        self.command_edit = QtWidgets.QLineEdit()
        self.command_edit.setPlaceholderText("python -u train.py --train_steps=1000")
        self.command_edit.setToolTip(
            "The training command every role runs, as you would type it in a shell (no pipes or redirection).\n"
            "TowerDeck adds the cluster flags or TF_CONFIG. Placeholders: {job_name} {task_index} {role} "
            "{address} {port} {tb_dir} {run_dir}."
        )
        self.workdir_edit = QtWidgets.QLineEdit()
        self.workdir_edit.setToolTip(
            "The directory the roles start in; a relative path is relative to the cluster file."
        )
        self.browse_button = QtWidgets.QPushButton("Browse...")
        self.browse_button.clicked.connect(self._on_browse)
        workdir_row = QtWidgets.QHBoxLayout()
        workdir_row.addWidget(self.workdir_edit, 1)
        workdir_row.addWidget(self.browse_button)

        self.complete_box = QtWidgets.QWidget()
        self.complete_box.setToolTip(
            "Training is over when every task of these jobs has ended (and one succeeded); TowerDeck then stops "
            "the rest, such as the ps tasks. None ticked: the chief, or the workers when there is no chief."
        )
        complete_row = QtWidgets.QHBoxLayout(self.complete_box)
        complete_row.setContentsMargins(0, 0, 0, 0)
        self.complete_checks: dict[str, QtWidgets.QCheckBox] = {}
        for job in JOB_ORDER:
            check = QtWidgets.QCheckBox(job)
            check.toggled.connect(lambda _on: self.sig_changed.emit())
            self.complete_checks[job] = check
            complete_row.addWidget(check)
        complete_row.addWidget(_note("none: the default"))
        complete_row.addStretch(1)

        self.grace_spin = _seconds(TOP_KEYS["stop_grace_s"])
        self.start_spin = _seconds(TOP_KEYS["start_s"])
        # The file's numbers as written, even those a spin box cannot show ("five" is an error, not 5.0).
        self.grace = FileNumber(self.grace_spin, self.sig_changed.emit)
        self.start = FileNumber(self.start_spin, self.sig_changed.emit)
        self.patterns_edit = QtWidgets.QPlainTextEdit()
        self.patterns_edit.setPlaceholderText(r"one regex a line, e.g. iter (?P<step>\d+) loss=(?P<loss>[0-9.]+)")
        self.patterns_edit.setToolTip(TOP_KEYS["metric_patterns"])
        self.patterns_edit.setFixedHeight(64)
        self.env_table = EnvTable("every role")

        cluster_box = QtWidgets.QGroupBox("Cluster")
        form = QtWidgets.QFormLayout(cluster_box)
        form.setFieldGrowthPolicy(QtWidgets.QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.addRow("Name:", self.name_edit)
        form.addRow("Strategy:", self.strategy_combo)
        form.addRow("Launch style:", self.style_combo)
        form.addRow("Training command:", self.command_edit)
        form.addRow("Working directory:", workdir_row)
        form.addRow("Training is over when:", self.complete_box)
        form.addRow("Stop grace:", _with_note(self.grace_spin, "from SIGTERM to SIGKILL when a role is stopped"))
        form.addRow("Running after:", _with_note(self.start_spin, "a role up this long counts as running"))
        form.addRow("Metric patterns:", self.patterns_edit)
        form.addRow("Environment:", self.env_table)

        self.tabs = QtWidgets.QTabWidget()
        self.tabs.setObjectName("jobs")
        self.tabs.setToolTip("One tab per job; the tasks of a job are its rows.")
        self.add_job_button = QtWidgets.QPushButton("Add job")
        self.add_job_menu = QtWidgets.QMenu(self.add_job_button)
        self.add_job_button.setMenu(self.add_job_menu)
        jobs_top = QtWidgets.QHBoxLayout()
        jobs_top.addWidget(_note("One tab per job, one row per task: ps, chief, worker, evaluator."))
        jobs_top.addStretch(1)
        jobs_top.addWidget(self.add_job_button)
        jobs_box = QtWidgets.QGroupBox("Jobs and tasks")
        jobs_layout = QtWidgets.QVBoxLayout(jobs_box)
        jobs_layout.addLayout(jobs_top)
        jobs_layout.addWidget(self.tabs)

        left = QtWidgets.QWidget()
        left_layout = QtWidgets.QVBoxLayout(left)
        left_layout.setContentsMargins(0, 0, 0, 0)
        left_layout.addWidget(cluster_box)
        left_layout.addStretch(1)  # spare height below the form, not between its rows
        scroll = QtWidgets.QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setHorizontalScrollBarPolicy(QtCore.Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setWidget(left)
        scroll.setFrameShape(QtWidgets.QFrame.Shape.NoFrame)
        scroll.setMinimumWidth(420)
        splitter = QtWidgets.QSplitter(QtCore.Qt.Orientation.Horizontal)
        splitter.addWidget(scroll)
        splitter.addWidget(jobs_box)
        splitter.setStretchFactor(0, 1)
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([620, 660])
        splitter.setChildrenCollapsible(False)
        outer = QtWidgets.QHBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(splitter)

        self.markers = {
            "name": Marker(self.name_edit),
            "strategy": Marker(self.strategy_combo),
            "launch_style": Marker(self.style_combo),
            "command": Marker(self.command_edit),
            "workdir": Marker(self.workdir_edit),
            "complete_when": Marker(self.complete_box),
            "stop_grace_s": Marker(self.grace_spin),
            "start_s": Marker(self.start_spin),
            "metric_patterns": Marker(self.patterns_edit),
            "jobs": Marker(self.tabs),
        }
        for edit in (self.name_edit, self.command_edit, self.workdir_edit):
            edit.textChanged.connect(lambda _t: self.sig_changed.emit())
        for combo in (self.strategy_combo, self.style_combo):
            combo.currentIndexChanged.connect(lambda _i: self.sig_changed.emit())
        for spin in (self.grace_spin, self.start_spin):
            spin.valueChanged.connect(lambda _v: self.sig_changed.emit())
        self.patterns_edit.textChanged.connect(self.sig_changed)
        self.env_table.sig_changed.connect(self.sig_changed)
        self._update_add_job_menu()

    # ------------------------------------------------------------------ jobs

    def add_job(self, job: str, value: Any = None) -> JobEditor:
        """Add the ``job`` tab (with one task at a free port unless ``value`` gives its table)."""
        if job in self.jobs:
            return self.jobs[job]
        editor = JobEditor(job, self._suggest_address)
        self.jobs[job] = editor
        if value is None:
            editor.add_task()
        else:
            editor.set_data(value)
        editor.sig_changed.connect(self._on_job_changed)
        editor.sig_remove_requested.connect(self.remove_job)
        position = sum(1 for j in JOB_ORDER[: JOB_ORDER.index(job)] if j in self.jobs)
        self.tabs.insertTab(position, editor, job)
        self._update_add_job_menu()
        self._update_tab_titles()
        if value is None:
            self.tabs.setCurrentWidget(editor)
        self.sig_changed.emit()
        return editor

    def remove_job(self, job: str) -> None:
        editor = self.jobs.pop(job, None)
        if editor is None:
            return
        self.tabs.removeTab(self.tabs.indexOf(editor))
        editor.deleteLater()
        self._update_add_job_menu()
        self.sig_changed.emit()

    def _on_job_changed(self) -> None:
        self._update_tab_titles()
        self.sig_changed.emit()

    def _update_add_job_menu(self) -> None:
        self.add_job_menu.clear()
        for job in JOB_ORDER:
            if job not in self.jobs:
                action = self.add_job_menu.addAction(f"Add a {job} job")
                action.triggered.connect(lambda _checked=False, j=job: self.add_job(j))
        self.add_job_button.setEnabled(len(self.jobs) < len(JOB_ORDER))

    def _update_tab_titles(self) -> None:
        for job, editor in self.jobs.items():
            n = editor.table.rowCount()
            self.tabs.setTabText(self.tabs.indexOf(editor), f"{job} ({n} task{'s' if n != 1 else ''})")

    def addresses(self) -> list[tuple[str, str, str]]:
        return [(job, host, port) for job, editor in self.jobs.items() for host, port in editor.addresses()]

    # ------------------------------------------------------------------ data in and out

    def set_data(self, data: dict[str, Any]) -> None:
        """Fill every field from a cluster file's TOML table (as read, errors and all)."""
        widgets: list[QtCore.QObject] = [
            self.name_edit,
            self.command_edit,
            self.workdir_edit,
            self.strategy_combo,
            self.style_combo,
            self.grace_spin,
            self.start_spin,
            self.patterns_edit,
            *self.complete_checks.values(),
        ]
        for w in widgets:
            w.blockSignals(True)
        self.name_edit.setText(str(data.get("name", "cluster")))
        _set_combo(self.strategy_combo, data.get("strategy", "between_graph"))
        _set_combo(self.style_combo, data.get("launch_style", "flags"))
        self.command_edit.setText(format_command(data.get("command")))
        self.command_edit.setCursorPosition(0)  # the program's name first, not the tail of its flags
        self.workdir_edit.setText(str(data.get("workdir", ".")))
        complete = data.get("complete_when")
        for job, check in self.complete_checks.items():
            check.setChecked(isinstance(complete, list) and job in complete)
        self.grace.set(data.get("stop_grace_s"), 5.0)
        self.start.set(data.get("start_s"), 1.0)
        patterns = data.get("metric_patterns")
        self.patterns_edit.setPlainText("\n".join(str(p) for p in patterns) if isinstance(patterns, list) else "")
        for w in widgets:
            w.blockSignals(False)
        self.env_table.set_env(data.get("env"))
        self._set_jobs(data.get("jobs"))
        self.extra = {k: v for k, v in data.items() if k not in FORM_KEYS}
        self.sig_changed.emit()

    def replace_cluster(self, data: dict[str, Any]) -> None:
        """Take the jobs, command, strategy and launch style of an imported cluster; keep the rest."""
        _set_combo(self.strategy_combo, data.get("strategy", "between_graph"))
        _set_combo(self.style_combo, data.get("launch_style", "flags"))
        self.command_edit.setText(format_command(data.get("command")))
        self._set_jobs(data.get("jobs"))
        self.sig_changed.emit()

    def _set_jobs(self, jobs: Any) -> None:
        for job in list(self.jobs):
            self.remove_job(job)
        if isinstance(jobs, dict):
            for job in JOB_ORDER:
                if job in jobs:
                    self.add_job(job, jobs[job])
            # A job TowerDeck does not know is kept so validate can say "did you mean ...".
            self.extra_jobs = {k: v for k, v in jobs.items() if k not in JOB_ORDER}
        else:
            self.extra_jobs = {}
        if self.tabs.count():
            self.tabs.setCurrentIndex(0)

    def set_workdir_text(self, text: str) -> None:
        self.workdir_edit.setText(text)

    def data(self) -> tuple[dict[str, Any], list[Problem]]:
        """The TOML table this form describes, in the order of ``core.cluster.spec.to_data``, and problems
        with text that has no TOML form (GPUs that are not numbers, env without ``=``)."""
        problems: list[Problem] = []
        out: dict[str, Any] = {
            "name": self.name_edit.text(),
            "strategy": self.strategy_combo.currentData(),
            "launch_style": self.style_combo.currentData(),
        }
        command = command_value(self.command_edit.text())
        if command is not None:
            out["command"] = command
        out["workdir"] = self.workdir_edit.text().strip() or "."
        complete = [job for job, check in self.complete_checks.items() if check.isChecked()]
        if complete:
            out["complete_when"] = complete
        out["stop_grace_s"] = self.grace.value()
        out["start_s"] = self.start.value()
        patterns = [line for line in self.patterns_edit.toPlainText().splitlines() if line.strip()]
        if patterns:
            out["metric_patterns"] = patterns
        out.update(self.extra)
        env = self.env_table.env()
        if env:
            out["env"] = env
        jobs: dict[str, Any] = {}
        for job in JOB_ORDER:
            if job in self.jobs:
                jobs[job], job_problems = self.jobs[job].data()
                problems += job_problems
        jobs.update(self.extra_jobs)
        if jobs or "jobs" in self.extra:
            out["jobs"] = jobs
        return out, problems

    # ------------------------------------------------------------------ problems

    def mark(self, problems: list[Problem]) -> None:
        """Tint the widget of each problem's field; list a job's problems under its tasks."""
        top: dict[str, list[Problem]] = {}
        per_job: dict[str, list[tuple[list[str | int], Problem]]] = {job: [] for job in self.jobs}
        for problem in problems:
            parts = path_parts(problem.field)
            if not parts:
                continue
            if parts[0] == "jobs" and len(parts) > 1 and parts[1] in self.jobs:
                per_job[str(parts[1])].append((parts[2:], problem))
            else:
                top.setdefault(str(parts[0]), []).append(problem)
        for key, marker in self.markers.items():
            marker.set(top.get(key, []))
        self.env_table.mark(top.get("env", []))
        bar = self.tabs.tabBar()
        for job, editor in self.jobs.items():
            editor.mark(per_job[job])
            located = [p for _rest, p in per_job[job]]
            colour = QtGui.QColor(ERROR_INK if worst(located) == ERROR else "#8a5a00") if located else QtGui.QColor()
            bar.setTabTextColor(self.tabs.indexOf(editor), colour)

    def _unknown_home(self, parts: list[str | int]) -> dict[str, Any] | None:
        """The dict of kept unknown keys that holds the key at ``parts``, if any."""
        if len(parts) == 1 and str(parts[0]) in self.extra and str(parts[0]) not in TOP_KEYS:
            return self.extra  # a known key without a widget (hosts, success_policy...) is no typo
        if len(parts) == 2 and parts[0] == "jobs" and str(parts[1]) in self.extra_jobs:
            return self.extra_jobs
        if (
            len(parts) == 3
            and parts[0] == "jobs"
            and parts[1] in self.jobs
            and str(parts[2]) in self.jobs[str(parts[1])].extra
        ):
            return self.jobs[str(parts[1])].extra
        return None

    def has_unknown_key(self, parts: list[str | int]) -> bool:
        return self._unknown_home(parts) is not None

    def remove_unknown_key(self, parts: list[str | int]) -> bool:
        home = self._unknown_home(parts)
        if home is None:
            return False
        del home[str(parts[-1])]
        self.sig_changed.emit()
        return True

    def focus_field(self, parts: list[str | int]) -> None:
        """Bring the widget of a field path into view and give it the focus."""
        if parts[:1] == ["jobs"] and len(parts) > 1 and parts[1] in self.jobs:
            editor = self.jobs[str(parts[1])]
            self.tabs.setCurrentWidget(editor)
            rest = parts[2:]
            if rest[:1] == ["tasks"] and len(rest) > 1 and isinstance(rest[1], int):
                col = {"gpus": GPUS, "command": COMMAND, "env": ENV}.get(str(rest[2]) if len(rest) > 2 else "", HOST)
                editor.table.setCurrentCell(rest[1], col)
                editor.table.setFocus()
            elif rest and str(rest[0]) in editor.markers:
                editor.markers[str(rest[0])].widget.setFocus()
            elif rest[:1] == ["restart"]:
                editor.policy_combo.setFocus()
            else:
                editor.table.setFocus()
            return
        key = str(parts[0]) if parts else ""
        if key in self.markers:
            self.markers[key].widget.setFocus()
        elif key == "env":
            self.env_table.table.setFocus()

    def _on_browse(self) -> None:
        base = self.base_dir or Path.cwd()
        start = str(base / (self.workdir_edit.text() or "."))
        chosen = QtWidgets.QFileDialog.getExistingDirectory(self, "Working directory of the roles", start)
        if not chosen:
            return
        # Relative to the cluster file when it is below it, so the folder can move as a whole.
        relative = os.path.relpath(chosen, base) if self.base_dir is not None else ".."
        self.workdir_edit.setText(relative if not relative.startswith("..") else chosen)


def _combo(items: dict[str, str], tip: str) -> QtWidgets.QComboBox:
    combo = QtWidgets.QComboBox()
    for value, text in items.items():
        combo.addItem(text, value)
    combo.setToolTip(tip)
    # The long descriptions must not set the form's minimum width; the popup still shows them whole.
    combo.setSizeAdjustPolicy(QtWidgets.QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
    combo.setMinimumContentsLength(24)
    return combo


def _set_combo(combo: QtWidgets.QComboBox, value: Any) -> None:
    index = combo.findData(value)
    if index < 0:
        # Shown as written, so validate's "did you mean" message about it makes sense.
        combo.addItem(f"{value} (not valid)", value)
        index = combo.count() - 1
    combo.setCurrentIndex(index)


def _seconds(tip: str) -> QtWidgets.QDoubleSpinBox:
    spin = QtWidgets.QDoubleSpinBox()
    spin.setRange(0.0, 3600.0)
    spin.setDecimals(1)
    spin.setSuffix(" s")
    spin.setToolTip(tip)
    return spin


def _with_note(widget: QtWidgets.QWidget, text: str) -> QtWidgets.QHBoxLayout:
    row = QtWidgets.QHBoxLayout()
    widget.setMaximumWidth(110)
    row.addWidget(widget)
    row.addWidget(_note(text), 1)
    return row


def _note(text: str) -> QtWidgets.QLabel:
    label = QtWidgets.QLabel(text)
    label.setStyleSheet("color: #666;")
    label.setWordWrap(True)  # the form column must fit a 1280-pixel window without clipping
    return label
