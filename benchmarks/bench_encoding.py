"""Bytes per worker-hour and CPU per record of a run's derived telemetry files: the compact encoding
(core/run/compact.py) against the plain JSON lines of the baseline commit, in the same run.

One synthetic but realistic stream, the same for both: ``--workers`` workers (64) printing 10 step
lines a second (step, a loss with 4 decimals, nothing else: what the light trainer and most
``print`` loops give), and ``--hosts`` hosts (8) of 8 GPUs each sampled at 1 Hz, with figures that
move as real ones do (utilisation, power, temperature and role CPU every second; memory and RSS now
and then; names, uuids, bus ids and limits never), for ``--minutes`` simulated minutes (60).
Each side writes it through its own ``RunDir`` (``append_metrics`` a second of lines at a time,
``append_sample`` once a second a host), in a child process that imports that side's tree, then
reads every file back through its own ``journal.iter_jsonl``. Figures: bytes per worker-hour (metrics,
samples, and both), and CPU per record written and read.

    python benchmarks/bench_encoding.py [--workers 64] [--hosts 8] [--minutes 60] [--baseline d294eee]

The goal: all derived files at most 1 MB per worker-hour at 10 lines a second per worker,
8 workers and 8 GPUs a host, 1 Hz samples. The journal (events.jsonl) holds state only and is not
re-encoded: a steady run journals a few kilobytes an hour. The roles' own logs are the users' output,
kept verbatim, and not counted here.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BASELINE = "d294eee"  # the plain format, before the compact encoding
GOAL_BYTES_PER_WORKER_HOUR = 1_000_000
GIB = 1 << 30


def metric_records(worker: int, second: int, rng: random.Random) -> list[dict[str, Any]]:
    """A second of one worker's parsed step lines, as ``sample_dict`` makes them."""
    t0 = 1_795_000_000.0 + second
    out = []
    for k in range(10):
        step = second * 10 + k + 1
        loss = 2.3 * math.exp(-step / 20_000) + 0.05 + rng.gauss(0, 0.01)
        out.append(
            {
                "t": round(t0 + k * 0.1 + rng.uniform(0, 0.004), 3),
                "step": step,
                "loss": round(loss, 4),
                "step_time_s": None,
                "steps_per_sec": None,
                "extra": {},
                "source": "classic",
            }
        )
    return out


