"""Listing 1,000 runs (the runs browser): from each run's cached ``summary.json``, against
rebuilding every summary from the run's journal and metrics (what a listing without the cache does).

Each generated run is a finished 1 ps + 4 worker run: run.json, cluster.toml, a journal of role
states and 500 metrics lines per worker (the same bytes hard-linked into every run, so the disk
holds one copy; both readers read them through the page cache alike). The cached listing is
:func:`core.run.index.list_summaries` after one listing has written the caches; the baseline is the
same call with ``use_cache=False``. Also timed: ``python main.py runs`` end to end (interpreter
start included). Run from the repo root: ``python benchmarks/bench_runs.py``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.cluster.spec import dumps, parse_text
from core.run import index as runs_index
from core.run import journal

RUNS = 1000
WORKERS = 4
STEPS = 500
REPEATS = 3
LIMIT_S = 1.0

CLUSTER = f"""
name = "bench"
command = ["python", "-u", "train.py"]
[jobs.ps]
tasks = ["127.0.0.1:2222"]
[jobs.worker]
tasks = [{", ".join(f'"127.0.0.1:{2223 + i}"' for i in range(WORKERS))}]
"""


def make_template(root: Path) -> Path:
    spec, problems = parse_text(CLUSTER)
    assert spec is not None, problems
    template = root / "template"
    (template / "roles").mkdir(parents=True)
    (template / "cluster.toml").write_text(dumps(spec))
    records = []
    for role in spec.role_ids():
        records.append({"t": 1.0, "kind": "role_state", "role": role, "state": "running", "restarts": 0})
        final = "stopped" if role.startswith("ps") else "succeeded"
        records.append({"t": 99.0, "kind": "role_state", "role": role, "state": final, "returncode": 0})
    (template / journal.EVENTS_FILE).write_text("".join(journal.json_line(r) for r in records))
    for i in range(WORKERS):
        lines = [
            journal.json_line({"t": 1.0 + s * 0.05, "step": s, "loss": 2.0 / (1 + s) + i * 1e-3, "step_time_s": 0.05})
            for s in range(1, STEPS + 1)
        ]
        (template / "roles" / f"worker-{i}").mkdir()
        (template / "roles" / f"worker-{i}" / "metrics.jsonl").write_text("".join(lines))
    return template


def make_runs(root: Path, template: Path) -> None:
    roles = [f"worker:{i}" for i in range(WORKERS)]
    for n in range(RUNS):
        run = root / "runs" / f"run-{n:04d}"
        (run / "roles").mkdir(parents=True)
        for name in ("cluster.toml", journal.EVENTS_FILE):
            os.link(template / name, run / name)
        for i in range(WORKERS):
            (run / "roles" / f"worker-{i}").mkdir()
            os.link(
                template / "roles" / f"worker-{i}" / "metrics.jsonl", run / "roles" / f"worker-{i}" / "metrics.jsonl"
            )
        info = {
            "id": run.name,
            "name": "bench",
            "created": 1.7e9 + n * 100,
            "ended": 1.7e9 + n * 100 + 99,
            "state": "done",
            "result": ("succeeded", "failed", "stopped")[n % 3],
            "roles": ["ps:0", *roles],
        }
        (run / "run.json").write_text(json.dumps(info))


def timed(fn: object, repeats: int = REPEATS) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        result = fn()  # type: ignore[operator]
        times.append(time.perf_counter() - started)
        assert len(result) == RUNS, len(result)
    return statistics.median(times)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="bench-runs-") as tmp:
        root = Path(tmp)
        make_runs(root, make_template(root))
        runs = root / "runs"
        rebuild_s = timed(lambda: runs_index.list_summaries(runs, use_cache=False), repeats=1)
        runs_index.list_summaries(runs)  # writes every summary.json
        cached_s = timed(lambda: runs_index.list_summaries(runs))
        started = time.perf_counter()
        cli = subprocess.run(
            [sys.executable, "main.py", "runs", "--root", str(runs)], capture_output=True, text=True, check=True
        )
        cli_s = time.perf_counter() - started
        assert f"{RUNS} runs in" in cli.stdout
    print(f"{RUNS} runs ({WORKERS} workers x {STEPS} metrics lines each), cached: median of {REPEATS}:")
    print(f"  listing from summary.json:         {cached_s:7.3f} s")
    print(f"  rebuilding every summary (no cache): {rebuild_s:7.3f} s  ({rebuild_s / cached_s:.0f}x)")
    print(f"  `python main.py runs`, end to end:  {cli_s:7.3f} s")
    if cached_s >= LIMIT_S:
        print(f"FAIL: listing {RUNS} runs took {cached_s:.2f} s (limit {LIMIT_S} s)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
