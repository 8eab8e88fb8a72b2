"""The cluster editor driven like a user drives it: typing, clicking, pasting, opening and saving.

Settings live in an ini file under tmp_path: the user's own QSettings are never read or written.
"""

from __future__ import annotations

import io
import shutil
import socket
from dataclasses import replace
from pathlib import Path

import pytest
from PySide6 import QtCore, QtWidgets

from core.cli import main as cli
from core.cluster.spec import dumps, load, parse_data, parse_text
from tests.helpers.ports import free_ports
from tests.helpers.project import ROOT
from tests.helpers.widgets import type_into

pytestmark = [
    pytest.mark.qt_log_level_fail("WARNING"),
    # The offscreen platform says this for every top-level window; it is not about our widgets.
    pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints"),
]


@pytest.fixture
def settings(tmp_path: Path) -> QtCore.QSettings:
    return QtCore.QSettings(str(tmp_path / "settings" / "towerdeck.ini"), QtCore.QSettings.Format.IniFormat)


@pytest.fixture
def editor(qtbot, settings):
    from gui.editor import ClusterEditor

    ed = ClusterEditor(settings=settings)
    qtbot.addWidget(ed)
    ed.resize(1300, 850)
    ed.show()
    return ed


def type_cell(qtbot, table: QtWidgets.QTableWidget, row: int, col: int, text: str) -> None:
    """Double-click-like editing of one cell: open its editor, type, press Enter."""
    table.setCurrentCell(row, col)
    table.editItem(table.item(row, col))
    editors = [w for w in table.viewport().findChildren(QtWidgets.QLineEdit) if w.isVisible()]
    assert len(editors) == 1, "the cell editor did not open"
    editors[0].selectAll()
    qtbot.keyClick(editors[0], QtCore.Qt.Key.Key_Delete)
    qtbot.keyClicks(editors[0], text)
    qtbot.keyClick(editors[0], QtCore.Qt.Key.Key_Return)
    qtbot.wait(10)  # let the event loop delete the closed cell editor, as it would for a user


def job_tab(editor, job: str):
    """Click the job's tab (its table is only editable when shown) and return its JobEditor."""
    tabs = editor.form.tabs
    tabs.tabBar().setCurrentIndex(tabs.indexOf(editor.form.jobs[job]))
    return editor.form.jobs[job]


def cells(table: QtWidgets.QTableWidget, col: int) -> list[str]:
    return [table.item(r, col).text() for r in range(table.rowCount())]


def job_errors(editor) -> list:
    """The errors about the jobs' fields (this machine's checks may add one about the command)."""
    return [p for p in editor.problems() if p.severity == "error" and p.field.startswith("jobs.")]


def open_and_wait(qtbot, ed, path: Path) -> None:
    with qtbot.waitSignal(ed.sig_path_changed, timeout=5000):
        ed.open_file(path)


def save_and_wait(qtbot, ed, path: Path | None = None) -> None:
    with qtbot.waitSignal(ed.sig_saved, timeout=5000):
        assert ed.save(path)


def validate_errors(path: Path) -> list[str]:
    """What `python main.py validate FILE --no-ports` prints, one problem a line (fix lines left out)."""
    err = io.StringIO()
    assert cli.main(["validate", str(path), "--no-ports"], io.StringIO(), err) == cli.EXIT_USAGE
    return [line for line in err.getvalue().splitlines() if ": error: " in line or ": warning: " in line]


