"""``validate`` reports every problem of a cluster file in one pass: the file's own (typos, bad
values) and this machine's (a missing script, a busy port) together, so a user fixes them in one
round instead of finding the script only after the typos."""

from __future__ import annotations

from pathlib import Path

from core.cluster.problems import ERROR
from core.cluster.spec import load
from core.preflight.checks import check_local
from tests.helpers.project import run_cli
from tests.helpers.typos import EXPECTED, write_typos


def test_validate_reports_the_typos_and_the_missing_script_at_once(tmp_path: Path):
    path = write_typos(tmp_path)
    result = run_cli("validate", str(path))
    assert result.returncode == 2
    err = result.stderr
    assert "Traceback" not in err
    for field, words in EXPECTED.items():
        line = next((ln for ln in err.splitlines() if f"error: {field}: " in ln), None)
        assert line is not None, f"no problem named {field}:\n{err}"
        assert words in line, line
    assert f"{path}: {len(EXPECTED)} errors" in err


def test_a_partial_spec_is_for_checks_and_leaves_out_the_tasks_with_errors(tmp_path: Path):
    path = write_typos(tmp_path)
    assert load(path)[0] is None  # never launchable while there are errors
    spec, problems = load(path, partial=True)
    assert spec is not None and any(p.severity == ERROR for p in problems)
    # worker:1's port is the error: it is not checked again in other words
    assert [t.role_id for t in spec.tasks()] == ["ps:0", "worker:0"]
    local = check_local(spec, path.read_text(), partial=True)
    assert [(p.field, p.severity) for p in local] == [("command", ERROR)]
    assert "trian.py" in local[0].message


def test_a_file_without_a_command_checks_the_rest_without_a_crash(tmp_path: Path):
    path = tmp_path / "nocommand.toml"
    path.write_text(
        'workdir = "missing-dir"\nstop_grace_s = -1\n[jobs.ps]\ntasks = ["127.0.0.1:1"]\n'
        '[jobs.worker]\ntasks = ["127.0.0.1:2"]\n'
    )
    result = run_cli("validate", "--no-ports", str(path))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "no training command" in result.stderr
    assert "stop_grace_s: must be at least 0.0" in result.stderr
    assert "missing-dir is not a directory" in result.stderr  # found with the rest, not after
