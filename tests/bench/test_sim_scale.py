"""benchmarks/bench_sim_scale.py runs end to end at a tiny size (8 simulated workers on 2 hosts,
a few seconds a stage) and its JSON line carries every figure; scripts/plot_scaling.py draws them;
the baseline tree carries this checkout's simulating agent."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.helpers.procs import assert_nothing_left
from tests.helpers.project import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_sim_scale

pytestmark = pytest.mark.slow

VIEW_FIGURES = {
    "frames",
    "frame_p50_ms",
    "frame_p95_ms",
    "frame_cpu_p95_ms",
    "longest_gap_ms",
    "longest_gap_cpu_ms",
    "most_gui_cpu_per_turn_ms",
}
CLI_FIGURES = {
    "launch_to_all_running_s",
    "steady_s",
    "controller_percent",
    "controller_main_percent",
    "controller_percent_per_worker",
    "simulator_agents_percent",
    "bytes_per_worker_hour",
    "disk_bytes_per_worker_hour",
}


@pytest.mark.timeout(600)
def test_the_benchmark_runs_at_a_tiny_size_and_says_every_figure(tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    argv = [sys.executable, "benchmarks/bench_sim_scale.py", "--workers", "8", "--hosts", "2", "--no-baseline"]
    argv += ["--steady-s", "3", "--dwell-s", "1.5", "--json-out", str(out)]
    # The benchmark's folders under a short one of this test's: the agents' sockets live in the run
    # directories, and a Unix socket's path has at most 107 bytes.
    scratch = tempfile.mkdtemp(prefix="bsim-")
    try:
        env = {**os.environ, "TMPDIR": scratch}
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=540, env=env)
        assert_nothing_left([], scratch)  # no agent of the benchmark's runs is left
        assert not os.listdir(scratch), os.listdir(scratch)  # its temporary folders are gone
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "SIMULATED" in done.stdout
    (line,) = out.read_text().splitlines()
    result = json.loads(line)
    assert result["simulated"] is True and result["workers"] == 8 and result["hosts"] == 2
    assert result["roles"] >= 8
    assert set(result["cli"]) >= CLI_FIGURES, result["cli"]
    assert set(result["cli"]["bytes_per_worker_hour"]) == {"journal", "metrics", "samples", "scalars", "logs"}
    assert result["cli"]["controller_percent"] > 0
    assert result["cli"]["bytes_per_worker_hour"]["metrics"] > 0  # the simulated steps reached the disk
    views = result["window"]["views"]
    assert set(views) == {"Training", "GPUs", "Placement", "Logs"}, result["window"]
    for tab, figures in views.items():
        assert set(figures) >= VIEW_FIGURES, (tab, figures)
        assert figures["frames"] > 0
    assert result["window"]["launch_to_all_running_s"] > 0

    plots = tmp_path / "plots"
    drawn = subprocess.run(
        [sys.executable, "scripts/plot_scaling.py", str(out), "--out", str(plots)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
    )
    assert drawn.returncode == 0, drawn.stderr
    pngs = sorted(p.name for p in plots.glob("*.png"))
    assert "sim-scale-controller-cpu.png" in pngs and "sim-scale-frame-p95.png" in pngs and len(pngs) == 6
    assert all((plots / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for name in pngs)


def test_the_baseline_tree_runs_this_checkouts_simulating_agent(tmp_path: Path) -> None:
    known = subprocess.run(
        ["git", "cat-file", "-e", f"{bench_sim_scale.BASELINE}^{{commit}}"], cwd=ROOT, capture_output=True, check=False
    )
    if known.returncode != 0:  # a `git archive` export or a shallow clone: no history to unpack
        pytest.skip(f"this checkout has no commit {bench_sim_scale.BASELINE} (not a git clone with its history)")
    base = bench_sim_scale.baseline_tree(tmp_path)
    assert base is not None
    for rel in bench_sim_scale.SIM_FILES:
        ours = ROOT / rel
        if ours.is_dir():
            names = sorted(p.name for p in ours.glob("*.py"))
            assert names and names == sorted(p.name for p in (base / rel).glob("*.py"))
            assert all((base / rel / n).read_bytes() == (ours / n).read_bytes() for n in names)
        else:
            assert (base / rel).read_bytes() == ours.read_bytes()


def test_plot_scaling_says_what_is_wrong_in_one_line(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("not a result\n")
    for files in ([str(tmp_path / "missing.jsonl")], [str(empty)]):
        done = subprocess.run(
            [sys.executable, "scripts/plot_scaling.py", *files, "--out", str(tmp_path)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "Traceback" not in done.stderr
