"""`make test`'s runner: the suite as two pytest processes side by side, one output at the end.

Most of the suite's time is tests waiting on real processes (TensorFlow clusters, sshd, Slurm,
windows), not computing, so two pytest processes on a 2-core machine finish in about the time of
the longer one: 39 min each here against ~59 min for one process in CI. The split is by directory,
so each half keeps its own session fixtures (one sshd, one Slurm, one Qt application per half):

- B: tests/gui, tests/faults, tests/ssh, tests/slurm (windows, fault injection, remote hosts);
- A: everything else, so a new test directory lands in A without a change here.

Each half writes its output to build/test-logs/<half>.log as it runs (a line every few minutes
says how far each is); at the end both logs are printed whole, one after the other, and the exit
status is the first half's failure, if any. ``TOWERDECK_TEST_JOBS=1`` (or a one-CPU machine) runs
the suite as one pytest process, as before. Arguments go to pytest (``make test PYTEST_ARGS=...``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HALF_B = ("tests/gui", "tests/faults", "tests/ssh", "tests/slurm")
PROGRESS_EVERY_S = 300.0
STOP_GRACE_S = 120.0


def halves(extra: Sequence[str]) -> dict[str, list[str]]:
    """Each half's pytest command line (its own cache directory: two processes, one cache file)."""
    pytest = [sys.executable, "-m", "pytest"]
    ignores = [f"--ignore={d}" for d in HALF_B]
    return {
        "A": [*pytest, "-o", "cache_dir=.pytest_cache/A", "tests", *ignores, *extra],
        "B": [*pytest, "-o", "cache_dir=.pytest_cache/B", *HALF_B, *extra],
    }


def last_line(path: Path) -> str:
    """The last non-blank line of a log (pytest's progress line), read from its end."""
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - 4096))
        lines = [line for line in f.read().decode(errors="replace").splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def run_halves(
    commands: dict[str, list[str]], log_dir: Path, *, cwd: Path, progress_s: float = PROGRESS_EVERY_S
) -> int:
    """Run ``commands`` side by side, each to ``log_dir/<name>.log``; print each log whole once all
    are done; the first non-zero exit status, else 0. SIGINT or SIGTERM stops every half (pytest
    tears its fixtures down on SIGINT; what is left after ``STOP_GRACE_S`` is killed with its
    process group)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    procs: dict[str, subprocess.Popen[bytes]] = {}
    logs = {name: log_dir / f"{name}.log" for name in commands}

    def stop(signum: int, _frame: object) -> None:
        # pytest on SIGINT runs its fixtures' teardown (clusters stopped, sshd and Slurm ended);
        # whatever is left of a half after STOP_GRACE_S goes with its process group.
        for proc in procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        deadline = time.monotonic() + STOP_GRACE_S
        for proc in procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(max(0.0, deadline - time.monotonic()))
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        raise SystemExit(128 + signum)

    old = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    started = time.monotonic()
    try:
        for name, argv in commands.items():
            with open(logs[name], "wb") as log:
                procs[name] = subprocess.Popen(
                    argv, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
                )
        print(f"test halves: {', '.join(commands)} side by side; logs in {log_dir}", flush=True)
        said = started
        while any(p.poll() is None for p in procs.values()):
            time.sleep(1.0)
            if time.monotonic() - said >= progress_s:
                said = time.monotonic()
                minutes = (said - started) / 60
                for name, proc in procs.items():
                    state = "running" if proc.poll() is None else f"done (exit {proc.returncode})"
                    print(f"  {minutes:5.1f} min  {name} {state}: {last_line(logs[name])[:100]}", flush=True)
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
    for name in commands:
        print(f"\n========== test half {name}: {' '.join(commands[name][1:])}", flush=True)
        sys.stdout.buffer.write(logs[name].read_bytes())
        sys.stdout.flush()
    minutes = (time.monotonic() - started) / 60
    codes = {name: proc.returncode for name, proc in procs.items()}
    print(f"\ntest halves after {minutes:.1f} min: " + ", ".join(f"{n} exit {c}" for n, c in codes.items()))
    return next((c for c in codes.values() if c != 0), 0)


def main(argv: list[str]) -> int:
    jobs = os.environ.get("TOWERDECK_TEST_JOBS") or ("2" if (os.cpu_count() or 1) >= 2 else "1")
    if jobs == "1":
        return subprocess.call([sys.executable, "-m", "pytest", *argv], cwd=ROOT)
    return run_halves(halves(argv), ROOT / "build" / "test-logs", cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
