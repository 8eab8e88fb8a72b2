"""``ctl RUN chaos``: kill random running roles of a launch, one at a time, and measure how long the
cluster takes to come back, to prove its recovery (``[recovery]``, the jobs' restart policies).

Each round waits ``--every`` seconds after the last kill and until the cluster is whole again (no
recovery under way, every role that ran before the kill running again, the killed role in a new
attempt), then sends ``--signal`` (KILL by default) to one running role of ``--roles`` chosen at
random (``--seed`` repeats a choice). It prints a line per kill and per recovery, and a summary with
the recovery times; it exits 0 when every kill was recovered from, 1 when one was not within
``--recover-within`` seconds or the run ended failed. The signal goes through the control socket, as
``ctl RUN signal`` sends it: the launch sees an exit it did not ask for, as from the OOM killer.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from core.agent.processes import SIGNAL_HINT, signal_number
from core.cli.exits import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from core.run import control
from core.textsafe import terminal

POLL_S = 0.25
Request = Callable[[dict[str, Any]], dict[str, Any]]


def add_chaos_arguments(p: argparse.ArgumentParser) -> None:
    """``ctl RUN chaos``'s options."""
    p.add_argument(
        "--every", type=float, default=30.0, metavar="S", help="seconds between kills, at least (default 30)"
    )
    p.add_argument("--roles", metavar="JOB,...", help="jobs or roles to pick from, e.g. worker,ps:0 (default all)")
    p.add_argument("--signal", dest="chaos_signal", default="KILL", metavar="SIG", help="the signal (default KILL)")
    p.add_argument("--count", type=int, default=1, metavar="N", help="how many kills (default 1)")
    p.add_argument("--seed", type=int, help="the random choice's seed, to repeat a run of chaos")
    p.add_argument(
        "--recover-within", dest="chaos_timeout", type=float, default=300.0, metavar="S",
        help="seconds a recovery may take before chaos calls it failed (default 300)",
    )  # fmt: skip


def chaos_problem(args: argparse.Namespace) -> str | None:
    """A usage problem with ``chaos``'s options, in one line, or None."""
    if signal_number(args.chaos_signal) is None:
        return f"chaos: --signal {args.chaos_signal!r} is not a signal; {SIGNAL_HINT}"
    if args.count < 1:
        return f"chaos: --count must be 1 or more, not {args.count}"
    if not args.every >= 0 or not args.chaos_timeout > 0:  # NaN fails both
        return "chaos: --every must be 0 or more seconds and --recover-within more than 0"
    return None


@dataclass(frozen=True)
class Kill:
    """One kill and how it ended: ``recovered_s`` from the signal to a whole cluster, or None."""

    role: str
    step: int | None
    recovered_s: float | None
    words: str  # the recovery's own words (``recovered: resumed at step ...``), or why not


def _matches(role: dict[str, Any], picks: list[str]) -> bool:
    return not picks or role["role"] in picks or str(role["role"]).partition(":")[0] in picks


def _whole(reply: dict[str, Any], ran: set[str], killed: str, *, attempt: int) -> bool:
    """No recovery under way, every role that ran before the kill running (or done well) again, the
    killed one in a later attempt (a ps killed young stays marked crash-looping for a while: it is
    back all the same)."""
    if reply.get("recovering"):
        return False
    roles = {r["role"]: r for r in reply.get("roles") or []}
    back = all(roles.get(name, {}).get("state") in ("running", "succeeded") for name in ran)
    return back and (roles.get(killed, {}).get("attempt") or 0) > attempt


