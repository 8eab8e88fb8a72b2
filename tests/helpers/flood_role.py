"""A role that floods its output, for the fault tests: ``flood_role.py KIND SIZE_BYTES``.

KIND: ``noline`` (SIZE bytes without a newline, then one), ``garbage`` (seeded random bytes:
invalid UTF-8, NULs, carriage returns), ``lines`` (numbered lines as fast as it can). The bytes are
a function of KIND and SIZE only, so a test can recompute them and compare with the log.
"""

from __future__ import annotations

import os
import random
import sys
import time


def payload(kind: str, size: int) -> bytes:
    if kind == "noline":
        return b"a" * size + b"\nend of the long line\n"
    if kind == "garbage":
        return random.Random(7).randbytes(size) + b"\nend of garbage\n"
    lines = []
    total = 0
    i = 0
    while total < size:
        line = f"line {i:09d} step {i} loss={1.0 / (i + 1):.6f} " + "x" * 60 + "\n"
        lines.append(line.encode())
        total += len(lines[-1])
        i += 1
    return b"".join(lines)


def main() -> None:
    kind, size = sys.argv[1], int(sys.argv[2])
    data = payload(kind, size)
    start = time.monotonic()
    view = memoryview(data)
    while view:
        written = os.write(1, view[: 1 << 20])
        view = view[written:]
    elapsed = time.monotonic() - start
    print(f"\nwrote {len(data)} bytes in {elapsed:.2f} s", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
