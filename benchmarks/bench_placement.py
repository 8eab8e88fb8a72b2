"""Parsing a device-placement log: lines per second.

TowerDeck's way (core.telemetry.placement): a substring pre-check per line, eager executions
counted through one dict lookup on the line's tail, graph placements deduplicated, nothing stored
per line. Baseline, "regex per line": one compiled regex (an alternation of the placer, older-placer
and eager forms) run with ``re.search`` on every line, every match's groups appended to a list.
Both parse the same synthetic ~300k-line log (eager executions, placer lines each with its absl
duplicate, noise) in this run; best of 3 with time.perf_counter().
"""

from __future__ import annotations

import random
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.telemetry.placement import PlacementAggregator

LINES = 300_000
REPEATS = 3
ABSL = "I0000 00:00:1795305212.{us:06d}    3241 {src}] "
EAGER_OPS = ["MatMul", "AddV2", "Relu", "ReadVariableOp", "AssignAddVariableOp", "_MklMatMul", "Mul", "Sum"]
NOISE = [
    "Step: {i},  Epoch:  1,  Batch: 100 of 550,  Cost: 8.2541,  AvgTime: 3.04ms",
    "I0000 00:00:1795305212.{us:06d}    3241 grpc_server_lib.cc:467] Started server with target: grpc://127.0.0.1:2222",
    "W0000 00:00:1795305212.{us:06d}    3241 local_rendezvous.cc:412] Local rendezvous is aborting with status: ABORTED",
    "epoch {i}: loss=0.1234 accuracy=0.98",
]

# The fastest of the plain single regexes tried (an unanchored node-name alternative ran 5x slower):
# each alternative starts at a literal ("Executing op ", start of line or an absl "] ").
BASELINE = re.compile(r"(?:Executing op (\S+) in device |(?:^|\] )([^\s:]+)(?:: \((\w+)\))?: )(/job:\S+)")


def synthetic_log(n: int, seed: int = 0) -> str:
    """About ``n`` lines: 60% eager executions, 20% placer lines (half absl copies), 20% noise."""
    rng = random.Random(seed)
    lines: list[str] = []
    graph_op = 0
    while len(lines) < n:
        r = rng.random()
        us = rng.randrange(1_000_000)
        dev = f"/job:worker/replica:0/task:{rng.randrange(2)}/device:GPU:{rng.randrange(4)}"
        if r < 0.6:
            lines.append(
                ABSL.format(us=us, src="execute.cc:1775") + f"Executing op {rng.choice(EAGER_OPS)} in device {dev}"
            )
        elif r < 0.7:
            graph_op += 1
            placer = f"model/layer_{graph_op % 500}/op_{graph_op}: ({rng.choice(EAGER_OPS)}): {dev}"
            lines.append(placer)
            lines.append(ABSL.format(us=us, src="placer.cc:162") + placer)
        else:
            lines.append(rng.choice(NOISE).format(i=len(lines), us=us))
    return "\n".join(lines[:n]) + "\n"


def baseline(text: str) -> list[tuple[str | None, ...]]:
    matches: list[tuple[str | None, ...]] = []
    search = BASELINE.search
    for line in text.splitlines():
        m = search(line)
        if m is not None:
            matches.append(m.groups())
    return matches


def towerdeck(text: str) -> int:
    return PlacementAggregator().feed_text(text, t=0.0)


def best_of(fn: object, text: str) -> tuple[float, object]:
    best = float("inf")
    result: object = None
    for _ in range(REPEATS):
        start = time.perf_counter()
        result = fn(text)  # type: ignore[operator]
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> None:
    text = synthetic_log(LINES)
    n = text.count("\n")
    base_s, base_matches = best_of(baseline, text)
    ours_s, ours_matched = best_of(towerdeck, text)
    assert isinstance(base_matches, list)
    print(f"placement log parse: {n} lines ({len(text) / 1e6:.1f} MB), best of {REPEATS}")
    print(
        f"  baseline (re.search per line, store every match): {n / base_s:12,.0f} lines/s  ({len(base_matches)} matches)"
    )
    print(f"  towerdeck PlacementAggregator.feed_text:          {n / ours_s:12,.0f} lines/s  ({ours_matched} matches)")
    print(f"  ratio: {base_s / ours_s:.1f}x")
    if ours_matched != len(base_matches):
        print("  WARNING: the two parsers matched a different number of lines")


if __name__ == "__main__":
    main()