def test_fill_the_form_from_scratch_with_the_keyboard(qtbot, editor, tmp_path: Path):
    from gui.editor.job import COMMAND, GPUS, HOST, PORT

    form = editor.form
    # Start from nothing: remove the starter jobs with their own buttons.
    qtbot.mouseClick(form.jobs["ps"].remove_job_button, QtCore.Qt.MouseButton.LeftButton)
    qtbot.mouseClick(form.jobs["worker"].remove_job_button, QtCore.Qt.MouseButton.LeftButton)
    assert form.tabs.count() == 0
    assert [(p.field, p.message) for p in editor.problems()] == [("jobs", "no jobs")]  # as validate says it
    assert "no jobs" in form.tabs.toolTip()
    assert editor.current_spec() is None

    type_into(qtbot, form.name_edit, "mnist")
    form.strategy_combo.setCurrentIndex(form.strategy_combo.findData("between_graph"))
    form.style_combo.setCurrentIndex(form.style_combo.findData("both"))
    type_into(qtbot, form.command_edit, "python -u train.py --steps=10 --note='two words'")
    type_into(qtbot, form.workdir_edit, str(tmp_path))
    qtbot.mouseClick(form.complete_checks["worker"], QtCore.Qt.MouseButton.LeftButton)
    form.grace_spin.selectAll()
    qtbot.keyClicks(form.grace_spin, "2.5")
    qtbot.mouseClick(form.env_table.add_button, QtCore.Qt.MouseButton.LeftButton)
    type_cell(qtbot, form.env_table.table, 0, 0, "TF_CPP_MIN_LOG_LEVEL")
    type_cell(qtbot, form.env_table.table, 0, 1, "1")

    # The Add job menu's own actions; a new job comes with one task at a free port.
    [add_worker] = [a for a in form.add_job_menu.actions() if a.text() == "Add a worker job"]
    add_worker.trigger()
    worker = form.jobs["worker"]
    assert cells(worker.table, HOST) == ["127.0.0.1"] and cells(worker.table, PORT) == ["2222"]
    type_cell(qtbot, worker.table, 0, PORT, "5001")
    qtbot.mouseClick(worker.add_button, QtCore.Qt.MouseButton.LeftButton)
    qtbot.mouseClick(worker.add_button, QtCore.Qt.MouseButton.LeftButton)
    assert cells(worker.table, PORT) == ["5001", "5002", "5003"]
    type_cell(qtbot, worker.table, 1, GPUS, "1")
    type_cell(qtbot, worker.table, 2, COMMAND, "python -u train.py --steps=20")
    # Reorder: the last task moves up to index 1, then the first task is removed.
    worker.table.selectRow(2)
    qtbot.mouseClick(worker.up_button, QtCore.Qt.MouseButton.LeftButton)
    assert cells(worker.table, PORT) == ["5001", "5003", "5002"]
    worker.table.selectRow(0)
    qtbot.mouseClick(worker.remove_button, QtCore.Qt.MouseButton.LeftButton)
    assert cells(worker.table, PORT) == ["5003", "5002"]
    assert [worker.table.verticalHeaderItem(r).text() for r in range(2)] == ["0", "1"]  # task indices
    type_into(qtbot, worker.gpus_edit, "0")
    worker.policy_combo.setCurrentText("OnFailure")
    worker.max_restarts_spin.selectAll()
    qtbot.keyClicks(worker.max_restarts_spin, "5")

    [add_ps] = [a for a in form.add_job_menu.actions() if a.text() == "Add a ps job"]
    add_ps.trigger()
    assert form.tabs.tabText(0) == "ps (1 task)"  # ps goes first, whatever the order of adding
    assert cells(form.jobs["ps"].table, PORT) == ["5004"]

    expected, problems = parse_data(
        {
            "name": "mnist",
            "strategy": "between_graph",
            "launch_style": "both",
            "command": ["python", "-u", "train.py", "--steps=10", "--note=two words"],
            "workdir": str(tmp_path),
            "complete_when": ["worker"],
            "stop_grace_s": 2.5,
            "env": {"TF_CPP_MIN_LOG_LEVEL": "1"},
            "jobs": {
                "ps": {"tasks": ["127.0.0.1:5004"]},
                "worker": {
                    "gpus": [0],
                    "restart": {"policy": "OnFailure", "max_restarts": 5},
                    "tasks": [
                        {"address": "127.0.0.1:5003", "command": ["python", "-u", "train.py", "--steps=20"]},
                        {"address": "127.0.0.1:5002", "gpus": [1]},
                    ],
                },
            },
        }
    )
    assert problems == []
    assert editor.current_spec() == expected
    # What Save would write parses back to the same cluster.
    again, problems = parse_text(dumps(expected, tmp_path), tmp_path / "c.toml")
    assert problems == [] and again is not None
    assert replace(again, source=None) == expected


