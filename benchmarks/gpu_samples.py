"""A host's ``sample`` event with its GPUs, as an agent sends it, for the window benchmarks.

Plain data, no TowerDeck import: a benchmark's baseline child process imports the old code's
modules, and this must not pull in the new ones.
"""

from __future__ import annotations

import math

GIB = float(1 << 30)


def gpu_sample(host: str, t: float, gpus: int = 8) -> dict[str, object]:
    """``gpus`` GPUs on ``host`` at time ``t``: utilisation waving with time, worker:i on GPU i."""
    return {
        "host": host,
        "t": t,
        "figures": {},
        "gpus": [
            {
                "index": i,
                "utilization_gpu_percent": 50 + 40 * math.sin(t / 60 + i),
                "memory_used_bytes": (20 + i) * GIB,
                "memory_total_bytes": 80 * GIB,
                "temperature_c": 60.0,
                "power_w": 400.0,
                "power_limit_w": 700.0,
                "processes": [{"pid": 1, "role": f"worker:{i}", "used_memory_bytes": GIB}],
            }
            for i in range(gpus)
        ],
    }
