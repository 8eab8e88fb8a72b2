"""Chaos at scale: 1 ps + 64 light workers, 10 random kills by ``ctl RUN chaos``, recovered every time?

Two variants of the same cluster, in the same run, on the same machine, each given the same kills
(``--seed``): the baseline is each job's own restart policy (``[recovery] mode = "role"``, the
workers ``OnFailure``, what TowerDeck did before recovery by strategy: a killed ps is restarted
alone and its workers train on against a fresh, empty ps), and this code's default
(``mode = "auto"``: a killed worker is restarted alone, a killed ps with every role). For each it
prints the kills recovered and the recovery times (signal to a whole cluster: every role that ran
before running again, the killed one in a new attempt, no recovery under way), median and max; then
it kills ps:0 once (random picks among 65 roles seldom hit it) and says how each variant fared.

``TOWERDECK_BENCH_CHAOS_WORKERS`` (default 64), ``..._KILLS`` (10) and ``..._EVERY_S`` (5) change it.
A run takes about 3-5 minutes.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKERS = int(os.environ.get("TOWERDECK_BENCH_CHAOS_WORKERS", "64"))
KILLS = int(os.environ.get("TOWERDECK_BENCH_CHAOS_KILLS", "10"))
EVERY_S = float(os.environ.get("TOWERDECK_BENCH_CHAOS_EVERY_S", "5"))
SEED = 20261127

CLUSTER = """
name = "chaos"
strategy = "between_graph"
workdir = "{trainers}"
command = ["python", "-u", "light_trainer.py", "--steps=0", "--rate_hz=5"]
stop_grace_s = 3
[jobs.ps]
tasks = ["127.0.0.1:{ps}"]
[jobs.worker]
tasks = [{workers}]
{restart}
[recovery]
mode = "{mode}"
backoff_s = 0.5
max_recoveries = {budget}
"""


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def ctl(run_dir: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(ROOT / "main.py"), "ctl", str(run_dir), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def variant(mode: str, tmp: Path) -> dict[str, object]:
    ports = free_ports(WORKERS + 1)
    restart = 'restart = { policy = "OnFailure", max_restarts = 100, backoff_s = 0.5 }' if mode == "role" else ""
    cluster = tmp / f"{mode}.toml"
    workers = ", ".join(f'"127.0.0.1:{p}"' for p in ports[1:])
    # The light trainers start from step 0 again (no checkpoint): every kill counts as one more
    # recovery in a row, so the budget covers the whole run of chaos.
    cluster.write_text(
        CLUSTER.format(
            trainers=ROOT / "resources" / "trainers",
            ps=ports[0],
            workers=workers,
            restart=restart,
            mode=mode,
            budget=KILLS + 1,
        )
    )
    run_dir = tmp / f"run-{mode}"
    launch = subprocess.Popen(
        [sys.executable, str(ROOT / "main.py"), "launch", str(cluster), "--run-dir", str(run_dir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
    )
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            reply = ctl(run_dir, "status", "--json")
            roles = json.loads(reply.stdout)["roles"] if reply.returncode == 0 else []
            if len(roles) == WORKERS + 1 and all(r["state"] == "running" for r in roles):
                break
            time.sleep(1)
        else:
            raise SystemExit(f"{mode}: the cluster never ran")
        chaos = ctl(
            run_dir, "chaos", "--count", str(KILLS), "--every", str(EVERY_S), "--seed", str(SEED),
            "--recover-within", "120", timeout=KILLS * 200,
        )  # fmt: skip
        print(chaos.stdout, end="")
        times = [float(t) for t in re.findall(r"recovered in (\d+\.\d) s", chaos.stdout)]
        killed = re.findall(r"SIGKILL (\S+) \(pid", chaos.stdout)
        # Then the ps, which random picks among 65 roles seldom hit: the case recovery is for.
        ps = ctl(run_dir, "chaos", "--roles", "ps", "--every", str(EVERY_S), "--recover-within", "120", timeout=300)
        print(ps.stdout, end="")
        ps_time = re.search(r"recovered in (\d+\.\d) s", ps.stdout)
        return {
            "mode": mode,
            "kills": len(killed),
            "recovered": len(times),
            "times": times,
            "killed": killed,
            "ps": float(ps_time.group(1)) if ps_time else None,
            "ps_words": (
                re.findall(r"chaos 1/1: (?:recovered in .*|not recovered: .*)", ps.stdout) or [ps.stderr.strip()]
            )[0],
        }
    finally:
        ctl(run_dir, "stop-all")
        try:
            launch.wait(timeout=120)
        except subprocess.TimeoutExpired:
            launch.kill()


def main() -> int:
    print(f"chaos: 1 ps + {WORKERS} light workers, {KILLS} random kills every {EVERY_S:g} s or more (seed {SEED})")
    results = []
    with tempfile.TemporaryDirectory(prefix="towerdeck-chaos-") as tmp:
        for mode in ("role", "auto"):
            print(f"--- {mode}{' (baseline: each job its own restart policy)' if mode == 'role' else ' (this code)'}")
            results.append(variant(mode, Path(tmp)))
    print()
    print(f"{'variant':<10} {'kills':>5} {'recovered':>9} {'median s':>9} {'max s':>7}  killed")
    for r in results:
        times = sorted(r["times"])  # type: ignore[type-var]
        median = times[len(times) // 2] if times else float("nan")
        print(
            f"{r['mode']:<10} {r['kills']:>5} {r['recovered']:>9} {median:>9.1f} {max(times, default=float('nan')):>7.1f}"
            f"  {', '.join(r['killed'])}"  # type: ignore[arg-type]
        )
    for r in results:
        print(f"{r['mode']:<10} kill ps:0 -> {r['ps_words']}")
    # This code must recover every kill, the ps's included; the baseline is expected to lose the run at the ps.
    this = results[-1]
    return 0 if this["kills"] == this["recovered"] == KILLS and this["ps"] is not None else 1


if __name__ == "__main__":
    sys.exit(main())
