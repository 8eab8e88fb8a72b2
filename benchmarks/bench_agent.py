"""Agent CPU time per sample of a role with 50 processes.

TowerDeck's way (core.agent.processes and .sampling): the role's tree from /proc rows cached between samples, then one
read of /proc/PID/stat per process (CPU ticks, threads and RSS are all in it). Baseline, "naive psutil": what a straightforward sampler does, a
psutil.process_iter() walk to find the role's processes by session id and fresh Process objects
each sample. Both measured in this run, on the same 50 processes, with time.process_time().
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil

from core.agent.processes import ProcTable, Role, role_tree
from core.agent.sampling import HostSampler

PROCESSES = 50
SAMPLES = 100


def start_role() -> subprocess.Popen[bytes]:
    code = f"import os, time\nfor _ in range({PROCESSES - 1}):\n    if os.fork() == 0:\n        time.sleep(600); os._exit(0)\ntime.sleep(600)"
    return subprocess.Popen([sys.executable, "-c", code], start_new_session=True)


class TowerdeckSampler:
    def __init__(self, role: Role) -> None:
        self.role = role
        self.sampler = HostSampler()
        self.table: ProcTable | None = None

    def __call__(self) -> dict[str, object]:
        self.table = ProcTable(self.table)
        return self.sampler.role(role_tree(self.role, self.table, scan_environ=False))


def naive_sample(sid: int) -> dict[str, object]:
    cpu, rss, threads, count = 0.0, 0, 0, 0
    for proc in psutil.process_iter():
        try:
            if os.getsid(proc.pid) != sid:
                continue
            p = psutil.Process(proc.pid)
            cpu += p.cpu_percent(interval=None)
            rss += p.memory_info().rss
            threads += p.num_threads()
            count += 1
        except (psutil.Error, OSError):
            continue
    return {"pids": count, "cpu_percent": cpu, "rss_bytes": rss, "threads": threads}


def measure(fn: object, *args: object) -> tuple[float, dict[str, object]]:
    result: dict[str, object] = {}
    start = time.process_time()
    for _ in range(SAMPLES):
        result = fn(*args)  # type: ignore[operator]
    return (time.process_time() - start) / SAMPLES, result


def main() -> None:
    proc = start_role()
    try:
        time.sleep(1.5)
        log = Path("/dev/null")
        role = Role.__new__(Role)
        role.pid = role.sid = proc.pid
        role.leader_done = False
        role.token = "bench"
        role.log_path = str(log)
        ours, ours_result = measure(TowerdeckSampler(role))
        naive, naive_result = measure(naive_sample, proc.pid)
        assert ours_result["pids"] == naive_result["pids"] == PROCESSES, (ours_result, naive_result)
        print(f"agent sample of one role with {PROCESSES} processes ({SAMPLES} samples, CPU time per sample):")
        print(f"  towerdeck (cached /proc rows, one stat read)   : {ours * 1000:8.2f} ms")
        print(f"  baseline  (naive psutil.process_iter)          : {naive * 1000:8.2f} ms")
        print(f"  speed-up: {naive / ours:.1f}x")
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()


if __name__ == "__main__":
    main()