def test_duplicate_and_bad_ports_show_validates_message_at_the_cell_and_in_the_list(qtbot, editor, tmp_path: Path):
    from gui.editor.fields import ERROR_FILL
    from gui.editor.job import HOST, PORT

    worker = job_tab(editor, "worker")
    type_cell(qtbot, worker.table, 1, PORT, "2223")  # the same as worker task 0
    # validate's words for the same cluster, written to a file.
    cluster = tmp_path / "dup.toml"
    cluster.write_text(
        'name = "cluster"\ncommand = "python -u train.py"\n[jobs.ps]\ntasks = ["127.0.0.1:2222"]\n'
        '[jobs.worker]\ntasks = ["127.0.0.1:2223", "127.0.0.1:2223"]\n'
    )
    # validate also says that train.py is missing here (this machine's check, as the form does):
    # this test is about the ports.
    [expected_line] = [line for line in validate_errors(cluster) if "error: jobs." in line]
    message = expected_line.split(": error: jobs.worker.tasks[1]: ")[1]
    assert message == "127.0.0.1:2223 is used twice (also jobs.worker.tasks[0])"

    [problem] = job_errors(editor)
    assert (problem.field, problem.message) == ("jobs.worker.tasks[1]", message)
    item = worker.table.item(1, PORT)
    assert message in item.toolTip() and "fix: give every task its own port" in item.toolTip()
    assert item.background().color() == ERROR_FILL
    assert worker.table.item(0, PORT).background().color() != ERROR_FILL
    assert message in worker.problem_label.text() and worker.problem_label.isVisible()
    assert [
        text
        for text in (editor.problem_list.item(i).text() for i in range(editor.problem_list.count()))
        if text.startswith("error: jobs.")
    ] == [f"error: jobs.worker.tasks[1]: {message}\n    fix: give every task its own port"]
    assert editor.current_spec() is None

    type_cell(qtbot, worker.table, 1, PORT, "70000")
    [problem] = job_errors(editor)
    assert problem.message == "port 70000 in '127.0.0.1:70000' is out of range 1-65535"
    assert problem.message in worker.table.item(1, HOST).toolTip()

    type_cell(qtbot, worker.table, 1, PORT, "2224")
    assert not [p for p in editor.problems() if "is used twice" in p.message or "out of range" in p.message]
    assert worker.table.item(1, PORT).background().color() != ERROR_FILL
    assert "is used twice" not in worker.table.item(1, PORT).toolTip()
    assert not worker.problem_label.isVisible()


def test_a_loaded_file_lists_problems_with_validates_lines(qtbot, editor, tmp_path: Path):
    cluster = tmp_path / "bad.toml"
    cluster.write_text(
        'name = "bad"\n'
        'strategy = "between-graph"\n'
        'command = ["python", "-u", "train.py"]\n'
        "\n"
        "[jobs.ps]\n"
        'tasks = ["127.0.0.1:2222"]\n'
        "\n"
        "[jobs.worker]\n"
        "tasks = [\n"
        '    "127.0.0.1:2223",\n'
        '    "127.0.0.1:2222",\n'
        "]\n"
    )
    expected = validate_errors(cluster)
    assert len(expected) == 3  # the strategy, the port used twice, and train.py missing: all at once
    open_and_wait(qtbot, editor, cluster)
    qtbot.waitUntil(lambda: not editor.is_checking and len(editor.problems()) == 3, timeout=30_000)
    shown = [editor.problem_list.item(i).text().split("\n")[0] for i in range(editor.problem_list.count())]
    # validate prints the path as given; the list names the file. Line numbers and words agree.
    assert [line.replace(str(cluster), "bad.toml") for line in expected] == shown
    assert "bad.toml:11: error: jobs.worker.tasks[1]: 127.0.0.1:2222 is used twice" in shown[1]
    assert "bad.toml:3: error: command: script 'train.py' does not exist" in shown[2]
    # The invalid strategy is shown as written, with validate's "did you mean" in its tooltip.
    assert editor.form.strategy_combo.currentText() == "between-graph (not valid)"
    assert "did you mean 'between_graph'?" in editor.form.strategy_combo.toolTip()
    # Once edited, the file's line numbers would lie: they go away.
    editor.form.strategy_combo.setCurrentIndex(editor.form.strategy_combo.findData("between_graph"))
    qtbot.waitUntil(lambda: not editor.is_checking, timeout=30_000)
    assert {p.field for p in editor.problems()} == {"jobs.worker.tasks[1]", "command"}
    assert all(p.line is None for p in editor.problems()) and editor.is_dirty


