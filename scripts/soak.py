"""Soak: the demo cluster under restarts and injected SIGKILLs for a while, then a report.

    make soak                      # SOAK_MINUTES=3, a worker's trainer SIGKILLed every 20 s
    SOAK_MINUTES=60 SOAK_KILL_EVERY_S=30 make soak

It runs ``python main.py launch`` on a copy of resources/demo_cluster.toml (free ports, endless
training, OnFailure with room for every injected kill), each role wrapped by soak_counter.py,
which passes the trainer's output through and counts its newlines. Every SOAK_KILL_EVERY_S a
random worker's trainer process is SIGKILLed. At the end it stops the cluster and reports: roles
restarted, lines written vs lines in the run directory (must be equal), the RSS of the TowerDeck
process (and its agent) sampled over time (must be flat), and processes or ports left (must be
none). Exit code 0 only if every check holds; the report also goes to soak-report.json.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent
COUNTER = ROOT / "scripts" / "soak_counter.py"
RSS_PERIOD_S = 5.0
FLAT_TOLERANCE = 1.15  # the last quarter's peak may exceed the first quarter's by at most 15 %


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def toml_string(value: str) -> str:
    return json.dumps(value)


def write_cluster(work: Path, counts: Path, ports: list[int]) -> Path:
    demo = tomllib.loads((ROOT / "resources" / "demo_cluster.toml").read_text())
    command = [
        "python", "-u", str(COUNTER), str(counts),
        *(re.sub(r"--train_steps=\d+", "--train_steps=1000000000", a) for a in demo["command"]),
        "--log_every=5",
    ]  # fmt: skip
    lines = [
        'name = "soak"',
        f"strategy = {toml_string(demo['strategy'])}",
        f"launch_style = {toml_string(demo['launch_style'])}",
        f"workdir = {toml_string(str(ROOT / 'resources' / demo['workdir']))}",
        f"command = {json.dumps(command)}",
        "stop_grace_s = 15",
        "[env]",
        *(f"{k} = {toml_string(v)}" for k, v in demo.get("env", {}).items()),
        "[jobs.ps]",
        f'tasks = ["127.0.0.1:{ports[0]}"]',
        'restart = { policy = "OnFailure", max_restarts = 1000, backoff_s = 1.0, backoff_max_s = 4.0 }',
        "[jobs.worker]",
        f'tasks = ["127.0.0.1:{ports[1]}", "127.0.0.1:{ports[2]}"]',
        'restart = { policy = "OnFailure", max_restarts = 1000, backoff_s = 1.0, backoff_max_s = 4.0 }',
    ]
    path = work / "soak_cluster.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def ctl_status(run_dir: Path) -> dict[str, Any] | None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "main.py"), "ctl", str(run_dir), "status", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return json.loads(result.stdout) if result.returncode == 0 else None


def rss(proc: psutil.Process) -> tuple[int, int]:
    """RSS of the TowerDeck process and of its agent(s), in bytes."""
    own = proc.memory_info().rss
    agents = sum(c.memory_info().rss for c in proc.children() if "agent.py" in " ".join(c.cmdline()))
    return own, agents


def left_behind(marker: str, ports: list[int]) -> tuple[list[int], list[int]]:
    procs = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if marker in " ".join(p.info["cmdline"] or []):
                procs.append(p.pid)
        except psutil.Error:
            continue
    held = [
        c.laddr.port
        for c in psutil.net_connections(kind="tcp")
        if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port in ports
    ]
    return procs, held


def main() -> int:
    minutes = float(os.environ.get("SOAK_MINUTES", "3"))
    kill_every_s = float(os.environ.get("SOAK_KILL_EVERY_S", "20"))
    rng = random.Random(int(os.environ.get("SOAK_SEED", "1")))
    work = Path(tempfile.mkdtemp(prefix="towerdeck-soak-"))
    counts = work / "counts"
    counts.mkdir()
    ports = free_ports(3)
    cluster = write_cluster(work, counts, ports)
    run_dir = work / "run"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    print(f"soak: {minutes:g} min, a worker SIGKILLed every {kill_every_s:g} s; work dir {work}", flush=True)
    launch = subprocess.Popen(
        [sys.executable, str(ROOT / "main.py"), "launch", str(cluster), "--run-dir", str(run_dir)],
        stdout=open(work / "launch.out", "w"),  # noqa: SIM115 - held by the child for its life
        stderr=subprocess.STDOUT,
        env=env,
    )
    tower = psutil.Process(launch.pid)
    started = time.monotonic()
    end = started + minutes * 60
    next_kill = started + kill_every_s
    next_rss = started + RSS_PERIOD_S  # from the first period: the process is set up by then
    samples: list[tuple[float, int, int]] = []
    kills: list[dict[str, Any]] = []
    while time.monotonic() < end and launch.poll() is None:
        now = time.monotonic()
        if now >= next_rss:
            next_rss += RSS_PERIOD_S
            own, agents = rss(tower)
            samples.append((round(now - started, 1), own, agents))
        if now >= next_kill:
            next_kill += kill_every_s
            status = ctl_status(run_dir)
            running = [r for r in (status or {}).get("roles", []) if r["job"] == "worker" and r["state"] == "running"]
            if running:
                role = rng.choice(running)
                try:
                    trainer = psutil.Process(role["pid"]).children()[0]
                    trainer.send_signal(signal.SIGKILL)
                    kills.append({"t": round(now - started, 1), "role": role["role"], "pid": trainer.pid})
                    print(f"  {now - started:6.0f} s  SIGKILL {role['role']} trainer pid {trainer.pid}", flush=True)
                except (psutil.Error, IndexError):
                    pass
        time.sleep(0.5)
    final = ctl_status(run_dir)
    launch.send_signal(signal.SIGINT)  # a user's Ctrl-C: stop every role, in order
    try:
        launch.wait(120)
    except subprocess.TimeoutExpired:
        launch.kill()
        launch.wait()
    time.sleep(1)  # the kernel's reaping

    written = sum(int(p.read_text()) for p in counts.glob("*.count"))
    in_run_dir = sum(p.read_bytes().count(b"\n") for p in (run_dir / "roles").glob("*/attempt-*.log"))
    attempts = len(list((run_dir / "roles").glob("*/attempt-*.log")))
    counted_attempts = len(list(counts.glob("*.count")))
    restarts = {r["role"]: r["restarts"] for r in (final or {}).get("roles", [])}
    procs, held = left_behind(str(COUNTER), ports)
    quarter = max(1, len(samples) // 4)
    first_peak = max(s[1] for s in samples[:quarter])
    last_peak = max(s[1] for s in samples[-quarter:])
    report = {
        "minutes": minutes,
        "kills_injected": len(kills),
        "roles_restarted": restarts,
        "restarts_total": sum(restarts.values()),
        "lines_written": written,
        "lines_in_run_dir": in_run_dir,
        "attempts_logged": attempts,
        "attempts_counted": counted_attempts,
        "rss_samples": [
            {"t_s": t, "towerdeck_mib": round(a / 2**20, 1), "agent_mib": round(b / 2**20, 1)} for t, a, b in samples
        ],
        "towerdeck_rss_first_quarter_peak_mib": round(first_peak / 2**20, 1),
        "towerdeck_rss_last_quarter_peak_mib": round(last_peak / 2**20, 1),
        "orphan_processes": procs,
        "ports_still_listening": held,
        "launch_exit_code": launch.returncode,
        "run_dir": str(run_dir),
    }
    checks = {
        "restarted after every kill": report["restarts_total"] >= len(kills) > 0,
        "lines written == lines in run dir": written == in_run_dir and attempts == counted_attempts,
        "TowerDeck RSS flat": last_peak <= first_peak * FLAT_TOLERANCE,
        "no orphans, no held ports": not procs and not held,
    }
    report["checks"] = checks
    (work / "soak-report.json").write_text(json.dumps(report, indent=2))
    print(f"\nsoak report ({work / 'soak-report.json'}):")
    print(f"  kills injected        {len(kills)}")
    print(f"  roles restarted       {report['restarts_total']} {restarts}")
    print(f"  lines written         {written} (over {counted_attempts} attempts)")
    print(f"  lines in run dir      {in_run_dir} (over {attempts} attempt logs)")
    print("  TowerDeck RSS (MiB)   " + " ".join(f"{t:.0f}s:{a / 2**20:.0f}" for t, a, _ in samples))
    print("  agent RSS (MiB)       " + " ".join(f"{t:.0f}s:{b / 2**20:.0f}" for t, _, b in samples))
    print(f"  orphans left          {len(procs)} processes, {len(held)} listening ports")
    for name, ok in checks.items():
        print(f"  {'ok  ' if ok else 'FAIL'}  {name}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
