"""A light stand-in for a training role, for scale runs and tests of TowerDeck itself (no TensorFlow).

Reads the cluster the way a real trainer does (``--job_name``/``--task_index``, else TF_CONFIG):
a ``ps`` serves forever (like ``server.join()``) until it is stopped; a worker prints
``Step: N,  Cost: X`` lines (the classic example's format) at ``--rate_hz`` for ``--steps`` steps (0: forever) and exits 0. It
imports nothing beyond the standard library, so 64 of them fit on a laptop.

With ``--checkpoint_dir DIR`` it checkpoints and resumes the way a TensorFlow trainer does, in
TensorFlow's own layout: the chief (``chief:0``, else ``worker:0``) writes ``ckpt-N.index`` and
``ckpt-N.data-00000-of-00001`` every ``--checkpoint_every`` steps and on SIGTERM, then the
``checkpoint`` state file (a text proto, replaced atomically), keeping the newest five. Every
worker that starts with a checkpoint there resumes from its step (a shared global step, as in
between-graph training) and says so: ``resumed from checkpoint ckpt-60 at step 60``. The cost is a
function of the step (falling faster with a larger ``--learning_rate``, so two runs one flag apart
differ as real ones do), so it carries on from the checkpoint's value.

A straggler on purpose: ``--slow_task=1 --slow_after_s=30 --slow_for_s=40`` makes worker 1 step
``--slow_factor`` (2) times slower from 30 s after its start for 40 s (0: for good); it says
``light trainer: worker:1 slowed 2x`` and ``light trainer: worker:1 recovered`` when it turns.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import signal
import sys
import time

KEEP = 5  # checkpoints kept, as tf.train.CheckpointManager(max_to_keep=5)


def latest_step(directory: str) -> tuple[str, int] | None:
    """The checkpoint the state file names as the newest, and its step."""
    try:
        with open(os.path.join(directory, "checkpoint"), encoding="utf-8") as state:
            text = state.read(1 << 20)
    except OSError:
        return None
    found = re.search(r'^model_checkpoint_path:\s*"([^"]*?-(\d+))"\s*$', text, re.MULTILINE)
    return (os.path.basename(found.group(1)), int(found.group(2))) if found else None


def save(directory: str, step: int, cost: float) -> None:
    """Write checkpoint ``ckpt-<step>``, then the state file that lists it (the newest :data:`KEEP`)."""
    os.makedirs(directory, exist_ok=True)
    name = f"ckpt-{step}"
    for suffix, body in ((".data-00000-of-00001", {"step": step, "cost": cost}), (".index", {"step": step})):
        with open(os.path.join(directory, name + suffix), "w", encoding="utf-8") as out:
            json.dump(body, out)
    old: list[tuple[str, float]] = []
    try:
        with open(os.path.join(directory, "checkpoint"), encoding="utf-8") as state:
            text = state.read(1 << 20)
        paths = re.findall(r'^all_model_checkpoint_paths:\s*"([^"]*)"', text, re.MULTILINE)
        stamps = re.findall(r"^all_model_checkpoint_timestamps:\s*(\S+)", text, re.MULTILINE)
        old = list(zip(paths, [float(s) for s in stamps], strict=False)) if len(stamps) == len(paths) else []
    except (OSError, ValueError):
        old = []
    kept = [(p, t) for p, t in old if p != name] + [(name, time.time())]
    for path, _ in kept[:-KEEP]:
        for suffix in (".data-00000-of-00001", ".index"):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(directory, path + suffix))
    kept = kept[-KEEP:]
    lines = [f'model_checkpoint_path: "{name}"']
    lines += [f'all_model_checkpoint_paths: "{p}"' for p, _ in kept]
    lines += [f"all_model_checkpoint_timestamps: {t:.6f}" for _, t in kept]
    tmp = os.path.join(directory, f".checkpoint.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        out.write("\n".join(lines) + "\n")
    os.replace(tmp, os.path.join(directory, "checkpoint"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--job_name", default="")
    parser.add_argument("--task_index", type=int, default=-1)
    parser.add_argument("--chief_hosts", default="", help="the classic flags' chief job, when there is one")
    parser.add_argument("--steps", type=int, default=100, help="steps before exiting 0; 0 runs until stopped")
    parser.add_argument("--rate_hz", type=float, default=10.0, help="step lines a second")
    parser.add_argument("--checkpoint_dir", default="", help="checkpoint and resume here (see the docstring)")
    parser.add_argument("--checkpoint_every", type=int, default=10, help="steps between the chief's checkpoints")
    parser.add_argument("--slow_task", type=int, default=-1, help="the worker that slows down (with --slow_after_s)")
    parser.add_argument("--slow_after_s", type=float, default=0.0, help="seconds after its start it slows down")
    parser.add_argument("--slow_for_s", type=float, default=0.0, help="seconds it stays slow (0: for good)")
    parser.add_argument("--slow_factor", type=float, default=2.0, help="how many times slower it steps")
    parser.add_argument(
        "--learning_rate", type=float, default=0.1, help="how fast the cost falls (0.1: by e every 500 steps)"
    )
    args, _unknown = parser.parse_known_args(argv)
    job, index = args.job_name, args.task_index
    has_chief = bool(args.chief_hosts)
    if not job:
        config = json.loads(os.environ.get("TF_CONFIG") or "{}")
        task = config.get("task") or {}
        job, index = str(task.get("type", "worker")), int(task.get("index", 0))
        has_chief = "chief" in (config.get("cluster") or {})
    saves = bool(args.checkpoint_dir) and (job == "chief" or (job == "worker" and index == 0 and not has_chief))
    progress = {"step": 0, "saved": 0, "cost": float("nan")}

    def on_term(*_: object) -> None:
        # A stop lets a trainer save (TowerDeck sends SIGTERM and waits its stop grace), as
        # PreemptionCheckpointHandler does: the step reached is kept.
        if saves and progress["step"] > progress["saved"]:
            save(args.checkpoint_dir, int(progress["step"]), float(progress["cost"]))
        sys.exit(0)

    signal.signal(signal.SIGTERM, on_term)
    print(f"light trainer: {job}:{index} pid {os.getpid()}", flush=True)
    if job == "ps":
        while True:
            time.sleep(3600)
    step = 0
    resumed = latest_step(args.checkpoint_dir) if args.checkpoint_dir else None
    if resumed is not None:
        step = progress["step"] = progress["saved"] = resumed[1]
        print(f"resumed from checkpoint {resumed[0]} at step {step}", flush=True)
    period_s = 1.0 / args.rate_hz if args.rate_hz > 0 else 0.0
    started = next_at = time.monotonic()
    was_slow = False
    while args.steps <= 0 or step < args.steps:
        step += 1
        cost = 2.0 * math.exp(-step * args.learning_rate / 50.0) + 0.05 * ((step * 7919 + index * 104729) % 100) / 100.0
        progress["step"], progress["cost"] = step, cost
        print(f"Step: {step},  Cost: {cost:.4f}", flush=True)
        if saves and args.checkpoint_every > 0 and step % args.checkpoint_every == 0:
            save(args.checkpoint_dir, step, cost)
            progress["saved"] = step
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
