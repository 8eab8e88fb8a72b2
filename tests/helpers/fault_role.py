"""A light role for the runtime fault tests: ``fault_role.py KIND [N] [SLEEP_S]``.

KIND ``badutf8``: N step lines (classic ``Step: i, Cost: c`` form), each opened by bytes that are
not UTF-8 (and one a split 4-byte sequence), SLEEP_S apart, then exit 0. The bytes are a function of
N only (:func:`badutf8_lines`), so a test can recompute them.
KIND ``steps``: N plain step lines SLEEP_S apart (all at once if 0), then exit 0.
KIND ``forever``: a step line every SLEEP_S, never ends by itself.
KIND ``flood``: step lines in blocks of 1000 as fast as it can for N seconds (0: forever), then exit 0.
KIND ``longline``: one line of ``'xyzw' * N``, then as ``forever``.
Arguments after these are not read: a test may add one to find its processes by.
"""

from __future__ import annotations

import os
import sys
import time


def badutf8_lines(n: int) -> list[bytes]:
    """What ``badutf8`` prints: line i starts with i % 5 + 1 invalid bytes."""
    lines = []
    for i in range(n):
        junk = b"\xff\xfe\xc3(\x80"[: i % 5 + 1]
        lines.append(
            junk
            + f" Step: {i}, Epoch: 1, Batch: {i} of {n}, Cost: {1.0 / (i + 1):.4f}, AvgTime: 1.0ms ".encode()
            + "\u00e9\U0001f600".encode()
            + b"\n"
        )
    return lines


def step_line(i: int) -> bytes:
    return f"Step: {i}, Epoch: 1, Batch: {i} of 0, Cost: {1.0 / (i + 1):.4f}, AvgTime: 1.0ms\n".encode()


def main() -> None:
    kind = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    sleep_s = float(sys.argv[3]) if len(sys.argv) > 3 else 0.05
    if kind == "badutf8":
        for line in badutf8_lines(n):
            os.write(1, line)
            time.sleep(sleep_s)
    elif kind == "steps" and sleep_s == 0:  # a flood: every line at once
        data = memoryview(b"".join(step_line(i) for i in range(n)))
        while data:
            data = data[os.write(1, data[: 1 << 20]) :]
    elif kind == "steps":
        for i in range(n):
            os.write(1, step_line(i))
            time.sleep(sleep_s)
    elif kind == "flood":
        i, deadline = 0, time.monotonic() + n if n else float("inf")
        while time.monotonic() < deadline:
            block = memoryview(b"".join(step_line(j) for j in range(i, i + 1000)))
            while block:
                block = block[os.write(1, block) :]
            i += 1000
    else:
        if kind == "longline":
            os.write(1, b"xyzw" * n + b"\n")
        i = 0
        while True:
            os.write(1, step_line(i))
            i += 1
            time.sleep(sleep_s)


if __name__ == "__main__":
    main()
