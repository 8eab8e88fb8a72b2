"""Runs every benchmark in this folder, one after the other, each against its baseline.

A benchmark that fails (a non-zero exit, a crash, or past ``TOWERDECK_BENCH_TIMEOUT_S``, default
1800 s) does not stop the others: each one's output streams as it runs, and at the end a summary
names every benchmark with its time and, for a failure, why (the exit status and its last line of
error output). The exit status is 1 when any failed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path

HERE = Path(__file__).resolve().parent
TIMEOUT_S = float(os.environ.get("TOWERDECK_BENCH_TIMEOUT_S", "1800"))


def run_one(script: Path) -> tuple[bool, str]:
    """Runs one benchmark, its output passed through; returns (passed, why it failed)."""
    tail: deque[str] = deque(maxlen=5)
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        cwd=HERE.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
    )
    assert proc.stdout is not None
    stream = proc.stdout

    def pass_through() -> None:
        for line in stream:
            sys.stdout.write(line)
            sys.stdout.flush()
            if line.strip():
                tail.append(line.strip())

    reader = threading.Thread(target=pass_through, daemon=True)
    reader.start()
    try:
        proc.wait(TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        reader.join(5)
        return False, f"ran past {TIMEOUT_S:g} s (TOWERDECK_BENCH_TIMEOUT_S)"
    reader.join()
    code = proc.wait()
    if code == 0:
        return True, ""
    last = tail[-1] if tail else "no output"
    return False, f"exit status {code}: {last}"


def run_all(scripts: list[Path]) -> int:
    """Runs ``scripts`` one after the other whatever each does; prints the summary; 1 if any failed."""
    print(f"load average {os.getloadavg()[0]:.1f} at start; {os.cpu_count()} CPUs", flush=True)
    results: list[tuple[str, bool, str, float]] = []
    for script in scripts:
        print(f"== {script.name}", flush=True)
        start = time.monotonic()
        passed, why = run_one(script)
        results.append((script.name, passed, why, time.monotonic() - start))
    print(f"== summary (load average {os.getloadavg()[0]:.1f} at the end)")
    for name, passed, why, seconds in results:
        print(f"   {'ok    ' if passed else 'FAILED'} {name} ({seconds:.0f} s){': ' + why if why else ''}")
    failed = [name for name, passed, _, _ in results if not passed]
    if failed:
        print(f"{len(failed)} of {len(results)} benchmarks failed: {', '.join(failed)}")
    return 1 if failed else 0


def main() -> int:
    only = set(sys.argv[1:])
    scripts = [s for s in sorted(HERE.glob("bench_*.py")) if not only or s.stem in only or s.name in only]
    return run_all(scripts)


if __name__ == "__main__":
    sys.exit(main())
