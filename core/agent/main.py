"""The agent's command line: plain (stdin/stdout), ``--serve``, ``--attach``, ``--probe``, ``--free-ports``, ``--gpus``."""

from __future__ import annotations

import argparse
import os
import signal
import sys

from .processes import ignore_here
from .protocol import MAX_PERIOD_S, MIN_PERIOD_S
from .serve import LINGER_S, relay, serve_in_step, start_detached
from .simulate import SIMULATE_VAR
from .supervisor import Agent


def main(argv: list[str] | None = None) -> int:
    """Run the agent as its command line says; returns the exit code."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--gpus"]:  # this machine's GPUs as JSON lines (``python main.py gpus``)
        from .gpuquery import main as gpus_main

        return gpus_main(argv[1:])
    parser = argparse.ArgumentParser(description="TowerDeck host agent (JSON lines on stdin/stdout)")
    parser.add_argument(
        "--on-disconnect",
        choices=("stop", "keep"),
        default="stop",
        help="what to do with the roles when the controller goes away",
    )
    parser.add_argument(
        "--sample-period", type=float, default=1.0, help=f"seconds between samples ({MIN_PERIOD_S} to {MAX_PERIOD_S})"
    )
    parser.add_argument("--serve", metavar="SOCK", help="run detached, serving on this Unix socket, and relay to it")
    parser.add_argument("--attach", metavar="SOCK", help="relay stdin/stdout to the agent serving on this socket")
    parser.add_argument("--log", metavar="FILE", help="with --serve: where the detached agent writes its stderr")
    parser.add_argument(
        "--in-step", action="store_true", help="with --serve: serve in this process, not detached (a Slurm step)"
    )
    parser.add_argument("--linger", type=float, default=LINGER_S, help=argparse.SUPPRESS)
    parser.add_argument(
        "--simulate",
        action="store_true",
        help="simulate the roles instead of starting them (a harness for tests and benchmarks; "
        "as TOWERDECK_SIMULATE=1)",
    )
    parser.add_argument(
        "--probe", metavar="REQUEST", help="run the pre-flight checks of REQUEST (JSON), print one JSON answer, exit"
    )
    parser.add_argument(
        "--free-ports",
        metavar="N",
        help="choose N distinct free TCP ports on this machine, print them as JSON, exit (counted tasks on Slurm)",
    )
    args = parser.parse_args(argv)
    if args.simulate:  # through the environment, so a detached serving agent simulates too
        os.environ[SIMULATE_VAR] = "1"
    if args.free_ports is not None:
        from .freeports import main as free_ports_main

        return free_ports_main([args.free_ports])
    if args.probe is not None:
        from .probe import main as probe_main

        return probe_main([args.probe])
    if args.attach:
        return relay(args.attach)
    if args.serve:
        return serve_in_step(args) if args.in_step else start_detached(args)
    agent = Agent(sys.stdout, args.on_disconnect, args.sample_period)

    def on_term(signum: int, frame: object) -> None:
        agent.shutdown(agent.shutdown_grace_s)

    signal.signal(signal.SIGTERM, on_term)
    ignore_here(signal.SIGINT)
    if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:  # started under nohup: not for the roles
        ignore_here(signal.SIGHUP)
    agent.run(sys.stdin.fileno())
    return 0
