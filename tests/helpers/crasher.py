"""A trainer that crashes: ``crasher.py COUNTER CRASHES``. Each start counts itself in the file
COUNTER; the first CRASHES starts print a line, then die 0.3 s later of ZeroDivisionError (exit 1,
a real traceback); later starts print a step line ten times a second until stopped."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path


def main() -> None:
    counter, crashes = Path(sys.argv[1]), int(sys.argv[2])
    starts = int(counter.read_text() or "0") + 1 if counter.exists() else 1
    counter.write_text(str(starts))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"crasher: start {starts}", flush=True)
    if starts <= crashes:
        time.sleep(0.3)
        print(1 / 0)  # ZeroDivisionError: division by zero
    step = 0
    while True:
        step += 1
        print(f"Step: {step},  Cost: {1.0 / step:.4f}", flush=True)
        time.sleep(0.1)


if __name__ == "__main__":
    main()
