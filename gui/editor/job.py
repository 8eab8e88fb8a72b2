"""One job of the cluster editor: its task table, GPUs, command override, env and restart policy."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from PySide6 import QtCore, QtWidgets

from core.cluster.problems import Problem
from core.cluster.spec import POLICIES, TASK_KEYS, RestartPolicy, parse_address
from gui.editor.fields import (
    EnvTable,
    FileNumber,
    Marker,
    command_value,
    format_command,
    format_env_text,
    format_gpus,
    mark_item,
    parse_env_text,
    parse_gpus,
)

HOST, PORT, GPUS, COMMAND, ENV = range(5)
TASK_COLUMNS = ("Host", "Port", "GPUs", "Command override", "Env (NAME=value ...)")
COLUMN_HELP = (
    "The machine this task runs on: a name or an address (IPv6 without brackets).",
    "The TCP port of this task's TensorFlow server, 1-65535; each host:port only once in the cluster.",
    "GPUs this task may use (CUDA_VISIBLE_DEVICES), e.g. 0, 1; 'none' hides every GPU; empty: the job's setting.",
    "Run another command for this task only; empty: the job's or the cluster's command.",
    "Extra environment variables for this task, e.g. OMP_NUM_THREADS=2.",
)
JOB_HELP = {
    "ps": "Parameter servers hold the model's variables and serve them to the workers. They never finish by "
    "themselves: TowerDeck stops them when training is over. They get no GPU unless you give them one.",
    "chief": "The chief coordinates training: with ParameterServerStrategy it runs the ClusterCoordinator; it "
    "usually writes checkpoints and summaries.",
    "worker": "Workers compute the gradients; every cluster needs at least one. In classic between-graph "
    "replication, worker 0 is the chief.",
    "evaluator": "The evaluator reads checkpoints and evaluates them beside the training; it is kept out of "
    "TF_CONFIG's cluster, as TensorFlow expects.",
}
POLICY_HELP = (
    "Never: a role that exits stays down.\n"
    "OnFailure: restart after a non-zero exit or a signal.\n"
    "Always: restart after any exit while the training goes on.\n"
    "ExitCode: restart only after a signal or an exit code 128-255 (1-127 are permanent errors)."
)
DEFAULT_RESTART = RestartPolicy()


def join_address(host: str, port: str) -> str:
    host = host.strip()
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # IPv6, as TOML and TensorFlow write it
    return f"{host}:{port.strip()}"


class JobEditor(QtWidgets.QWidget):
    """The form for ``[jobs.NAME]``; :meth:`data` gives its TOML table."""

    sig_changed = QtCore.Signal()
    sig_remove_requested = QtCore.Signal(str)

    def __init__(self, job: str, suggest_address: Callable[[str], tuple[str, int]]) -> None:
        super().__init__()
        self.job = job
        self._suggest_address = suggest_address
        self.extra: dict[str, Any] = {}  # keys the form has no widget for: kept, so validate still names them
        # tasks = N (a count, on Slurm): kept as it is while the table has no rows, so Save keeps it.
        self.count: int | None = None

        about = QtWidgets.QLabel(JOB_HELP[job])
        about.setWordWrap(True)
        about.setStyleSheet("color: #555;")

        self.table = QtWidgets.QTableWidget(0, len(TASK_COLUMNS))
        self.table.setObjectName(f"tasks-{job}")
        self.table.setHorizontalHeaderLabels(list(TASK_COLUMNS))
        for col, tip in enumerate(COLUMN_HELP):
            header_item = self.table.horizontalHeaderItem(col)
            if header_item is not None:
                header_item.setToolTip(tip)
        self.table.verticalHeader().setDefaultSectionSize(26)
        header = self.table.horizontalHeader()
        for col, width in ((HOST, 150), (PORT, 70), (GPUS, 70), (COMMAND, 200)):
            header.resizeSection(col, width)
        header.setStretchLastSection(True)
        self.table.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QtWidgets.QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setToolTip(f"The {job} tasks; the row number is the task index (/job:{job}/task:N).")
        self.table.model().rowsInserted.connect(self._renumber)
        self.table.model().rowsRemoved.connect(self._renumber)
        self.table.itemChanged.connect(lambda _item: self.sig_changed.emit())
        self.table.setMinimumHeight(84)
        self.table_marker = Marker(self.table)

        self.add_button = QtWidgets.QPushButton("Add task")
        self.remove_button = QtWidgets.QPushButton("Remove task")
        self.up_button = QtWidgets.QPushButton("Move up")
        self.down_button = QtWidgets.QPushButton("Move down")
        self.add_button.clicked.connect(lambda: self.add_task())
        self.remove_button.clicked.connect(self.remove_selected)
        self.up_button.clicked.connect(lambda: self.move_selected(-1))
        self.down_button.clicked.connect(lambda: self.move_selected(+1))
        task_buttons = QtWidgets.QHBoxLayout()
        for b in (self.add_button, self.remove_button, self.up_button, self.down_button):
            task_buttons.addWidget(b)
        task_buttons.addStretch(1)

        # Per-job problems in words, right under the task table: a red cell alone is easy to miss.
        self.problem_label = QtWidgets.QLabel()
        self.problem_label.setWordWrap(True)
        self.problem_label.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        self.problem_label.hide()

        self.gpus_edit = QtWidgets.QLineEdit()
        self.gpus_edit.setPlaceholderText("none (a ps gets no GPU)" if job == "ps" else "not set: every GPU visible")
        self.gpus_edit.setToolTip("The GPUs each task of this job may use unless the task says otherwise, e.g. 0, 1.")
        self.command_edit = QtWidgets.QLineEdit()
        self.command_edit.setPlaceholderText("the cluster's training command")
        self.command_edit.setToolTip(f"A command for the {job} tasks instead of the cluster's one.")
        self.env_table = EnvTable(f"every {job} task")

        self.policy_combo = QtWidgets.QComboBox()
        self.policy_combo.addItems(list(POLICIES))
        self.policy_combo.setToolTip(POLICY_HELP)
        self.max_restarts_spin = QtWidgets.QSpinBox()
        self.max_restarts_spin.setRange(0, 10_000)
        self.max_restarts_spin.setToolTip("After this many restarts the role has failed for good.")
        self.backoff_spin = _seconds(0.0, 3600.0, "Delay before the first restart; it doubles on each restart.")
        self.backoff_max_spin = _seconds(0.0, 86_400.0, "The restart delay never grows beyond this.")
        self.reset_after_spin = _seconds(
            0.0,
            7 * 86_400.0,
            "A role that ran this long before it exited gets its restart count back to zero "
            "(0: never; every restart counts for the whole run).",
        )
        # The file's numbers as written, even those a spin box cannot show (never a silent default).
        self.restart_numbers = {
            key: FileNumber(spin, self.sig_changed.emit)
            for key, spin in (
                ("max_restarts", self.max_restarts_spin),
                ("backoff_s", self.backoff_spin),
                ("backoff_max_s", self.backoff_max_spin),
                ("reset_after_s", self.reset_after_spin),
            )
        }
        # Two lines, so the jobs pane stays narrow enough for the cluster column beside it.
        restart_row = QtWidgets.QVBoxLayout()
        lines = (
            (("max", self.max_restarts_spin), ("back-off", self.backoff_spin)),
            (("up to", self.backoff_max_spin), ("reset after", self.reset_after_spin)),
        )
        for n, pairs in enumerate(lines):
            line = QtWidgets.QHBoxLayout()
            if n == 0:
                line.addWidget(self.policy_combo)
            for label, w in pairs:
                line.addSpacing(8)
                line.addWidget(QtWidgets.QLabel(label))
                line.addWidget(w)
            line.addStretch(1)
            restart_row.addLayout(line)
        self.set_restart(None)

        self.remove_job_button = QtWidgets.QPushButton(f"Remove the {job} job")
        self.remove_job_button.clicked.connect(lambda: self.sig_remove_requested.emit(self.job))

        form = QtWidgets.QFormLayout()
        form.setFieldGrowthPolicy(QtWidgets.QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.addRow("GPUs per task:", self.gpus_edit)
        form.addRow("Command override:", self.command_edit)
        form.addRow("Environment:", self.env_table)
        form.addRow("Restart policy:", restart_row)

        layout = QtWidgets.QVBoxLayout(self)
        layout.addWidget(about)
        layout.addWidget(self.table, 1)
        layout.addLayout(task_buttons)
        layout.addWidget(self.problem_label)
        layout.addLayout(form)
        bottom = QtWidgets.QHBoxLayout()
        bottom.addStretch(1)
        bottom.addWidget(self.remove_job_button)
        layout.addLayout(bottom)

        self.markers = {
            "gpus": Marker(self.gpus_edit),
            "command": Marker(self.command_edit),
            "policy": Marker(self.policy_combo),
            "max_restarts": Marker(self.max_restarts_spin),
            "backoff_s": Marker(self.backoff_spin),
            "backoff_max_s": Marker(self.backoff_max_spin),
            "reset_after_s": Marker(self.reset_after_spin),
        }
        for edit in (self.gpus_edit, self.command_edit):
            edit.textChanged.connect(lambda _t: self.sig_changed.emit())
        self.env_table.sig_changed.connect(self.sig_changed)
        self.policy_combo.currentTextChanged.connect(self._on_policy_changed)
        self.max_restarts_spin.valueChanged.connect(lambda _v: self.sig_changed.emit())
        self.backoff_spin.valueChanged.connect(lambda _v: self.sig_changed.emit())
        self.backoff_max_spin.valueChanged.connect(lambda _v: self.sig_changed.emit())
        self.reset_after_spin.valueChanged.connect(lambda _v: self.sig_changed.emit())

    # ------------------------------------------------------------------ tasks

    def add_task(self, host: str | None = None, port: int | str | None = None) -> int:
        """Append a task (by default on the last task's host, at the next free port); returns its row."""
        if host is None or port is None:
            host, port = self._suggest_address(self.job)
        row = self.table.rowCount()
        self._write_row(row, [host, str(port), "", "", ""], {}, insert=True)
        self.table.selectRow(row)
        self.sig_changed.emit()
        return row

    def remove_selected(self) -> None:
        row = self.table.currentRow()
        if row < 0:
            return
        self.table.removeRow(row)
        if self.table.rowCount():
            self.table.selectRow(min(row, self.table.rowCount() - 1))
        self.sig_changed.emit()

    def move_selected(self, delta: int) -> None:
        row = self.table.currentRow()
        other = row + delta
        if row < 0 or not 0 <= other < self.table.rowCount():
            return
        a, b = self._read_row(row), self._read_row(other)
        self._write_row(row, *b)
        self._write_row(other, *a)
        self.table.setCurrentCell(other, self.table.currentColumn())
        self.table.selectRow(other)
        self.sig_changed.emit()

    def _read_row(self, row: int) -> tuple[list[str], dict[str, Any]]:
        cells = []
        for col in range(len(TASK_COLUMNS)):
            item = self.table.item(row, col)
            cells.append(item.text() if item else "")
        first = self.table.item(row, 0)
        extra = first.data(QtCore.Qt.ItemDataRole.UserRole) if first else None
        return cells, dict(extra or {})

    def _write_row(self, row: int, cells: list[str], extra: dict[str, Any], *, insert: bool = False) -> None:
        self.table.blockSignals(True)
        if insert:
            self.table.insertRow(row)
        for col, text in enumerate(cells):
            item = QtWidgets.QTableWidgetItem(text)
            item.setToolTip(COLUMN_HELP[col])
            if col == 0:  # the task's keys the table has no column for ride on its first cell
                item.setData(QtCore.Qt.ItemDataRole.UserRole, extra)
            self.table.setItem(row, col, item)
        self.table.blockSignals(False)

    def _renumber(self, *_args: object) -> None:
        # TensorFlow counts tasks from 0; the row labels say the task index, not a 1-based row.
        self.table.setVerticalHeaderLabels([str(i) for i in range(self.table.rowCount())])

    def addresses(self) -> list[tuple[str, str]]:
        return [
            (c[HOST].strip(), c[PORT].strip()) for c in (self._read_row(r)[0] for r in range(self.table.rowCount()))
        ]

    # ------------------------------------------------------------------ data in and out

    def set_data(self, value: Any) -> None:
        """Fill from a ``[jobs.NAME]`` table as read from TOML (or the ``tasks`` list shorthand)."""
        if isinstance(value, list):
            value = {"tasks": value}
        if not isinstance(value, dict):
            value = {}
        self.table.setRowCount(0)
        tasks = value.get("tasks")
        self.count = tasks if isinstance(tasks, int) and not isinstance(tasks, bool) else None
        self.table_marker.help = (  # the marker puts its help back as the table's tooltip
            f"tasks = {self.count}: hosts and ports come from the Slurm allocation; add rows to list them instead."
            if self.count is not None
            else f"The {self.job} tasks; the row number is the task index (/job:{self.job}/task:N)."
        )
        self.table.setToolTip(self.table_marker.help)
        for item in tasks if isinstance(tasks, list) else []:
            extra: dict[str, Any] = {}
            gpus = command = env = ""
            address = item
            if isinstance(item, dict):
                address = item.get("address", "")
                gpus = format_gpus(item.get("gpus"))
                command = format_command(item.get("command"))
                env = format_env_text(item.get("env"))
                extra = {k: v for k, v in item.items() if k not in TASK_KEYS}
            host, port = _split_address(str(address))
            self._write_row(self.table.rowCount(), [host, port, gpus, command, env], extra, insert=True)
        self.gpus_edit.setText(format_gpus(value.get("gpus")))
        self.command_edit.setText(format_command(value.get("command")))
        self.env_table.set_env(value.get("env"))
        self.set_restart(value.get("restart"))
        self.extra = {k: v for k, v in value.items() if k not in ("tasks", "gpus", "command", "env", "restart")}

    def set_restart(self, value: Any) -> None:
        if isinstance(value, str):
            value = {"policy": value}
        value = {**asdict(DEFAULT_RESTART), **(value if isinstance(value, dict) else {})}
        policy = str(value["policy"])
        if self.policy_combo.findText(policy) < 0:
            self.policy_combo.addItem(policy)  # shown as it is, so validate's message about it makes sense
        self.policy_combo.setCurrentText(policy)
        for key, number in self.restart_numbers.items():
            number.set(value[key], getattr(DEFAULT_RESTART, key))
        self._on_policy_changed(policy, emit=False)

    def _on_policy_changed(self, policy: str, *, emit: bool = True) -> None:
        # The numbers mean nothing under Never; greyed out so nobody tunes a policy that never fires.
        for w in (self.max_restarts_spin, self.backoff_spin, self.backoff_max_spin, self.reset_after_spin):
            w.setEnabled(policy != "Never")
        if emit:
            self.sig_changed.emit()

    def data(self) -> tuple[dict[str, Any], list[Problem]]:
        """This job as a TOML table, and problems with text that has no TOML form."""
        problems: list[Problem] = []
        prefix = f"jobs.{self.job}"
        tasks: list[Any] = []
        for row in range(self.table.rowCount()):
            cells, extra = self._read_row(row)
            field = f"{prefix}.tasks[{row}]"
            task: dict[str, Any] = {"address": join_address(cells[HOST], cells[PORT])}
            gpus, p = parse_gpus(cells[GPUS], f"{field}.gpus")
            problems += p
            if gpus is not None:
                task["gpus"] = gpus
            command = command_value(cells[COMMAND])
            if command is not None:
                task["command"] = command
            if cells[ENV].strip():
                env, p = parse_env_text(cells[ENV], f"{field}.env")
                problems += p
                if env:
                    task["env"] = env
            task.update(extra)
            tasks.append(task if len(task) > 1 else task["address"])
        out: dict[str, Any] = {"tasks": self.count if self.count is not None and not tasks else tasks}
        gpus, p = parse_gpus(self.gpus_edit.text(), f"{prefix}.gpus")
        problems += p
        if gpus is not None:
            out["gpus"] = gpus
        command = command_value(self.command_edit.text())
        if command is not None:
            out["command"] = command
        env = self.env_table.env()
        if env:
            out["env"] = env
        restart = {
            "policy": self.policy_combo.currentText(),
            **{key: number.value() for key, number in self.restart_numbers.items()},
        }
        if restart != {k: v for k, v in asdict(DEFAULT_RESTART).items() if k != "explicit"}:
            out["restart"] = restart
        out.update(self.extra)
        return out, problems

    # ------------------------------------------------------------------ problems

    def mark(self, located: list[tuple[list[str | int], Problem]]) -> None:
        """Show this job's problems; ``located`` holds each with its path below ``jobs.NAME``."""
        by_cell: dict[tuple[int, int], list[Problem]] = {}
        by_key: dict[str, list[Problem]] = {}
        for rest, problem in located:
            if rest[:1] == ["tasks"] and len(rest) >= 2 and isinstance(rest[1], int):
                col = {"gpus": GPUS, "command": COMMAND, "env": ENV}.get(str(rest[2]) if len(rest) > 2 else "", -1)
                for c in (HOST, PORT) if col < 0 else (col,):
                    by_cell.setdefault((rest[1], c), []).append(problem)
            elif rest[:1] == ["restart"]:
                key = str(rest[1]) if len(rest) > 1 and str(rest[1]) in self.markers else "policy"
                by_key.setdefault(key, []).append(problem)
            elif rest[:1] == ["env"]:
                by_key.setdefault("env", []).append(problem)
            elif rest and str(rest[0]) in self.markers:
                by_key.setdefault(str(rest[0]), []).append(problem)
            else:
                by_key.setdefault("tasks", []).append(problem)
        self.table.blockSignals(True)
        for row in range(self.table.rowCount()):
            for col in range(len(TASK_COLUMNS)):
                mark_item(self.table.item(row, col), by_cell.get((row, col), []), COLUMN_HELP[col])
        self.table.blockSignals(False)
        self.table_marker.set(by_key.get("tasks", []))
        for key, marker in self.markers.items():
            marker.set(by_key.get(key, []))
        self.env_table.mark(by_key.get("env", []))
        lines = []
        for rest, problem in located:
            where = f"task {rest[1]}: " if rest[:1] == ["tasks"] and len(rest) > 1 else ""
            colour = "#b3261e" if problem.severity == "error" else "#8a5a00"
            fix = f" <i>Fix: {_html(problem.hint)}</i>" if problem.hint else ""
            lines.append(f"<span style='color:{colour}'>● {where}{_html(problem.message)}.</span>{fix}")
        self.problem_label.setText("<br>".join(lines))
        self.problem_label.setVisible(bool(lines))


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _seconds(low: float, high: float, tip: str) -> QtWidgets.QDoubleSpinBox:
    spin = QtWidgets.QDoubleSpinBox()
    spin.setRange(low, high)
    spin.setDecimals(1)
    spin.setSuffix(" s")
    spin.setToolTip(tip)
    return spin


def _split_address(address: str) -> tuple[str, str]:
    """``host:port`` -> the two cells; text that is no address goes to the host cell as it is, so
    the user sees it and ``validate``'s message about it."""
    try:
        host, port = parse_address(address)
        return host, str(port)
    except ValueError:
        head, sep, tail = address.rpartition(":")
        if sep and not head.endswith("]") and ":" not in head:
            return head, tail
        if sep and head.startswith("[") and head.endswith("]"):
            return head[1:-1], tail
        return address, ""
