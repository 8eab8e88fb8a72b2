"""The runs browser and compare in the CLI (issue 23), on real launches of the light trainer."""

from __future__ import annotations

import csv
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pytest

from core.run import index as runs_index
from core.run.compare import load_for_compare, read_curves
from core.views import runs_select
from tests.helpers.cli_launch import launching, role_pids
from tests.helpers.clusters import FLAG_NOTE, cluster_file, one_flag_apart
from tests.helpers.project import run_cli
from tests.helpers.run_copies import make_runs
from tests.helpers.waits import wait_for


def listed(*args: str) -> list[dict[str, Any]]:
    result = run_cli("runs", "--json", *args)
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def runs_root() -> Path:
    return Path(os.environ["TOWERDECK_DATA_DIR"]) / "runs"


def test_real_runs_listed_and_compared(tmp_path: Path) -> None:
    two = run_cli("launch", str(cluster_file(tmp_path, "two", 2)), "--progress-every", "0")
    assert two.returncode == 0, two.stderr
    three = run_cli("launch", str(cluster_file(tmp_path, "three", 3, steps=40, env='[env]\nSEED = "7"')))
    assert three.returncode == 0, three.stderr
    bad = 'command = ["python", "-c", "import sys; print(\'Step: 1,  Cost: 2.5\', flush=True); sys.exit(3)"]'
    failed = run_cli("launch", str(cluster_file(tmp_path, "broken", 1, worker_command=bad)))
    assert failed.returncode == 1
    # The session cached each summary as its run ended: listing reads nothing else.
    assert len(list(runs_root().glob("*/summary.json"))) == 3

    runs = {r["name"]: r for r in listed()}
    assert runs["two"]["outcome"] == "succeeded" and runs["three"]["outcome"] == "succeeded"
    assert runs["broken"]["outcome"] == "failed" and runs["broken"]["outcome_detail"] == "worker:0 exit 3"
    assert runs["two"]["roles"] == ["ps:0", "worker:0", "worker:1"] and len(runs["three"]["roles"]) == 4
    assert runs["two"]["backend"] == "local" and runs["two"]["cluster_file"].endswith("two.toml")
    for name, steps in (("two", 30), ("three", 40)):
        figures = runs[name]["role_figures"]
        assert figures["worker:0"]["steps"] == steps and figures["worker:0"]["exit"] == "0"
        assert 5 < runs[name]["rates"]["global_steps_per_s"] < 200  # asked for 40 a second
        assert runs[name]["best_loss"] <= runs[name]["last_loss"] < 2.1
    assert runs["broken"]["last_loss"] == 2.5 and runs["broken"]["duration_s"] > 0

    assert [r["name"] for r in listed("--outcome", "failed")] == ["broken"]
    assert {r["name"] for r in listed("--filter", "worker succeeded")} == {"two", "three"}
    assert [r["name"] for r in listed("--sort", "roles")] == ["broken", "two", "three"]
    table = run_cli("runs")
    assert "failed (worker:0 exit 3)" in table.stdout and "3 runs in" in table.stdout

    out_csv = tmp_path / "compare.csv"
    result = run_cli("runs", "compare", runs["two"]["id"], runs["three"]["id"], "--csv", str(out_csv))
    assert result.returncode == 0, result.stderr
    lines = {line[2:].split("  ")[0].strip(): line for line in result.stdout.splitlines() if line[:1] in "* "}
    assert lines["cluster shape"].startswith("*") and "1 ps, 3 worker" in lines["cluster shape"]
    assert lines["launch style"].startswith(" ") and lines["[env] SEED"].startswith("*") and "7" in lines["[env] SEED"]
    assert lines["worker:2 host"].startswith("*") and lines["worker:0 exit"].startswith(" ")
    with open(out_csv, newline="") as f:
        table_rows = {row[0]: row for row in csv.reader(f)}
    assert table_rows["field"][2:] == [runs["two"]["id"], runs["three"]["id"]]
    assert table_rows["cluster shape"][1:] == ["yes", "1 ps, 2 worker", "1 ps, 3 worker"]
    assert table_rows["strategy"][1] == "no" and table_rows["worker:2 exit"][2:] == ["-", "succeeded 0"]

    curves = read_curves(Path(runs["three"]["path"]), runs["three"]["roles"])
    assert sorted(curves) == ["worker:0", "worker:1", "worker:2"]
    assert curves["worker:0"].step[-1] == 40 and (curves["worker:0"].step_time_s[1:] > 0).any()