def test_bad_gpu_text_and_task_env_name_the_field(qtbot, editor):
    from gui.editor.job import ENV, GPUS

    worker = job_tab(editor, "worker")
    type_cell(qtbot, worker.table, 0, GPUS, "0, x")
    type_cell(qtbot, worker.table, 1, ENV, "NOEQUALS")
    fields = {p.field: p.message for p in editor.problems() if p.severity == "error"}
    assert fields == {
        "jobs.worker.tasks[0].gpus": "'x' is not a GPU index",
        "jobs.worker.tasks[1].env": "'NOEQUALS' has no '='",
    }
    assert "'x' is not a GPU index" in worker.table.item(0, GPUS).toolTip()
    assert editor.current_spec() is None
    type_cell(qtbot, worker.table, 0, GPUS, "none")
    type_cell(qtbot, worker.table, 1, ENV, "OMP_NUM_THREADS=2 NOTE='a b'")
    spec = editor.current_spec()
    assert spec is not None
    assert spec.jobs["worker"].tasks[0].gpus == ()
    assert spec.jobs["worker"].tasks[1].env == {"OMP_NUM_THREADS": "2", "NOTE": "a b"}


def test_this_machines_checks_mark_a_busy_port_and_a_missing_directory(qtbot, editor, tmp_path: Path):
    from gui.editor.job import PORT

    (tmp_path / "train.py").write_text("print('hi')\n")
    [port] = free_ports(1)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        type_into(qtbot, editor.form.workdir_edit, str(tmp_path))
        type_cell(qtbot, job_tab(editor, "worker").table, 0, PORT, str(port))
        # The spec itself is fine; the port check runs off the GUI thread and reports later.
        assert editor.current_spec() is not None
        busy = f"port {port} on 127.0.0.1 is already in use"
        qtbot.waitUntil(lambda: any(busy in p.message for p in editor.problems()), timeout=5000)
        assert busy in job_tab(editor, "worker").table.item(0, PORT).toolTip()
        assert not editor.is_valid
    type_into(qtbot, editor.form.workdir_edit, str(tmp_path / "missing"))
    qtbot.waitUntil(lambda: any(p.field == "workdir" for p in editor.problems()), timeout=5000)
    assert "is not a directory" in editor.form.workdir_edit.toolTip()
    assert not any(busy in p.message for p in editor.problems())  # the port is free again


