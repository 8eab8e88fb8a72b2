"""``python main.py gpus [CLUSTER] [--hosts H,...] [--watch] [--json]``: which GPUs are free?

Every GPU of this machine, or of each host of a cluster file (over the agent's SSH path), with
its figures and the processes on it (user, pid, memory, and the TowerDeck run and role when it is
one of ours). ``--watch`` redraws in place every ``--interval`` seconds until Ctrl-C (exit 0).
Exit codes: 0 every host answered (with or without GPUs), 1 a host could not be queried, 2 bad input,
130 a one-shot look stopped by Ctrl-C, SIGTERM or SIGHUP before it was shown.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import signal
import time
from pathlib import Path
from typing import Any, TextIO

from core.cli.exits import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from core.cli.helptree import command
from core.cli.interrupts import Interrupted, raising_on_signals
from core.cli.progname import PROG
from core.cluster.spec import ClusterSpec
from core.preflight.gpus import GIB, GpuTarget, HostFeed, HostGpus, TargetError, new_feeds, slurm_targets, targets_for
from core.run.journal import json_line
from core.textsafe import terminal

CLEAR = "\x1b[H\x1b[2J"


def add_parser(sub: Any) -> None:
    """Register ``gpus`` on the CLI's sub-command parser."""
    p = command(
        sub,
        "gpus",
        summary="every GPU here or on a cluster's hosts: figures, processes, TowerDeck roles",
        description="Print every GPU of this machine, of a cluster file's hosts (over SSH) or of a Slurm job's nodes:\n"
        "utilization, memory, temperature, power, the processes on it and which TowerDeck role each is.\n"
        "Before a launch: which GPUs are free.",
        examples=(
            ("this machine's GPUs", f"{PROG} gpus"),
            ("every host of a cluster, refreshed until Ctrl-C", f"{PROG} gpus cluster.toml --watch"),
            ("two hosts over SSH", f"{PROG} gpus --hosts gpu1,user@gpu2"),
        ),
    )
    p.set_defaults(handler=cmd_gpus)
    p.add_argument("file", type=Path, nargs="?", help="a cluster file: look at its hosts (default: this machine)")
    p.add_argument(
        "--hosts", metavar="H,...", help="these hosts instead: the cluster's host names, SSH destinations, or local"
    )
    p.add_argument(
        "--python", help="the python to run on hosts given with --hosts (default: the cluster's, else python3)"
    )
    p.add_argument("--slurm-job", metavar="JOBID", help="the nodes of this running Slurm job (srun steps into it)")
    p.add_argument("--watch", action="store_true", help="refresh in place until Ctrl-C, like nvidia-smi -l")
    p.add_argument("--interval", type=float, default=2.0, metavar="SECONDS", help="with --watch (default 2)")
    p.add_argument("--count", type=int, default=0, help="with --watch: stop after this many refreshes (0: never)")
    p.add_argument("--timeout", type=float, default=20.0, metavar="SECONDS", help="per host (default 20)")
    p.add_argument("--json", action="store_true", help="print JSON (with --watch: one line per refresh)")