def host_sample(host: int, second: int, workers_per_host: int, rng: random.Random) -> dict[str, Any]:
    """One host's sample, as the controller's intake writes it (``t``, ``host``, ``figures``,
    ``roles``, ``gpus`` with their processes)."""
    name = f"127.0.0.{host + 1}"
    roles = {}
    gpus = []
    for i in range(8):
        role = f"worker:{host * workers_per_host + i}" if i < workers_per_host else None
        pid = 10_000 + host * 100 + i
        if role is not None:
            roles[role] = {
                "alive": True,
                "pid": pid,
                "attempt": 1,
                "pids": 1,
                "cpu_percent": round(rng.uniform(90, 110), 1),
                "rss_bytes": 2 * GIB + (second // 30) * 4096 * (i + 1),
                "threads": 42,
            }
        gpus.append(
            {
                "index": i,
                "name": "NVIDIA H100 80GB HBM3",
                "uuid": f"GPU-{host:08x}-{i:04x}-4000-8000-{host * 8 + i:012x}",
                "pci_bus_id": f"00000000:{0x1A + i:02X}:00.0",
                "memory_total_bytes": 85_899_345_920,
                "power_limit_w": 700.0,
                "utilization_gpu_percent": max(0, min(100, round(85 + rng.gauss(0, 8)))),
                "utilization_memory_percent": max(0, min(100, round(40 + rng.gauss(0, 5)))),
                "memory_used_bytes": 60 * GIB + (second // 60 % 4) * 256 * (1 << 20),
                "temperature_c": 65 + (second // 20 + i) % 4,
                "power_w": round(rng.uniform(450, 650), 2),
                "sm_clock_mhz": 1980,
                "processes": [] if role is None else [{"pid": pid, "used_memory_bytes": 60 * GIB, "role": role}],
            }
        )
    figures = {
        "load1": rng.uniform(6, 10),
        "load5": rng.uniform(6, 10),
        "load15": rng.uniform(6, 10),
        "cpu_count": 64,
        "cpu_percent": round(rng.uniform(10, 20), 1),
        "memory_used_bytes": 200 * GIB + rng.randrange(0, 1 << 30, 4096),
        "memory_total_bytes": 512 * GIB,
    }
    return {
        "t": round(1_795_000_000.0 + second + 0.5, 3),
        "host": name,
        "figures": figures,
        "roles": roles,
        "gpus": gpus,
    }


CLUSTER = """name = "bench-encoding"
strategy = "custom"
command = ["python", "-u", "train.py"]
[jobs.worker]
tasks = [{tasks}]
"""


def child(tree: Path, out: Path, workers: int, hosts: int, minutes: int) -> dict[str, Any]:
    """Write the stream through ``tree``'s RunDir into ``out`` and read it back; the figures."""
    sys.path.insert(0, str(tree))
    from core.cluster.spec import parse_text
    from core.run import journal
    from core.run.rundir import RunDir

    spec, problems = parse_text(CLUSTER.format(tasks=", ".join(f'"127.0.0.1:{3000 + w}"' for w in range(workers))))
    assert spec is not None, problems
    run = RunDir.create(spec, path=out)
    tasks = list(spec.tasks())
    per_host = max(1, workers // hosts)
    seconds = minutes * 60
    # The stream is generated ahead, per second, so only the writer is timed.
    metrics_cpu = samples_cpu = 0.0
    metrics_n = samples_n = 0
    for second in range(seconds):
        rng = random.Random(second)
        batch = [metric_records(w, second, rng) for w in range(workers)]
        samples = [host_sample(h, second, per_host, rng) for h in range(hosts)]
        started = time.process_time()
        for task, records in zip(tasks, batch, strict=True):
            run.append_metrics(task, records)
        metrics_cpu += time.process_time() - started
        started = time.process_time()
        for h, sample in enumerate(samples):
            run.append_sample(f"127.0.0.{h + 1}", sample)
        samples_cpu += time.process_time() - started
        metrics_n += sum(len(b) for b in batch)
        samples_n += len(samples)
    assert run.write_error is None, run.write_error
    metric_files = sorted(out.glob("roles/*/metrics.jsonl"))
    sample_files = sorted(out.glob("telemetry/samples-*.jsonl"))
    started = time.process_time()
    read_metrics = sum(1 for p in metric_files for _ in journal.iter_jsonl(p))
    metrics_read_cpu = time.process_time() - started
    started = time.process_time()
    read_samples = sum(1 for p in sample_files for _ in journal.iter_jsonl(p))
    samples_read_cpu = time.process_time() - started
    assert (read_metrics, read_samples) == (metrics_n, samples_n), (read_metrics, metrics_n, read_samples, samples_n)
    worker_hours = workers * minutes / 60
    metrics_bytes = sum(p.stat().st_size for p in metric_files)
    samples_bytes = sum(p.stat().st_size for p in sample_files)
    return {
        "metrics_bytes_per_worker_hour": round(metrics_bytes / worker_hours),
        "samples_bytes_per_worker_hour": round(samples_bytes / worker_hours),
        "bytes_per_worker_hour": round((metrics_bytes + samples_bytes) / worker_hours),
        "metrics_write_us": round(metrics_cpu / metrics_n * 1e6, 2),
        "metrics_read_us": round(metrics_read_cpu / metrics_n * 1e6, 2),
        "sample_write_us": round(samples_cpu / samples_n * 1e6, 1),
        "sample_read_us": round(samples_read_cpu / samples_n * 1e6, 1),
    }


def measure(tree: Path, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-encoding-") as tmp:
        command = [sys.executable, __file__, "--child", str(tree), str(Path(tmp) / "run")]
        command += ["--workers", str(args.workers), "--hosts", str(args.hosts), "--minutes", str(args.minutes)]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the {tree.name} side failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=64)
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--minutes", type=int, default=60)
    parser.add_argument("--baseline", default=BASELINE)
    parser.add_argument("--child", nargs=2, metavar=("TREE", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(Path(args.child[0]), Path(args.child[1]), args.workers, args.hosts, args.minutes)))
        return 0
    sys.path.insert(0, str(HERE))
    from baseline import unpack

    rows: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-encoding-base-") as tmp:
        old_tree = unpack(args.baseline, Path(tmp))
        if old_tree is not None:
            rows[f"baseline {args.baseline} (plain)"] = measure(old_tree, args)
    rows["compact"] = measure(ROOT, args)
    print(f"{args.workers} workers x 10 lines/s, {args.hosts} hosts x 8 GPUs at 1 Hz, {args.minutes} simulated minutes")
    header = f"{'format':<28}{'metrics B/wh':>14}{'samples B/wh':>14}{'total B/wh':>12}"
    header += f"{'metric w/r us':>15}{'sample w/r us':>15}"
    print(header)
    for name, r in rows.items():
        print(
            f"{name:<28}{r['metrics_bytes_per_worker_hour']:>14,}{r['samples_bytes_per_worker_hour']:>14,}"
            f"{r['bytes_per_worker_hour']:>12,}{r['metrics_write_us']:>8.1f}/{r['metrics_read_us']:<6.1f}"
            f"{r['sample_write_us']:>8.0f}/{r['sample_read_us']:<6.0f}"
        )
    new = rows["compact"]
    ok = new["bytes_per_worker_hour"] <= GOAL_BYTES_PER_WORKER_HOUR
    print(f"goal: at most {GOAL_BYTES_PER_WORKER_HOUR:,} bytes per worker-hour: {'met' if ok else 'MISSED'}")
    print(
        json.dumps(
            {
                "bench": "encoding",
                "workers": args.workers,
                "hosts": args.hosts,
                "minutes": args.minutes,
                **{k.split(" ")[0]: v for k, v in rows.items()},
            }
        )
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