def test_paste_a_command_line_and_a_tf_config(qtbot, editor):
    from gui.editor.job import PORT

    dialog = editor.paste_dialog()
    dialog.show()
    qtbot.keyClicks(dialog.text_edit, "python trainer.py --ps_hosts=127.0.0.1:1")  # no --worker_hosts
    qtbot.mouseClick(dialog.fill_button, QtCore.Qt.MouseButton.LeftButton)
    assert "the command line has no --worker_hosts" in dialog.error_label.text()
    assert dialog.isVisible() and "ps" in editor.form.jobs  # nothing changed

    dialog.text_edit.clear()
    qtbot.keyClicks(
        dialog.text_edit,
        "python trainer.py --ps_hosts=127.0.0.1:3000 --worker_hosts=127.0.0.1:3001,127.0.0.1:3002 "
        "--job_name=worker --task_index=1 --learning_rate=0.1",
    )
    assert not dialog.command_row.isVisible()
    qtbot.mouseClick(dialog.fill_button, QtCore.Qt.MouseButton.LeftButton)
    assert dialog.result() == QtWidgets.QDialog.DialogCode.Accepted
    form = editor.form
    assert cells(form.jobs["ps"].table, PORT) == ["3000"]
    assert cells(form.jobs["worker"].table, PORT) == ["3001", "3002"]
    assert form.command_edit.text() == "python trainer.py --learning_rate=0.1"
    assert form.style_combo.currentData() == "flags" and form.strategy_combo.currentData() == "between_graph"
    assert form.name_edit.text() == "cluster"  # kept

    dialog = editor.paste_dialog()
    dialog.show()
    qtbot.keyClicks(
        dialog.text_edit,
        """TF_CONFIG='{"cluster": {"chief": ["127.0.0.1:4000"], "worker": ["127.0.0.1:4001", "127.0.0.1:4002"], """
        """"ps": ["127.0.0.1:4003"]}, "task": {"type": "worker", "index": 0}}'""",
    )
    assert dialog.command_row.isVisible()
    assert dialog.command_edit.text() == "python trainer.py --learning_rate=0.1"  # the form's command
    type_into(qtbot, dialog.command_edit, "python -u pss.py")
    qtbot.mouseClick(dialog.fill_button, QtCore.Qt.MouseButton.LeftButton)
    assert dialog.result() == QtWidgets.QDialog.DialogCode.Accepted
    assert [form.tabs.tabText(i) for i in range(form.tabs.count())] == [
        "ps (1 task)",
        "chief (1 task)",
        "worker (2 tasks)",
    ]
    assert form.strategy_combo.currentData() == "parameter_server"
    assert form.style_combo.currentData() == "tf_config"
    spec = editor.current_spec()
    assert spec is not None and spec.command == ("python", "-u", "pss.py")
    assert [t.address for t in spec.tasks()] == ["127.0.0.1:4003", "127.0.0.1:4000", "127.0.0.1:4001", "127.0.0.1:4002"]


def test_open_edit_save_reopen_and_save_elsewhere(qtbot, editor, settings, tmp_path: Path):
    from gui.editor import ClusterEditor
    from gui.editor.job import PORT

    cluster = tmp_path / "demo.toml"
    shutil.copy(ROOT / "resources" / "demo_cluster.toml", cluster)
    (tmp_path / "trainers").mkdir()
    with qtbot.waitSignal(editor.sig_path_changed, timeout=5000) as signal:
        editor.open_file(cluster)
    assert signal.args == [cluster.resolve()]
    assert editor.path == cluster.resolve() and not editor.is_dirty
    original, _ = load(cluster)
    assert editor.current_spec() == original
    assert editor.form.workdir_edit.text() == "trainers"

    worker = job_tab(editor, "worker")
    type_cell(qtbot, worker.table, 1, PORT, "42230")
    type_into(qtbot, worker.gpus_edit, "0, 1")
    assert editor.is_dirty and "modified" in editor.file_label.text()
    edited = editor.current_spec()
    assert edited is not None and edited.jobs["worker"].tasks[1].port == 42230

    cluster.chmod(0o600)  # a private file stays private after a save
    save_and_wait(qtbot, editor)
    assert cluster.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir() if "towerdeck-tmp" in p.name] == []
    assert not editor.is_dirty and "modified" not in editor.file_label.text()
    text = cluster.read_text()
    # Readable, like the bundled files: the job-level GPUs on one line in the worker's section.
    assert "[jobs.worker]\ntasks = [" in text and "\ngpus = [0, 1]\n" in text
    reread, problems = load(cluster)
    assert [p for p in problems if p.severity == "error"] == []
    assert reread == edited

    other = ClusterEditor(settings=settings)
    qtbot.addWidget(other)
    open_and_wait(qtbot, other, cluster)
    assert other.current_spec() == edited
    assert other.form.jobs["worker"].gpus_edit.text() == "0, 1"  # job-level, as the user put it

    # Save elsewhere: workdir is relative to the file, so it is rewritten to point to the same place.
    (tmp_path / "sub").mkdir()
    save_and_wait(qtbot, other, tmp_path / "sub" / "copy.toml")
    assert other.path == (tmp_path / "sub" / "copy.toml").resolve()
    assert other.form.workdir_edit.text() == "../trainers" or other.form.workdir_edit.text() == str(
        tmp_path / "trainers"
    )
    copied, _ = load(tmp_path / "sub" / "copy.toml")
    assert copied is not None and copied.workdir.resolve() == (tmp_path / "trainers").resolve()

    # A folder that is not there: the save fails, says why and what to do; the form stays as it was.
    with qtbot.waitSignal(other.sig_file_failed, timeout=5000) as failed:
        other.save(tmp_path / "missing" / "x.toml")
    assert "cannot save" in failed.args[0] and "no such file or directory" in failed.args[0]
    assert "fix: " in failed.args[0] and other.path == (tmp_path / "sub" / "copy.toml").resolve()


