"""Writes a cluster of simulated workers, for tests and benchmarks at a scale this machine cannot
run (256 workers on 32 hosts, 1,024 on 128): each loopback address 127.0.0.1..H is a "host" with
its own agent, worker i on host i % H and on GPU (i // H) % 8 of it. Launched with
TOWERDECK_SIMULATE=1, every agent simulates its roles (docs/guide/simulation.md); without it the
roles' command (resources/trainers/sim_trainer.py) refuses to run.

    python scripts/sim_cluster.py --workers 256 sim256.toml        # 32 hosts
    python scripts/sim_cluster.py --workers 1024 --faults sim1024.toml   # 128 hosts, a few faults
    TOWERDECK_SIMULATE=1 python main.py launch sim256.toml
"""

from __future__ import annotations

import argparse
import math
import resource
import socket
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKERS_PER_HOST = 8  # the default host count: one host per 8 workers (256 -> 32, 1,024 -> 128)
GPUS_PER_HOST = 8
MAX_HOSTS = 254 * 254  # 127.0.0.1 .. 127.0.253.254


def host_address(h: int) -> str:
    """The loopback address of host ``h`` (0-based): 127.0.0.1 .. 127.0.0.254, then 127.0.1.1 ..."""
    return f"127.0.{h // 254}.{h % 254 + 1}"


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports free now, bound together then released (one at a time, the kernel
    could hand a port just released out again). Every task gets its own: TensorFlow listens on
    every address, so ``validate`` refuses one port on two loopback addresses of one machine."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < count + 64:  # 1,025 sockets at once pass 1,024
        resource.setrlimit(
            resource.RLIMIT_NOFILE, (min(count + 64, hard) if hard != resource.RLIM_INFINITY else count + 64, hard)
        )
    held = []
    try:
        for _ in range(count):
            s = socket.socket()
            held.append(s)
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in held]
    finally:
        for s in held:
            s.close()


def faults(workers: int, rate_hz: float) -> dict[int, list[str]]:
    """A few scripted faults, each on its own worker: a crash that the restart policy recovers from
    (its first attempt only), a stall, a slow worker. Steps are counted from a role's start."""
    out: dict[int, list[str]] = {}
    if workers > 1:
        out[1] = [f"--crash_at_step={max(1, round(30 * rate_hz))}", "--crash_attempts=1"]
    if workers > 2:
        out[2] = [f"--stall_at_step={max(1, round(45 * rate_hz))}"]
    if workers > 3:
        out[3] = ["--slow=3"]
    return out


def cluster_text(*, workers: int, hosts: int, ps: int, rate_hz: float, with_faults: bool, name: str) -> str:
    """The cluster file (TOML) of the arguments."""
    ports = iter(free_ports(workers + ps))

    def address(h: int) -> str:
        return f"{host_address(h)}:{next(ports)}"

    base = ["{python}", "-u", "sim_trainer.py", f"--rate_hz={rate_hz:g}", "--steps=0"]
    command = ", ".join(f'"{a}"' for a in base)
    ps_job = "".join(
        f"\n[jobs.ps]\ntasks = [{', '.join(f'{chr(34)}{address(p % hosts)}{chr(34)}' for p in range(ps))}]\n"
        for _ in [ps]
        if ps
    )
    scripted = faults(workers, rate_hz) if with_faults else {}
    rows = []
    for i in range(workers):
        row = f'address = "{address(i % hosts)}", gpus = [{(i // hosts) % GPUS_PER_HOST}]'
        if i in scripted:
            row += ", command = [" + ", ".join(f'"{a}"' for a in base + scripted[i]) + "]"
        rows.append(f"{{ {row} }}")
    worker_tasks = ",\n  ".join(rows)
    restart = (
        '\nrestart = { policy = "OnFailure", max_restarts = 3, backoff_s = 1.0, backoff_max_s = 10.0 }'
        if with_faults
        else ""
    )
    stall = "stall_after_s = 30\n" if with_faults else ""
    return f"""# Simulated: launch with TOWERDECK_SIMULATE=1 (docs/guide/simulation.md). Written by scripts/sim_cluster.py.
name = "{name}"
strategy = "between_graph"
workdir = "{ROOT / "resources" / "trainers"}"
command = [{command}]
stop_grace_s = 3
{stall}{ps_job}
[jobs.worker]
tasks = [
  {worker_tasks},
]{restart}
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog="Example: python scripts/sim_cluster.py --workers 256 sim256.toml"
    )
    parser.add_argument("--workers", type=int, default=256, help="worker tasks (default 256)")
    parser.add_argument(
        "--hosts",
        type=int,
        default=None,
        help=f"loopback hosts, one agent each (default: workers / {WORKERS_PER_HOST})",
    )
    parser.add_argument("--ps", type=int, default=1, help="parameter-server tasks (default 1)")
    parser.add_argument("--rate-hz", type=float, default=10.0, help="step lines a second per worker (default 10)")
    parser.add_argument(
        "--faults", action="store_true", help="a crash that restarts, a stall and a slow worker (workers 1, 2, 3)"
    )
    parser.add_argument("--name", default=None, help="the cluster's name (default sim-WORKERS)")
    parser.add_argument("out", metavar="OUT.toml", help="the cluster file to write")
    args = parser.parse_args(argv)
    hosts = args.hosts if args.hosts is not None else max(1, math.ceil(args.workers / WORKERS_PER_HOST))
    problems = [
        "--workers must be 1 or more" if args.workers < 1 else "",
        "--ps must be 0 or more" if args.ps < 0 else "",
        f"--hosts must be from 1 to {MAX_HOSTS}" if not 1 <= hosts <= MAX_HOSTS else "",
        "--rate-hz must be above 0" if not args.rate_hz > 0 else "",
    ]
    for problem in filter(None, problems):
        parser.error(problem)
    text = cluster_text(
        workers=args.workers,
        hosts=hosts,
        ps=args.ps,
        rate_hz=args.rate_hz,
        with_faults=args.faults,
        name=args.name or f"sim-{args.workers}",
    )
    try:
        Path(args.out).write_text(text, encoding="utf-8")
    except OSError as exc:
        print(f"sim_cluster.py: cannot write {args.out}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(f"{args.out}: {args.ps} ps + {args.workers} simulated workers on {hosts} loopback hosts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