def test_two_runs_one_flag_apart_differ_in_that_flag_only(tmp_path: Path) -> None:
    """The flags and env values of a run's command are columns of `runs` (and --json) and rows of
    `runs compare` (text and CSV); of what the runs were given, only the changed flag differs, and
    which run is which (id, name, start, duration) is not a difference."""
    from core.views.compare_table import CONFIG, compare_rows

    one_flag_apart(tmp_path)
    runs = {r["hyperparams"]["--learning_rate"]: r for r in listed()}
    assert sorted(runs) == ["0.1", "0.3"]
    assert runs["0.3"]["hyperparams"] == {
        "--steps": "30",
        "--rate_hz": "40",
        "--learning_rate": "0.3",
        "[env] NOTE": FLAG_NOTE,
    }
    assert [r["id"] for r in listed("--filter", "learning_rate=0.3")] == [runs["0.3"]["id"]]

    table = run_cli("runs").stdout.splitlines()
    start = table[0].index("--learning_rate")
    for rate, run in runs.items():
        line = next(line for line in table if line.startswith(run["id"]))
        assert line[start:].split()[0] == rate, table
    assert "[env] NOTE" in table[0] and "…" in table[1]  # the long note cut in its middle

    a, b = runs["0.1"]["id"], runs["0.3"]["id"]
    rows = compare_rows(load_for_compare([Path(runs["0.1"]["path"]), Path(runs["0.3"]["path"])]))
    assert [r.label for r in rows if r.differs and r.kind == CONFIG] == ["--learning_rate"]
    assert not [r.label for r in rows if r.differs and r.label in ("run", "name", "started", "duration")]
    out_csv = tmp_path / "compare.csv"
    result = run_cli("runs", "compare", a, b, "--csv", str(out_csv))
    assert result.returncode == 0, result.stderr
    lines = {line[2:].split("  ")[0].strip(): line for line in result.stdout.splitlines() if line[:1] in "* "}
    assert lines["--learning_rate"].split() == ["*", "--learning_rate", "0.1", "0.3"]
    assert all(lines[label].startswith(" ") for label in ("run", "name", "started", "duration", "program"))
    with open(out_csv, newline="") as f:
        cells = {row[0]: row for row in csv.reader(f)}
    # A leading "-" is a formula to a spreadsheet: the flag's label is quoted as a text cell.
    assert cells["'--learning_rate"] == ["'--learning_rate", "yes", "0.1", "0.3"]
    assert cells["[env] NOTE"][2:] == ["'" + FLAG_NOTE] * 2  # never a formula in a spreadsheet
    assert cells["started"][1] == "no" and cells["program"][2] == "python -u light_trainer.py"


def test_bad_compare_and_list_input_is_one_line(tmp_path: Path) -> None:
    result = run_cli("runs", "compare", "latest")
    assert result.returncode == 2 and "2 to 8 runs" in result.stderr and "Traceback" not in result.stderr
    result = run_cli("runs", "compare", "nope-a", "nope-b")
    assert result.returncode == 2 and "no run 'nope-a'" in result.stderr
    result = run_cli("runs", "whatever")
    assert result.returncode == 2 and "invalid choice: 'whatever'" in result.stderr and "Traceback" not in result.stderr
    result = run_cli("runs", "--outcome", "exploded")
    assert result.returncode == 2 and "invalid choice" in result.stderr


def test_live_run_is_running_then_stopped_and_never_deleted(tmp_path: Path) -> None:
    with launching(cluster_file(tmp_path, "forever", 1, steps=0)) as launcher:
        wait_for(lambda: [r["outcome"] for r in listed()] == ["running"], what="the run listed as running")
        run = runs_index.summarize(next(runs_root().iterdir()))
        assert run is not None and run.live and run.outcome_detail == f"pid {launcher.pid}"
        with pytest.raises(runs_index.RunBusyError, match="still running"):
            runs_index.delete_run(run.path)
        with pytest.raises(runs_index.RunBusyError):
            runs_index.archive_run(run.path)
        assert not (run.path / "summary.json").exists()  # a live run is never cached
        assert run_cli("ctl", "latest", "stop-all").returncode == 0
        launcher.wait(60)  # exit 1: the training did not succeed
    assert [r["outcome"] for r in listed()] == ["stopped"]
    assert (run.path / "summary.json").is_file()
    target = runs_index.archive_run(run.path)
    assert target.parent.name == "archived" and listed() == []
    runs_index.delete_run(target)
    assert not target.exists()


