"""The GPU proof's role: load one GPU with a PyTorch matmul loop and print step lines TowerDeck
parses (``Step: N,  Cost: X, AvgTime: Yms``), about ten a second, until stopped.

TowerDeck gives the role its GPU through CUDA_VISIBLE_DEVICES (``gpus = [i]`` in the cluster), so
the role always uses ``cuda:0``. ``--load cpu`` is the stand-in where there is no torch or GPU
(the proof run against the NVML double): the same step lines from a pure-Python loop.

    python gpu_proof_load.py --load torch [--size 4096] [--matmuls 8]
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Callable

PRINT_EVERY_S = 0.1


def torch_step(size: int, matmuls: int) -> Callable[[], float]:
    """One step: ``matmuls`` half-precision matmuls on the role's GPU, then a sync."""
    import torch

    device = torch.device("cuda:0")
    a = torch.randn(size, size, device=device, dtype=torch.float16)
    b = torch.randn(size, size, device=device, dtype=torch.float16)
    print(f"gpu proof load: {torch.cuda.get_device_name(device)} pid {os.getpid()}", flush=True)

    def step() -> float:
        c = a
        for _ in range(matmuls):
            c = torch.matmul(c, b)
            c = c / c.norm()  # stays finite
        torch.cuda.synchronize(device)
        return float(c[0, 0].item())

    return step


def cpu_step(size: int, matmuls: int) -> Callable[[], float]:
    """One step of pure-Python arithmetic: the stand-in where no GPU can be loaded."""
    n = max(1, size // 64) * matmuls * 200
    print(f"gpu proof load: CPU stand-in pid {os.getpid()}", flush=True)

    def step() -> float:
        x = 0.0
        for i in range(n):
            x += (i % 7) * 0.5
        return x / n

    return step


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--load", choices=("torch", "cpu"), default="torch")
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--matmuls", type=int, default=8)
    args, _cluster = parser.parse_known_args(argv)  # TowerDeck's cluster flags, if any, are not ours
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    step = torch_step(args.size, args.matmuls) if args.load == "torch" else cpu_step(args.size, args.matmuls)
    n = 0
    last_print = time.monotonic()
    since = (0, last_print)
    while True:
        cost = step()
        n += 1
        now = time.monotonic()
        if now - last_print >= PRINT_EVERY_S:
            avg_ms = 1000.0 * (now - since[1]) / max(1, n - since[0])
            print(f"Step: {n},  Cost: {cost:.6f}, AvgTime: {avg_ms:.3f}ms", flush=True)
            last_print = now
            since = (n, now)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