def run_chaos(
    args: argparse.Namespace, request: Request, out: TextIO, *, clock: Callable[[], float] = time.monotonic
) -> int:
    """The rounds of chaos against a launch reached through ``request`` (a status or signal
    request to its control socket)."""
    rng = random.Random(args.seed)
    picks = [p.strip() for p in (args.roles or "").split(",") if p.strip()]
    sig = str(args.chaos_signal).upper().removeprefix("SIG")
    kills: list[Kill] = []
    last_kill = -float("inf")
    for number in range(1, args.count + 1):
        label = f"chaos {number}/{args.count}"
        reply = request({"action": "status"})
        while reply.get("phase") == "running" and (
            clock() - last_kill < args.every
            or reply.get("recovering")
            or not [r for r in reply.get("roles") or [] if r.get("state") == "running" and _matches(r, picks)]
        ):
            time.sleep(POLL_S)
            reply = request({"action": "status"})
        if reply.get("phase") != "running":
            print(
                terminal(
                    f"{label}: the run is {reply.get('phase')} ({reply.get('result') or 'no result yet'}); chaos ends"
                ),
                file=out,
            )
            return _summary(kills, args.count, out, ended=str(reply.get("result") or ""))
        running = [r for r in reply.get("roles") or [] if r.get("state") == "running"]
        victim = rng.choice([r for r in running if _matches(r, picks)])
        ran = {str(r["role"]) for r in running}
        step = victim.get("step")
        at = f", step {step:,}" if isinstance(step, int) else ""
        answer = request({"action": "signal", "role": victim["role"], "signal": sig})
        last_kill = clock()
        if not answer.get("ok"):
            print(terminal(f"{label}: SIG{sig} {victim['role']} refused: {answer.get('error')}"), file=out)
            kills.append(Kill(str(victim["role"]), step, None, f"refused: {answer.get('error')}"))
            continue
        print(terminal(f"{label}: SIG{sig} {victim['role']} (pid {victim.get('pid')}{at})"), file=out)
        kills.append(
            _await_recovery(args, request, out, victim=victim, ran=ran, since=last_kill, label=label, clock=clock)
        )
        if kills[-1].recovered_s is None:
            break
    return _summary(kills, args.count, out, ended="")


def _await_recovery(
    args: argparse.Namespace,
    request: Request,
    out: TextIO,
    *,
    victim: dict[str, Any],
    ran: set[str],
    since: float,
    label: str,
    clock: Callable[[], float],
) -> Kill:
    role, attempt = str(victim["role"]), int(victim.get("attempt") or 0)
    while clock() - since < args.chaos_timeout:
        reply = request({"action": "status"})
        if reply.get("phase") != "running":
            words = f"the run is {reply.get('phase')} ({reply.get('result')}: {reply.get('reason')})"
            print(terminal(f"{label}: not recovered: {words}"), file=out)
            return Kill(role, victim.get("step"), None, words)
        if _whole(reply, ran, role, attempt=attempt):
            took = clock() - since
            words = str(reply.get("recovery") or f"{role} restarted")
            print(terminal(f"{label}: recovered in {took:.1f} s ({words})"), file=out)
            return Kill(role, victim.get("step"), took, words)
        time.sleep(POLL_S)
    words = f"not whole again within {args.chaos_timeout:g} s"
    print(terminal(f"{label}: not recovered: {words}"), file=out)
    return Kill(role, victim.get("step"), None, words)


def _summary(kills: list[Kill], count: int, out: TextIO, *, ended: str) -> int:
    times = [k.recovered_s for k in kills if k.recovered_s is not None]
    line = f"chaos: {len(kills)} of {count} kills, {len(times)} recovered"
    if times:
        line += f"; recovery time median {statistics.median(times):.1f} s, max {max(times):.1f} s"
    print(terminal(line), file=out)
    if ended == "succeeded" and len(times) == len(kills):
        return EXIT_OK  # training finished before every kill was spent: nothing failed
    return EXIT_OK if len(times) == len(kills) == count else EXIT_FAILED


def cmd_chaos(args: argparse.Namespace, sock: Path, *, out: TextIO, err: TextIO) -> int:
    """``ctl RUN chaos``: see the module docstring."""
    if problem := chaos_problem(args):
        print(terminal(problem), file=err)
        return EXIT_USAGE
    try:
        return run_chaos(args, lambda payload: control.request(sock, payload), out)
    except KeyboardInterrupt:
        print("chaos: interrupted; the roles killed so far are the launch's to recover", file=err)
        return EXIT_FAILED
