"""A run's figures as CSV (``export RUN --csv DIR``): re-read and checked against the run's own
files, after a real run and while one is live (a consistent snapshot)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from core.cluster.spec import load
from core.controller.controller import Controller
from core.run import journal
from core.run.csv_export import COLUMNS, _Snapshot, export_csv, read_csv
from core.run.rundir import RunDir
from tests.helpers.clusters import light_cluster
from tests.helpers.project import ROOT, run_cli
from tests.helpers.waits import wait_for

OLD_RUN = ROOT / "tests" / "fixtures" / "run_c23e87e"


def _num(text: str) -> float | None:
    return float(text) if text != "" else None


def _check_metrics_against_jsonl(csv_dir: Path, run_path: Path, exact: bool = True) -> dict[str, int]:
    """Every metrics.csv row equals the role's metrics.jsonl line at the same position; returns
    the rows per role. ``exact``: as many rows as lines (else a prefix: a snapshot of a live run)."""
    rows = read_csv(csv_dir / "metrics.csv")
    by_role: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        by_role.setdefault(row["role"], []).append(row)
    counts = {}
    for role, role_rows in by_role.items():
        job, index = role.split(":")
        lines = list(journal.iter_jsonl(run_path / "roles" / f"{job}-{index}" / "metrics.jsonl"))
        if exact:
            assert len(role_rows) == len(lines), role
        assert len(role_rows) <= len(lines)
        for row, line in zip(role_rows, lines, strict=False):
            assert _num(row["wall_time"]) == line["t"]
            assert int(row["step"]) == line["step"]
            assert _num(row["loss"]) == line["loss"]
            assert _num(row["step_time_s"]) == line["step_time_s"]
            assert _num(row["steps_per_sec"]) == line["steps_per_sec"]
            assert row["source"] == line["source"]
        counts[role] = len(role_rows)
    return counts


def test_cli_export_of_a_real_run_matches_its_files(tmp_path: Path) -> None:
    cluster = light_cluster(tmp_path, workers=2, steps=40, rate=20.0)
    run_dir = tmp_path / "run"
    launched = run_cli("launch", str(cluster), "--run-dir", str(run_dir), "--progress-every", "0")
    assert launched.returncode == 0, launched.stdout + launched.stderr

    out = tmp_path / "figures"
    done = run_cli("export", str(run_dir), "--csv", str(out))
    assert done.returncode == 0, done.stderr
    assert "metrics.csv (80 rows)" in done.stdout

    for name, columns in COLUMNS.items():
        with open(out / name, encoding="utf-8") as f:
            assert f.readline().strip() == ",".join(columns), name
    counts = _check_metrics_against_jsonl(out, run_dir)
    assert counts == {"worker:0": 40, "worker:1": 40}

    states = read_csv(out / "role_states.csv")
    journalled = [r for r in journal.iter_jsonl(run_dir / "events.jsonl") if r["kind"] == "role_state"]
    assert [(float(s["wall_time"]), s["role"], s["state"]) for s in states] == [
        (r["t"], r["role"], r["state"]) for r in journalled
    ]
    assert {s["state"] for s in states if s["role"].startswith("worker")} >= {"starting", "running", "succeeded"}
    assert [s["returncode"] for s in states if s["state"] == "succeeded"] == ["0", "0"]

    samples = [r for p in (run_dir / "telemetry").glob("samples-*.jsonl") for r in journal.iter_jsonl(p)]
    assert len(read_csv(out / "host_samples.csv")) == len(samples) > 0
    role_rows = read_csv(out / "role_samples.csv")
    assert len(role_rows) == sum(len(s["roles"]) for s in samples)
    assert {r["role"] for r in role_rows} <= {"ps:0", "worker:0", "worker:1"}


def test_cli_export_names_a_bad_run_or_missing_dir(tmp_path: Path) -> None:
    missing = run_cli("export", str(tmp_path / "nope"), "--csv", str(tmp_path / "out"))
    assert missing.returncode == 2 and "no run" in missing.stderr and "Traceback" not in missing.stderr
    no_dir = run_cli("export", str(OLD_RUN))
    assert no_dir.returncode == 2 and "--csv" in no_dir.stderr
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    blocked = run_cli("export", str(OLD_RUN), "--csv", str(a_file / "out"))
    assert blocked.returncode == 2 and "--csv: cannot create" in blocked.stderr and "Traceback" not in blocked.stderr
    both = run_cli("export", str(OLD_RUN), "--csv", str(tmp_path / "o"), "--tfjob", "x.toml")
    assert both.returncode == 2 and "not both" in both.stderr


def test_scalars_gpu_samples_and_old_runs(tmp_path: Path) -> None:
    run = tmp_path / "old"
    shutil.copytree(OLD_RUN, run)
    points = [{"tag": "loss", "step": s, "wall_time": 1000.0 + s, "value": 1.0 / s} for s in range(1, 6)]
    (run / "roles" / "worker-1" / "scalars.jsonl").write_text("".join(json.dumps(p) + "\n" for p in points))
    gpu = {
        "index": 0,
        "name": "NVIDIA H100",
        "utilization_gpu_percent": 87,
        "memory_used_bytes": 5 << 30,
        "processes": [{"pid": 1, "role": "worker:1"}, {"pid": 2, "role": "worker:0"}],
    }
    sample = {"t": 2000.5, "host": "h", "figures": {"cpu_percent": 12.5}, "roles": {}, "gpus": [gpu]}
    with open(run / "telemetry" / "samples-h.jsonl", "w") as f:
        f.write(json.dumps(sample) + "\n")
    result = export_csv(run, tmp_path / "out")
    scalars = read_csv(tmp_path / "out" / "scalars.csv")
    assert [(r["role"], r["tag"], int(r["step"]), float(r["value"])) for r in scalars] == [
        ("worker:1", "loss", p["step"], p["value"]) for p in points
    ]
    gpus = read_csv(tmp_path / "out" / "gpu_samples.csv")
    assert len(gpus) == 1
    assert gpus[0]["gpu"] == "0" and gpus[0]["utilization_gpu_percent"] == "87"
    assert gpus[0]["roles"] == "worker:0;worker:1" and gpus[0]["host"] == "h"
    assert result.rows["metrics.csv"] == 80  # the old run's telemetry lines in events.jsonl are not doubled


def test_snapshot_reads_up_to_the_sizes_taken_first(tmp_path: Path) -> None:
    run = tmp_path / "old"
    shutil.copytree(OLD_RUN, run)
    metrics = run / "roles" / "worker-0" / "metrics.jsonl"
    before = len(list(journal.iter_jsonl(metrics)))
    with open(metrics, "a") as f:
        f.write('{"t": 1.0, "step": 999, "lo')  # a line being written when the snapshot is taken
    snap = _Snapshot(run)
    with open(metrics, "a") as f:
        f.write('ss": 0.5}\n{"t": 2.0, "step": 1000, "loss": 0.4}\n')  # written after
    assert [r["step"] for r in snap.records(metrics)][-1] == 40
    assert len(list(snap.records(metrics))) == before


def test_export_during_a_live_run_is_a_consistent_snapshot(tmp_path: Path) -> None:
    spec, problems = load(light_cluster(tmp_path, workers=2, steps=0, rate=100.0))
    assert spec is not None, problems
    run = RunDir.create(spec, root=tmp_path / "runs")
    controller = Controller(spec, run)
    controller.start()
    exports: list[dict[str, int]] = []
    try:
        wait_for(lambda: all(r.step and r.step > 50 for r in controller.status().roles if r.job == "worker"), 90)
        for i in range(5):
            out = tmp_path / f"snap{i}"
            export_csv(run.path, out)
            # Whole rows only, each equal to the file's line at its position, steps with no gap.
            counts = _check_metrics_against_jsonl(out, run.path, exact=False)
            for role in ("worker:0", "worker:1"):
                steps = [int(r["step"]) for r in read_csv(out / "metrics.csv") if r["role"] == role]
                assert steps == list(range(1, len(steps) + 1)), role
            exports.append(counts)
            seen = counts["worker:0"]
            wait_for(lambda seen=seen: (controller.status().roles[1].step or 0) > seen + 20, 60, "more steps")
    finally:
        controller.close()
    # The snapshots grew while the run went on: they were taken live.
    assert exports[-1]["worker:0"] > exports[0]["worker:0"]
    assert not any(p.name.endswith(".tmp") for p in (tmp_path / "snap0").iterdir())