def test_unreadable_and_non_toml_files_say_why_and_keep_the_form(qtbot, editor, tmp_path: Path):
    broken = tmp_path / "broken.toml"
    broken.write_text('name = "x"\ntasks = [\n')
    with qtbot.waitSignal(editor.sig_file_failed, timeout=5000) as signal:
        editor.open_file(broken)
    assert "not valid TOML" in signal.args[0] and "broken.toml" in signal.args[0]
    assert "not valid TOML" in editor.status_label.text()
    assert editor.path is None and "worker" in editor.form.jobs
    with qtbot.waitSignal(editor.sig_file_failed, timeout=5000) as signal:
        editor.open_file(tmp_path / "nope.toml")
    assert "no such file" in signal.args[0]


def test_recent_files_newest_first_at_most_ten_and_forget_missing(qtbot, editor, settings, tmp_path: Path):
    paths = []
    for i in range(12):
        path = tmp_path / f"c{i}.toml"
        shutil.copy(ROOT / "resources" / "demo_cluster.toml", path)
        paths.append(path.resolve())
        open_and_wait(qtbot, editor, path)
    assert editor.recent_files() == list(reversed(paths))[:10]
    texts = [a.text() for a in editor.recent_menu.actions() if a.data()]
    assert texts[0].startswith("&1  c11.toml") and len(texts) == 10
    settings.sync()
    assert (tmp_path / "settings" / "towerdeck.ini").exists()  # stored in the test's own file

    # Reopening an older one moves it to the top; a deleted one is dropped when chosen.
    open_and_wait(qtbot, editor, paths[5])
    assert editor.recent_files()[:2] == [paths[5], paths[11]]
    paths[11].unlink()
    [entry] = [a for a in editor.recent_menu.actions() if a.data() == str(paths[11])]
    with qtbot.waitSignal(editor.sig_file_failed, timeout=5000):
        entry.trigger()
    assert paths[11] not in editor.recent_files()
    assert editor.path == paths[5]


def test_running_cluster_edits_are_marked_for_the_next_launch(qtbot, editor):
    from gui.editor.job import PORT

    assert not editor.banner.isVisible()
    editor.set_running(running=True)
    assert editor.banner.isVisible() and "apply to the next launch" in editor.banner.text()
    assert "your changes" not in editor.banner.text()
    type_cell(qtbot, job_tab(editor, "worker").table, 1, PORT, "2230")
    # The form is checked once the user pauses (a fraction of a second), the banner with it.
    qtbot.waitUntil(lambda: "your changes apply to the next launch" in editor.banner.text(), timeout=2000)
    assert job_tab(editor, "worker").table.isEnabled()  # still editable: it is the next launch's cluster
    spec = editor.current_spec()
    assert spec is not None and spec.jobs["worker"].tasks[1].port == 2230  # what the next launch gets
    type_cell(qtbot, job_tab(editor, "worker").table, 1, PORT, "2224")  # back as launched
    qtbot.waitUntil(lambda: "your changes" not in editor.banner.text(), timeout=2000)
    editor.set_running(running=False)
    assert not editor.banner.isVisible()


