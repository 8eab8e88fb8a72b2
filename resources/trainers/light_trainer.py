"""A light stand-in for a training role, for scale runs and tests of TowerDeck itself (no TensorFlow).

Reads the cluster the way a real trainer does (``--job_name``/``--task_index``, else TF_CONFIG):
a ``ps`` serves forever (like ``server.join()``) until it is stopped; a worker prints
``Step: N,  Cost: X`` lines (the classic example's format) at ``--rate_hz`` for ``--steps`` steps (0: forever) and exits 0. It
imports nothing beyond the standard library, so 64 of them fit on a laptop.

A straggler on purpose: ``--slow_task=1 --slow_after_s=30 --slow_for_s=40`` makes worker 1 step
``--slow_factor`` (2) times slower from 30 s after its start for 40 s (0: for good); it says
``light trainer: worker:1 slowed 2x`` and ``light trainer: worker:1 recovered`` when it turns.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--job_name", default="")
    parser.add_argument("--task_index", type=int, default=-1)
    parser.add_argument("--steps", type=int, default=100, help="steps before exiting 0; 0 runs until stopped")
    parser.add_argument("--rate_hz", type=float, default=10.0, help="step lines a second")
    parser.add_argument("--slow_task", type=int, default=-1, help="the worker that slows down (with --slow_after_s)")
    parser.add_argument("--slow_after_s", type=float, default=0.0, help="seconds after its start it slows down")
    parser.add_argument("--slow_for_s", type=float, default=0.0, help="seconds it stays slow (0: for good)")
    parser.add_argument("--slow_factor", type=float, default=2.0, help="how many times slower it steps")
    args, _unknown = parser.parse_known_args(argv)
    job, index = args.job_name, args.task_index
    if not job:
        task = json.loads(os.environ.get("TF_CONFIG") or "{}").get("task") or {}
        job, index = str(task.get("type", "worker")), int(task.get("index", 0))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"light trainer: {job}:{index} pid {os.getpid()}", flush=True)
    if job == "ps":
        while True:
            time.sleep(3600)
    period_s = 1.0 / args.rate_hz if args.rate_hz > 0 else 0.0
    started = next_at = time.monotonic()
    step = 0
    was_slow = False
    while args.steps <= 0 or step < args.steps:
        step += 1
        cost = 2.0 * math.exp(-step / 500.0) + 0.05 * ((step * 7919 + index * 104729) % 100) / 100.0
        print(f"Step: {step},  Cost: {cost:.4f}", flush=True)
        slow = _slow(args, job, index, time.monotonic() - started)
        if slow != was_slow:
            said = f"slowed {args.slow_factor:g}x" if slow else "recovered"
            print(f"light trainer: {job}:{index} {said}", flush=True)
            was_slow = slow
        next_at += period_s * (args.slow_factor if slow else 1.0)
        delay = next_at - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    return 0


def _slow(args: argparse.Namespace, job: str, index: int, elapsed_s: float) -> bool:
    """Whether this worker steps slowly now (``--slow_task``, ``--slow_after_s``, ``--slow_for_s``)."""
    if job != "worker" or index != args.slow_task or args.slow_after_s <= 0 or elapsed_s < args.slow_after_s:
        return False
    return args.slow_for_s <= 0 or elapsed_s < args.slow_after_s + args.slow_for_s


if __name__ == "__main__":
    sys.exit(main())
