"""A finished run directory as TowerDeck writes it, generated: 1 ps + N workers, 1 Hz metrics per
worker for ``seconds``, and ``hosts`` hosts of 8 GPUs sampled at 1 Hz (for the open-a-past-run
benchmark and its test). The files have the format and the sizes of a real run's: a 24 h worker's
metrics.jsonl is ~10 MB; a host's samples with 8 GPUs are ~1 KB each.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from core.run.compact import METRICS_CODEC, SAMPLE_CODEC, Codec

START_T = 1_795_000_000.0
GIB = 1 << 30

CLUSTER = """name = "day-long"
strategy = "between_graph"
launch_style = "flags"
command = ["python", "-u", "train.py"]
workdir = "/nonexistent/trainers"

[jobs.ps]
tasks = ["127.0.0.1:40000"]

[jobs.worker]
tasks = [{workers}]
"""


def _line(record: dict[str, object]) -> str:
    return json.dumps(record, separators=(",", ":")) + "\n"


def metrics_text(seconds: int) -> str:
    """A worker's metrics.jsonl: one sample a second, step = second + 1, loss falling."""
    lines = []
    for s in range(seconds):
        loss = 2.0 * math.exp(-s / (seconds / 5)) + 0.05 * math.sin(s / 50) + 0.1
        lines.append(
            f'{{"t":{START_T + s:.3f},"step":{s + 1},"loss":{loss:.5f},"step_time_s":0.98,'
            f'"steps_per_sec":1.02,"extra":{{}},"source":"classic"}}\n'
        )
    return "".join(lines)


def samples_text(host: str, seconds: int, first_worker: int) -> str:
    """A host's telemetry samples: 8 GPUs, worker ``first_worker + i`` on GPU i."""
    lines = []
    for s in range(seconds):
        t = START_T + s
        gpus = [
            {
                "index": i,
                "name": "NVIDIA H100 80GB HBM3",
                "utilization_gpu_percent": round(50 + 40 * math.sin(s / 600 + i), 1),
                "memory_used_bytes": (20 + i) * GIB,
                "memory_total_bytes": 80 * GIB,
                "temperature_c": 60,
                "power_w": 400.0,
                "processes": [{"pid": 1000 + i, "role": f"worker:{first_worker + i}", "used_memory_bytes": GIB}],
            }
            for i in range(8)
        ]
        figures = {
            "cpu_count": 64,
            "cpu_percent": 35.0,
            "memory_used_bytes": 200 * GIB,
            "memory_total_bytes": 512 * GIB,
        }
        lines.append(_line({"t": t, "host": host, "figures": figures, "roles": {}, "gpus": gpus}))
    return "".join(lines)


def generate_run(
    path: Path, workers: int = 64, seconds: int = 86_400, hosts: int = 8, *, compact: bool = False
) -> Path:
    """Writes the finished run into ``path`` (created); returns it. ``compact``: the telemetry in the
    key-frame-and-delta encoding today's runs are written in (core/run/compact.py), else as plain
    JSON lines (the format of runs written before it, which is read too)."""
    roles_dir = path / "roles"
    (path / "telemetry").mkdir(parents=True)
    listed = ", ".join(f'"127.0.0.1:{40001 + w}"' for w in range(workers))
    (path / "cluster.toml").write_text(CLUSTER.format(workers=listed), encoding="utf-8")
    roles = ["ps:0"] + [f"worker:{w}" for w in range(workers)]
    end_t = START_T + seconds
    info = {"id": path.name, "name": "day-long", "created": START_T, "roles": roles, "state": "done"}
    info |= {"result": "succeeded", "ended": end_t, "pid": 1, "reason": "training finished: worker succeeded"}
    (path / "run.json").write_text(json.dumps(info, indent=2), encoding="utf-8")
    events = [
        _line({"t": START_T, "kind": "cluster_state", "role": None, "phase": "running", "result": None, "reason": ""})
    ]
    for role in roles:
        for old, new, t in (("pending", "starting", START_T), ("starting", "running", START_T + 1)):
            events.append(_line({"t": t, "kind": "role_state", "role": role, "old": old, "state": new, "attempt": 1}))
    for role in roles:
        final = "stopped" if role == "ps:0" else "succeeded"
        events.append(
            _line(
                {
                    "t": end_t,
                    "kind": "role_state",
                    "role": role,
                    "old": "running",
                    "state": final,
                    "attempt": 1,
                    "returncode": 0,
                }
            )
        )
    events.append(
        _line(
            {
                "t": end_t,
                "kind": "cluster_state",
                "role": None,
                "phase": "done",
                "result": "succeeded",
                "reason": "training finished",
            }
        )
    )
    (path / "events.jsonl").write_text("".join(events), encoding="utf-8")
    metrics = _encoded(metrics_text(seconds), METRICS_CODEC) if compact else metrics_text(seconds).encode()
    for role in roles:
        directory = roles_dir / role.replace(":", "-")
        directory.mkdir(parents=True)
        (directory / "attempt-1.log").write_text(f"{role} started\n{role} finished\n", encoding="utf-8")
        if role != "ps:0":
            (directory / "metrics.jsonl").write_bytes(metrics)
    for h in range(hosts):
        host = f"gpu-{h}"
        text = samples_text(host, seconds, 8 * h)
        (path / "telemetry" / f"samples-{host}.jsonl").write_bytes(
            _encoded(text, SAMPLE_CODEC) if compact else text.encode()
        )
    return path


def _encoded(text: str, codec: Codec) -> bytes:
    """Plain JSON lines re-encoded as the controller writes them (one encoder, the file's records in order)."""
    encoder = codec.encoder()
    return encoder.encode([json.loads(line) for line in text.splitlines()]).encode()