def test_signals_tell_an_embedding_window_what_changed(qtbot, editor, tmp_path: Path):
    from gui.editor.job import PORT

    # A cluster that can launch here: its script exists, its ports are free.
    (tmp_path / "train.py").write_text("print('hi')\n")
    ps_port, port0, port1 = free_ports(3)
    type_into(qtbot, editor.form.workdir_edit, str(tmp_path))
    type_cell(qtbot, job_tab(editor, "ps").table, 0, PORT, str(ps_port))
    type_cell(qtbot, job_tab(editor, "worker").table, 0, PORT, str(port0))
    type_cell(qtbot, job_tab(editor, "worker").table, 1, PORT, str(port1))
    qtbot.waitUntil(lambda: not editor.is_checking, timeout=5000)
    assert editor.is_valid, editor.problems()

    with (
        qtbot.waitSignal(editor.sig_validity_changed, timeout=2000) as validity,
        qtbot.waitSignal(editor.sig_spec_changed, timeout=2000) as changed,
    ):
        type_cell(qtbot, editor.form.jobs["worker"].table, 1, PORT, str(ps_port))  # the ps's port
    assert validity.args == [False] and changed.args == [None]
    with qtbot.waitSignal(editor.sig_validity_changed, timeout=2000) as validity:
        type_cell(qtbot, editor.form.jobs["worker"].table, 1, PORT, str(port1))
    assert validity.args == [True]
    qtbot.waitUntil(lambda: not editor.is_checking, timeout=5000)
    assert editor.is_valid
    assert editor.action_open.shortcut().toString() == "Ctrl+O"
    assert editor.action_save.shortcut().toString() == "Ctrl+S"


def test_set_spec_shows_a_loaded_cluster_and_a_problem_click_goes_to_its_field(qtbot, editor, tmp_path: Path):
    from gui.editor.job import PORT

    spec, _ = load(ROOT / "resources" / "parameter_server_cluster.toml")
    assert spec is not None and spec.source is not None
    with qtbot.waitSignal(editor.sig_path_changed, timeout=1000):
        editor.set_spec(spec, spec.source)
    assert editor.current_spec() == spec and not editor.is_dirty
    form = editor.form
    assert form.strategy_combo.currentData() == "parameter_server"
    assert [form.tabs.tabText(i).split(" ")[0] for i in range(form.tabs.count())] == list(spec.jobs)

    # A duplicate in the chief's tab; the ps tab is in front. Clicking the problem brings it forward.
    form.tabs.setCurrentIndex(0)
    chief = form.jobs["chief"]
    chief.table.item(0, PORT).setText(str(spec.jobs["worker"].tasks[0].port))
    qtbot.waitUntil(lambda: editor.problem_list.count() > 0, timeout=2000)
    errors = [i for i in range(editor.problem_list.count()) if "is used twice" in editor.problem_list.item(i).text()]
    assert len(errors) == 1
    item = editor.problem_list.item(errors[0])
    rect = editor.problem_list.visualItemRect(item)
    qtbot.mouseClick(editor.problem_list.viewport(), QtCore.Qt.MouseButton.LeftButton, pos=rect.center())
    # The later of the two is the one reported: worker task 0 ("also jobs.chief.tasks[0]").
    assert "jobs.worker.tasks[0]: " in item.text() and "(also jobs.chief.tasks[0])" in item.text()
    assert form.tabs.currentWidget() is form.jobs["worker"]
    assert form.jobs["worker"].table.currentRow() == 0


