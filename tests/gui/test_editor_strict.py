"""The editor as strict as ``validate``: every problem of a file at once, at its field; no value
changed behind the user's back; Launch off while errors are listed; a command shown as written;
``python main.py FILE`` opening a file with problems in the form."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6 import QtCore

from core.cluster.problems import ERROR, WARNING
from tests.helpers.ports import free_ports
from tests.helpers.project import ROOT, run_cli
from tests.helpers.typos import EXPECTED, write_typos
from tests.helpers.widgets import type_into

pytestmark = [
    pytest.mark.qt_log_level_fail("WARNING"),
    pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints"),
]


@pytest.fixture
def editor(qtbot, tmp_path: Path):
    from gui.editor import ClusterEditor

    settings = QtCore.QSettings(str(tmp_path / "settings.ini"), QtCore.QSettings.Format.IniFormat)
    ed = ClusterEditor(settings=settings)
    qtbot.addWidget(ed)
    ed.resize(1300, 850)
    ed.show()
    return ed


def fields(editor, severity: str = ERROR) -> set[str]:
    return {p.field for p in editor.problems() if p.severity == severity}


def light_file(tmp_path: Path, *, top: str = "", worker: str = "") -> Path:
    """A valid 1 ps + 1 worker light-trainer cluster, with extra lines at its top and its worker."""
    ps, w0 = free_ports(2)
    path = tmp_path / "light.toml"
    path.write_text(
        f'name = "light"\nworkdir = "{ROOT / "resources" / "trainers"}"\n'
        f'command = ["{{python}}", "-u", "light_trainer.py", "--steps=10"]\n{top}\n'
        f'[jobs.ps]\ntasks = ["127.0.0.1:{ps}"]\n[jobs.worker]\ntasks = ["127.0.0.1:{w0}"]\n{worker}\n'
    )
    return path


@pytest.mark.timeout(60)
def test_a_file_with_six_mistakes_shows_all_six_at_once_with_the_missing_script(qtbot, editor, tmp_path: Path):
    editor.open_file(write_typos(tmp_path))
    qtbot.waitUntil(lambda: fields(editor) == set(EXPECTED), timeout=30_000)
    for problem in editor.problems():
        assert EXPECTED[problem.field] in problem.message
    form = editor.form
    for widget in (form.style_combo, form.grace_spin, form.command_edit):
        assert widget.property("problem"), widget  # tinted, the problem in its tooltip
    assert "script 'trian.py' does not exist" in form.command_edit.toolTip()
    assert editor.current_spec() is None and not editor.is_valid


@pytest.mark.timeout(60)
def test_a_value_the_form_cannot_show_stays_an_error_and_is_never_coerced(qtbot, editor, tmp_path: Path):
    path = light_file(
        tmp_path,
        top='stop_grace_s = "five"\nstart_s = 0.25',
        worker='restart = { policy = "OnFailure", max_restarts = "three", backoff_s = -1 }',
    )
    editor.open_file(path)
    qtbot.waitUntil(lambda: editor.path == path.resolve(), timeout=10_000)
    form, worker = editor.form, editor.form.jobs["worker"]
    data = form.data()[0]
    # As the file says, not 5.0 / 0.2 / 3 / 0.0
    assert data["stop_grace_s"] == "five" and data["start_s"] == 0.25
    assert data["jobs"]["worker"]["restart"]["max_restarts"] == "three"
    assert data["jobs"]["worker"]["restart"]["backoff_s"] == -1
    assert form.grace_spin.text() == '"five"' and form.start_spin.text() == "0.25"
    assert worker.max_restarts_spin.text() == '"three"' and worker.backoff_spin.text() == "-1"
    assert fields(editor) == {
        "stop_grace_s",
        "jobs.worker.restart.max_restarts",
        "jobs.worker.restart.backoff_s",
    }
    assert "must be a number, not a string" in form.grace_spin.toolTip()
    assert editor.current_spec() is None

    # The user's own numbers replace them, and the errors go.
    form.grace_spin.lineEdit().selectAll()
    qtbot.keyClicks(form.grace_spin, "2.5")
    worker.max_restarts_spin.lineEdit().selectAll()
    qtbot.keyClicks(worker.max_restarts_spin, "4")
    worker.backoff_spin.stepUp()
    qtbot.waitUntil(lambda: not fields(editor), timeout=10_000)
    spec = editor.current_spec()
    assert spec is not None and spec.stop_grace_s == 2.5 and spec.start_s == 0.25
    assert spec.jobs["worker"].restart.max_restarts == 4


@pytest.mark.timeout(60)
def test_the_command_field_shows_placeholders_without_quotes(qtbot, editor, tmp_path: Path):
    editor.open_file(light_file(tmp_path))
    qtbot.waitUntil(lambda: editor.path is not None, timeout=10_000)
    assert editor.form.command_edit.text() == "{python} -u light_trainer.py --steps=10"
    type_into(qtbot, editor.form.command_edit, "{python} -u light_trainer.py --note='two words' --i={task_index}")
    data = editor.form.data()[0]
    assert data["command"] == ["{python}", "-u", "light_trainer.py", "--note=two words", "--i={task_index}"]


@pytest.mark.timeout(120)
def test_launch_is_off_while_errors_are_listed_and_on_with_warnings_only(qtbot, tmp_path: Path):
    from gui.window.main_window import MainWindow

    window = MainWindow(None, runs_root=tmp_path / "runs", cluster_path=write_typos(tmp_path))
    qtbot.addWidget(window)
    window.show()
    qtbot.waitUntil(lambda: fields(window.editor) == set(EXPECTED), timeout=30_000)
    assert not window.controls.launch.isEnabled()
    assert window.pages.currentWidget() is window.editor

    # Only this machine's check fails (the script): still an error, still off.
    missing = light_file(tmp_path).read_text().replace("light_trainer.py", "nowhere.py")
    (tmp_path / "missing.toml").write_text(missing)
    window.editor.open_file(tmp_path / "missing.toml")
    qtbot.waitUntil(lambda: fields(window.editor) == {"command"}, timeout=30_000)
    assert not window.controls.launch.isEnabled()

    # A warning only (MultiWorkerMirrored needs no ps): Launch is on.
    warned = light_file(tmp_path, top='strategy = "multi_worker_mirrored"\nlaunch_style = "tf_config"')
    window.editor.open_file(warned)
    qtbot.waitUntil(lambda: window.editor.path == warned.resolve() and not window.editor.is_checking, timeout=30_000)
    qtbot.waitUntil(lambda: fields(window.editor, WARNING) == {"jobs.ps"}, timeout=10_000)
    assert not fields(window.editor)
    qtbot.waitUntil(window.controls.launch.isEnabled, timeout=10_000)

    # An error typed into the form turns it off again at once.
    type_into(qtbot, window.editor.form.command_edit, "")
    qtbot.waitUntil(lambda: not window.controls.launch.isEnabled(), timeout=10_000)
    assert "command" in fields(window.editor)


@pytest.mark.timeout(180)
def test_main_py_opens_a_file_with_problems_in_the_form_and_validate_still_exits_2(tmp_path: Path):
    typos = write_typos(tmp_path)
    assert run_cli("validate", str(typos)).returncode == 2
    png = tmp_path / "typos.png"
    env = {"QT_QPA_PLATFORM": "offscreen"}
    result = subprocess.run(
        [sys.executable, str(ROOT / "main.py"), str(typos), "--screenshot", str(png), "--after", "2"],
        capture_output=True,
        text=True,
        timeout=150,
        env={**os.environ, **env},
    )
    assert result.returncode == 0, result.stderr
    assert png.is_file() and png.stat().st_size > 0
    assert "Traceback" not in result.stderr
    for field in EXPECTED:  # the terminal says what the form shows
        assert f"error: {field}: " in result.stderr
    # No TOML at all: no form to show, one line says why, and the window does not open.
    broken = tmp_path / "broken.toml"
    broken.write_text("name = \n")
    result = subprocess.run(
        [sys.executable, str(ROOT / "main.py"), str(broken)],
        capture_output=True,
        text=True,
        timeout=150,
        env={**os.environ, **env},
    )
    assert result.returncode == 2 and "not valid TOML" in result.stderr and "Traceback" not in result.stderr