def cmd_gpus(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    spec = None
    if args.file is not None:
        from core.cli.exits import print_problems
        from core.cluster.problems import ERROR
        from core.cluster.spec import load

        # Only the hosts matter: the cluster may well be running (its ports busy).
        spec, problems = load(args.file)
        errors = [p for p in problems if p.severity == ERROR]
        if spec is None or errors:
            print_problems(errors or problems, str(args.file), err)
            return EXIT_USAGE
    if args.interval <= 0 or args.timeout <= 0:
        print("error: --interval and --timeout must be more than 0 seconds", file=err)
        return EXIT_USAGE
    hosts = [h.strip() for h in (args.hosts or "").split(",") if h.strip()]
    if args.hosts is not None and not hosts:  # not "no --hosts": that would look at this machine
        print(
            f"error: --hosts {args.hosts!r} names no host; give host names of the cluster file, user@host[:port], "
            "an ssh alias or local, separated by commas (or leave --hosts out)",
            file=err,
        )
        return EXIT_USAGE
    if args.slurm_job is not None:
        return _slurm(args, spec, out=out, err=err)
    try:
        targets = targets_for(spec, hosts, args.python)
    except TargetError as exc:
        print(terminal(f"error: --hosts: {exc}"), file=err)
        print("    fix: give host names of the cluster file, user@host[:port], an ssh alias, or local", file=err)
        return EXIT_USAGE
    return _show(targets, args, spec, out=out, err=err)


def _slurm(args: argparse.Namespace, spec: ClusterSpec | None, *, out: TextIO, err: TextIO) -> int:
    """``--slurm-job J``: every node of the allocation, through Slurm (its [slurm] login if the
    cluster file names one), each queried by an ``srun --overlap`` step."""
    from core.slurm.client import SlurmClient

    if not args.slurm_job.isdigit():
        print(f"error: --slurm-job: {args.slurm_job!r} is not a Slurm job id", file=err)
        print("    fix: give the number squeue shows in its JOBID column", file=err)
        return EXIT_USAGE
    if spec is not None and spec.slurm is not None:
        from core.slurm.client import slurm_client

        client = slurm_client(spec)
    else:
        client = SlurmClient()
    try:
        targets = slurm_targets(client, args.slurm_job)
    except TargetError as exc:
        print(terminal(f"error: --slurm-job: {exc}"), file=err)
        return EXIT_FAILED
    return _show(targets, args, spec, out=out, err=err)


def _show(
    targets: list[GpuTarget], args: argparse.Namespace, spec: ClusterSpec | None, *, out: TextIO, err: TextIO
) -> int:
    from core.remote.ssh import ssh_config_path

    # SIGTERM and SIGHUP (a closed terminal) unwind like Ctrl-C, so the feeds' ssh and queries
    # are ended here; a SIGKILL leaves that to the kernel (core/run/children.py).
    with raising_on_signals():
        feeds = new_feeds(
            targets, ssh_config_path(spec), every_s=args.interval if args.watch else 0.0, timeout_s=args.timeout
        )
        try:
            for feed in feeds:
                feed.start()  # inside the try: a signal while one starts still says so and ends them
            return _watch(feeds, args, out) if args.watch else _once(feeds, args, out)
        except Interrupted as stop:
            if args.watch:
                return EXIT_OK  # Ctrl-C is how --watch ends
            with contextlib.suppress(OSError):  # the terminal may be gone (SIGHUP)
                print(f"gpus: interrupted ({signal.Signals(stop.signum).name}) before every host answered", file=err)
            return EXIT_INTERRUPTED
        finally:
            for feed in feeds:
                feed.close()


def _once(feeds: list[HostFeed], args: argparse.Namespace, out: TextIO) -> int:
    deadline = time.monotonic() + args.timeout
    for feed in feeds:
        feed.answered.wait(max(0.0, deadline - time.monotonic()))
    results = [feed.latest(waited_s=args.timeout) for feed in feeds]
    out.write(json.dumps(as_json(results), indent=1) + "\n" if args.json else format_hosts(results) + "\n")
    return EXIT_FAILED if any(r.snapshot is None for r in results) else EXIT_OK


def _watch(feeds: list[HostFeed], args: argparse.Namespace, out: TextIO) -> int:
    started = time.monotonic()
    frames = 0
    in_place = not args.json and out.isatty()
    # The first frame waits (up to the timeout) for a first host to answer: the others show
    # "waiting for an answer" until theirs comes, and hold up nobody.
    deadline = started + args.timeout
    while not any(f.answered.is_set() for f in feeds) and time.monotonic() < deadline:
        feeds[0].answered.wait(min(0.05, max(0.0, deadline - time.monotonic())))
    first_frame = time.monotonic()
    while True:
        waited = time.monotonic() - started
        results = [feed.latest(waited_s=None if waited < args.timeout else args.timeout) for feed in feeds]
        if args.json:
            out.write(json_line(as_json(results)))
        else:
            stamp = time.strftime("%Y-%m-%d %H:%M:%S")
            head = f"{stamp}  every {args.interval:g} s, Ctrl-C to stop"
            out.write((CLEAR if in_place else "\n") + head + "\n" + format_hosts(results) + "\n")
        out.flush()
        frames += 1
        if args.count and frames >= args.count:
            return EXIT_OK
        time.sleep(max(0.0, first_frame + frames * args.interval - time.monotonic()))


def as_json(results: list[HostGpus]) -> dict[str, Any]:
    """The ``--json`` document: {"hosts": [{host, destination, error, snapshot}, ...]}."""
    return {"hosts": [dataclasses.asdict(r) for r in results]}


def _num(value: Any, fmt: str, unit: str = "") -> str:
    return "-" if not isinstance(value, (int, float)) else f"{value:{fmt}}{unit}"


def _gib(value: Any) -> str:
    return "-" if not isinstance(value, int) else f"{value / GIB:.1f}"


def format_gpu(gpu: dict[str, Any]) -> list[str]:
    """One GPU's line, then a line per process on it. Names, users, roles and command lines come
    from NVML and the process table: escaped for the terminal before they are cut to width."""
    memory = f"{_gib(gpu.get('memory_used_bytes'))}/{_gib(gpu.get('memory_total_bytes'))} GiB"
    power = f"{_num(gpu.get('power_w'), '.0f')}/{_num(gpu.get('power_limit_w'), '.0f')} W"
    reasons = gpu.get("throttle_reasons")
    throttle = "-" if reasons is None else (",".join(str(r) for r in reasons) or "none")
    lines = [
        f"{terminal(gpu.get('index', '?')):>3}  {terminal(gpu.get('name') or '-')[:24]:<24} "
        f"{terminal(gpu.get('pci_bus_id') or '-'):<16} "
        f"{_num(gpu.get('utilization_gpu_percent'), '.0f', '%'):>5} {memory:>16} "
        f"{_num(gpu.get('temperature_c'), '.0f', 'C'):>5} {power:>11}  {terminal(throttle)}"
    ]
    processes = gpu.get("processes") or []
    for proc in processes:
        ours = f"run {proc.get('run') or '?'} role {proc['role']}" if proc.get("role") else "not TowerDeck's"
        used = proc.get("used_memory_bytes")
        lines.append(
            terminal(f"       pid {proc.get('pid')}  {proc.get('user') or '?'}  {_gib(used)} GiB  {ours}  ")
            + terminal(proc.get("command") or "")[:60]
        )
    if not processes:
        lines.append("       no processes")
    return lines


def format_hosts(results: list[HostGpus]) -> str:
    """The plain-text view: a line per host without GPUs (or unreachable), a table per host with."""
    lines: list[str] = []
    for result in results:
        where = f"{result.host} ({result.destination})" if result.destination != result.host else result.host
        snapshot = result.snapshot
        if snapshot is None:  # a host's own error words (its stderr over SSH): escaped
            lines.append(terminal(f"{where}: {result.error}"))
            continue
        if not result.gpus:
            lines.append(terminal(f"{where}: {snapshot.get('status')}"))
            continue
        driver = f", driver {snapshot['driver']}" if snapshot.get("driver") else ""
        lines.append(terminal(f"{where}: {snapshot.get('status')}{driver}"))
        lines.append(
            f"{'GPU':>3}  {'NAME':<24} {'BUS ID':<16} {'UTIL':>5} {'MEMORY':>16} {'TEMP':>5} {'POWER':>11}  THROTTLE"
        )
        for gpu in result.gpus:
            lines += format_gpu(gpu)
    return "\n".join(lines)
