"""`make bench`'s runner: a benchmark that fails is named with why, and the others still run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import run_all


def test_a_failing_benchmark_is_named_with_why_and_the_others_still_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    failing = tmp_path / "bench_a_crash.py"
    failing.write_text("print('measuring')\nraise SystemExit('bench_a_crash: psutil.NoSuchProcess in groups()')\n")
    passing = tmp_path / "bench_b_fine.py"
    passing.write_text("print('figure: 42 lines/s')\n")
    assert run_all.run_all([failing, passing]) == 1
    out = capsys.readouterr().out
    assert "figure: 42 lines/s" in out  # the one after the failure still ran
    assert "FAILED bench_a_crash.py" in out and "exit status 1: bench_a_crash: psutil.NoSuchProcess" in out
    assert "ok     bench_b_fine.py" in out
    assert "1 of 2 benchmarks failed: bench_a_crash.py" in out


def test_a_benchmark_past_its_time_is_stopped_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    hung = tmp_path / "bench_hung.py"
    hung.write_text("import time\ntime.sleep(60)\n")
    monkeypatch.setattr(run_all, "TIMEOUT_S", 1.0)
    assert run_all.run_all([hung]) == 1
    assert "FAILED bench_hung.py" in capsys.readouterr().out


def test_all_passing_exits_zero(tmp_path: Path) -> None:
    script = tmp_path / "bench_ok.py"
    script.write_text("pass\n")
    assert run_all.run_all([script]) == 0