def test_the_editor_alone_renders_the_demo_into_a_png(tmp_path: Path):
    import os
    import subprocess
    import sys

    shot = tmp_path / "editor.png"
    result = subprocess.run(
        [sys.executable, "-m", "gui.editor", "--screenshot", str(shot)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    from PySide6.QtGui import QImage

    image = QImage(str(shot))
    assert image.width() >= 1200 and image.height() >= 800


def test_unknown_keys_are_kept_reported_and_removable(qtbot, editor, tmp_path: Path):
    cluster = tmp_path / "typo.toml"
    cluster.write_text(
        'name = "typo"\nnmae = "x"\ncommand = "python -u train.py"\n'
        '[jobs.ps]\ntasks = ["127.0.0.1:2222"]\n[jobs.worker]\ntasks = ["127.0.0.1:2223"]\ngpu = [0]\n'
    )
    expected = validate_errors(cluster)
    open_and_wait(qtbot, editor, cluster)
    qtbot.waitUntil(lambda: not editor.is_checking and len(editor.problems()) == len(expected), timeout=30_000)
    shown = [editor.problem_list.item(i).text().split("\n")[0] for i in range(editor.problem_list.count())]
    assert [line.replace(str(cluster), "typo.toml") for line in expected] == shown
    assert any("script 'train.py' does not exist" in line for line in shown)  # with the typos, not after
    assert any("unknown key 'gpu'" in line and "jobs.worker.gpu" in line for line in shown)
    # Not silently dropped: saved as it was, so nothing the user wrote is lost behind their back.
    save_and_wait(qtbot, editor)
    assert "nmae" in cluster.read_text() and "gpu = [" in cluster.read_text()

    assert editor.remove_unknown_key("nmae") and editor.remove_unknown_key("jobs.worker.gpu")
    assert not editor.remove_unknown_key("name")  # a known key has its own widget
    assert [p for p in editor.problems() if "unknown key" in p.message] == []
    assert editor.current_spec() is not None and editor.is_dirty


def test_settings_without_a_widget_survive_open_save_and_launch(qtbot, editor, tmp_path: Path):
    """[hosts], ssh_config and stall_after_s have no field in the form: they used to vanish from
    the form's table, so Save dropped them and a launch from the form ran remote roles here."""
    cluster = tmp_path / "remote.toml"
    cluster.write_text(
        'name = "remote"\ncommand = "python -u train.py"\nstall_after_s = 30.0\nssh_config = "ssh.conf"\n'
        '[jobs.ps]\ntasks = ["10.0.0.2:2222"]\n[jobs.worker]\ntasks = ["10.0.0.2:2223"]\n'
        '[hosts."10.0.0.2"]\nssh = "me@gpu-node-1"\npython = "/opt/py/bin/python3"\n'
    )
    loaded, problems = load(cluster)
    assert loaded is not None, problems
    open_and_wait(qtbot, editor, cluster)
    spec = editor.current_spec()
    assert spec == loaded and spec.host_config("10.0.0.2").ssh == "me@gpu-node-1"
    save_and_wait(qtbot, editor)
    reread, _ = load(cluster)
    assert reread == loaded and '[hosts."10.0.0.2"]' in cluster.read_text()
    editor.set_spec(loaded, cluster)
    assert editor.current_spec() == loaded


def test_the_paste_action_opens_the_dialog(qtbot, editor):
    from gui.editor.paste import PasteDialog

    editor.action_paste.trigger()
    qtbot.waitUntil(lambda: any(d.isVisible() for d in editor.findChildren(PasteDialog)), timeout=2000)
    [dialog] = [d for d in editor.findChildren(PasteDialog) if d.isVisible()]
    assert dialog.windowTitle() == "Fill the cluster from a command line or TF_CONFIG"
    dialog.reject()


def test_a_counted_slurm_cluster_survives_open_save_and_launch(qtbot, editor, tmp_path: Path):
    """tasks = N (issue 12) has no rows to show: the form keeps the count, so Save writes it back."""
    cluster = tmp_path / "slurm.toml"
    cluster.write_text(
        'name = "counted"\ncommand = "python -u train.py"\n[jobs.ps]\ntasks = 1\n'
        '[jobs.worker]\ntasks = 3\nenv = { A = "1" }\n[slurm]\npartition = "debug"\n'
    )
    loaded, problems = load(cluster)
    assert loaded is not None, problems
    open_and_wait(qtbot, editor, cluster)
    worker = job_tab(editor, "worker")
    assert worker.table.rowCount() == 0 and "tasks = 3" in worker.table.toolTip()
    assert editor.current_spec() == loaded and editor.current_spec().role_ids()[-1] == "worker:2"
    save_and_wait(qtbot, editor)
    reread, _ = load(cluster)
    assert reread == loaded and "tasks = 3" in cluster.read_text()