def test_launcher_killed_leaves_a_left_run(tmp_path: Path) -> None:
    with launching(cluster_file(tmp_path, "orphaned", 1, steps=0), "--on-disconnect", "stop") as launcher:
        wait_for(lambda: [r["outcome"] for r in listed()] == ["running"], what="the run listed as running")
        run_dir = next(runs_root().iterdir())
        wait_for(lambda: len(role_pids(run_dir)) == 2, what="both roles started")
        pids = role_pids(run_dir)
        launcher.send_signal(signal.SIGKILL)
        launcher.wait()
    # --on-disconnect stop: each host's agent stops the roles once its launcher is gone.
    wait_for(lambda: not any(psutil.pid_exists(p) for p in pids), what="the roles stopped by their agent")
    left = listed()
    assert [r["outcome"] for r in left] == ["left"] and left[0]["outcome_detail"] == "launcher gone"
    assert not (run_dir / "summary.json").exists()  # not over: never cached
    runs_index.delete_run(run_dir)  # nobody holds it: it may go


# ---------------------------------------------------------------------------- 1,000 runs


def test_a_thousand_runs_list_from_their_cache(tmp_path: Path) -> None:
    template = tmp_path / "template"
    result = run_cli("launch", str(cluster_file(tmp_path, "tmpl", 2)), "--run-dir", str(template))
    assert result.returncode == 0, result.stderr
    root = tmp_path / "many"
    paths = make_runs(template, root, 1000)

    first = runs_index.list_summaries(root)  # rebuilds each summary and caches it
    assert len(first) == 1000 and all((p / "summary.json").is_file() for p in paths)
    assert first[0].id == "run-0999" and first[-1].id == "run-0000"
    loss = first[0].last_loss
    assert loss is not None and first[0].outcome == ("succeeded", "failed", "stopped")[999 % 3]
    # The cache is all a listing reads: with every telemetry file gone the figures stay.
    for path in paths:
        for metrics in path.glob("roles/*/metrics.jsonl"):
            metrics.unlink()
    started = time.perf_counter()
    again = runs_index.list_summaries(root)
    took_s = time.perf_counter() - started
    assert [s.last_loss for s in again] == [s.last_loss for s in first] and again[0].last_loss == loss
    assert took_s < 10  # generous: the figure is in benchmarks/bench_runs.py
    chosen = runs_select.select(again, outcomes=["failed"])
    assert len(chosen) == 333 and all(s.outcome == "failed" for s in chosen)
    # A run.json rewritten after the cache (here: its result) makes the cache stale: rebuilt.
    info = json.loads((paths[0] / "run.json").read_text())
    (paths[0] / "run.json").write_text(json.dumps({**info, "result": "succeeded", "name": "renamed"}))
    rebuilt = runs_index.summarize(paths[0])
    assert rebuilt is not None and rebuilt.name == "renamed" and rebuilt.last_loss is None  # metrics gone


def test_compare_takes_two_to_eight(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="2 to 8"):
        load_for_compare([tmp_path])
    with pytest.raises(ValueError, match=r"no readable run\.json"):
        load_for_compare([tmp_path, tmp_path])


def test_derived_step_times_do_not_spike_on_batches_landing_together() -> None:
    from core.run.compare import _fill_step_times

    # Two lines a batch every 0.1 s (0.05 s a step), and one extra batch landing 1 ms after another.
    batches = np.sort(np.append(np.round(np.arange(0.0, 5.0, 0.1), 3), 3.001))
    t = np.repeat(batches, 2)
    step = np.arange(1.0, len(t) + 1)
    derived = _fill_step_times(step, t, np.full(len(t), np.nan))
    finite = derived[np.isfinite(derived)]
    assert len(finite) > len(t) * 0.7 and finite.min() > 0.04 and finite.max() < 0.06
    given = np.full(len(t), 0.5)
    assert (_fill_step_times(step, t, given) == 0.5).all()  # a printed step time wins
