"""Step times of N workers binned as the Training tab bins them, one worker made slow if asked."""

from __future__ import annotations

from core.views.spread import BinnedWorkers


def step_times(
    workers: int, steps: int, slow: str | None = None, slow_from: int = 0, bins: int = 1024
) -> BinnedWorkers:
    acc = BinnedWorkers(bins=bins, origin=0.0)
    for step in range(steps):
        for w in range(workers):
            name = f"worker:{w}"
            base = 0.1 + 0.001 * w
            acc.add(name, float(step), base * (2.0 if name == slow and step >= slow_from else 1.0))
    return acc
