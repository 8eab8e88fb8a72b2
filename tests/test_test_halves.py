"""`make test`'s runner (scripts/test_halves.py): two real pytest processes side by side on tiny
suites, their logs printed whole at the end, a failure in either failing the whole."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.helpers.project import ROOT


def load_runner() -> ModuleType:
    spec = importlib.util.spec_from_file_location("test_halves_runner", ROOT / "scripts" / "test_halves.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tiny_suite(root: Path, name: str, body: str) -> list[str]:
    (root / name).mkdir(parents=True)
    (root / name / f"test_{name}.py").write_text(body)
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", name]


@pytest.mark.timeout(120)
def test_both_halves_run_their_logs_are_printed_whole_and_a_failure_in_one_fails_the_run(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    runner = load_runner()
    commands = {
        "A": tiny_suite(tmp_path, "left", "def test_left_passes():\n    assert True\n"),
        "B": tiny_suite(tmp_path, "right", "def test_right_fails():\n    assert 1 == 2, 'right half broke'\n"),
    }
    code = runner.run_halves(commands, tmp_path / "logs", cwd=tmp_path, progress_s=0.5)
    out = capfd.readouterr().out
    assert code == 1
    assert "1 passed" in out and "1 failed" in out and "right half broke" in out
    logs = out[out.index("========== test half A") :]  # after the progress lines: each log whole, in order
    assert logs.index("1 passed") < logs.index("========== test half B") < logs.index("1 failed")
    assert "A exit 0, B exit 1" in out
    assert (tmp_path / "logs" / "A.log").read_text().count("1 passed") == 1


@pytest.mark.timeout(120)
def test_passing_halves_exit_0_and_say_how_far_each_is_while_they_run(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    runner = load_runner()
    slow = "import time\n\ndef test_slow():\n    time.sleep(2)\n"  # long enough for a progress line
    commands = {"A": tiny_suite(tmp_path, "a", slow), "B": tiny_suite(tmp_path, "b", "def test_ok():\n    pass\n")}
    assert runner.run_halves(commands, tmp_path / "logs", cwd=tmp_path, progress_s=0.5) == 0
    out = capfd.readouterr().out
    assert "A running" in out and "A exit 0, B exit 0" in out


def test_half_b_directories_exist_and_half_a_ignores_exactly_them() -> None:
    runner = load_runner()
    for directory in runner.HALF_B:
        assert (ROOT / directory).is_dir(), f"{directory} is gone: update HALF_B in scripts/test_halves.py"
    commands = runner.halves(["-x"])
    assert [a for a in commands["A"] if a.startswith("--ignore=")] == [f"--ignore={d}" for d in runner.HALF_B]
    assert commands["A"][-1] == "-x" and commands["B"][-1] == "-x"
    assert "tests" in commands["A"] and all(d in commands["B"] for d in runner.HALF_B)
