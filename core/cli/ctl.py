"""``ctl RUN ACTION``: control a running launch through its control socket (stop, kill, restart or
signal roles, detach, profile, explain a slow worker, kill random roles to prove recovery) and print
its status; list its checkpoints (read from the checkpoint directory itself, so a run that is over
lists them too)."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any, TextIO

from core.agent.processes import SIGNAL_HINT, signal_number
from core.cli.chaos import add_chaos_arguments, cmd_chaos
from core.cli.exits import EXIT_FAILED, EXIT_OK, EXIT_USAGE, resolve_run
from core.cli.profile import add_profile_arguments, cmd_profile, cmd_why, usage_problem
from core.diagnosis.wording import waiting_lines
from core.run import control, rundir
from core.run.checkpoints import read_run_checkpoints
from core.run.status import RoleState, RoleStatus
from core.textsafe import terminal
from core.views.checkpoints import size_text
from core.views.conditions import trouble_text
from core.views.slurm_text import slurm_lines


def add_parser(sub: Any) -> None:
    """The ``ctl`` subcommand's arguments."""
    p = sub.add_parser("ctl", help="stop, kill or restart roles of a running launch")
    p.set_defaults(handler=cmd_ctl)
    p.add_argument("run", help="a run directory, a run id from `runs`, or 'latest'")
    p.add_argument(
        "action",
        choices=(
            "status",
            "stop",
            "kill",
            "restart",
            "signal",
            "stop-all",
            "kill-all",
            "restart-all",
            "detach",
            "profile",
            "why",
            "chaos",
            "checkpoints",
        ),
    )
    p.add_argument("role", nargs="?", help="the role, e.g. worker:1 (for stop, kill, restart, signal, profile, why)")
    p.add_argument("signal", nargs="?", help="for signal: the signal name, e.g. STOP or CONT")
    p.add_argument("more_roles", nargs="*", metavar="ROLE", help="for profile: more roles")
    add_profile_arguments(p)  # core/cli/profile.py
    add_chaos_arguments(p)  # core/cli/chaos.py
    p.add_argument("--json", action="store_true", help="for status and checkpoints: print JSON")
    p.add_argument("--root", type=Path, help=argparse.SUPPRESS)


def cmd_ctl(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.action in ("profile", "why") and (problem := usage_problem(args)):
        print(problem, file=err)
        return EXIT_USAGE
    path = resolve_run(args.run, args.root, err)
    if path is None:
        return EXIT_USAGE
    if args.action == "checkpoints":  # read from the run's files: a run that is over has them too
        return print_checkpoints(path, out, err, as_json=args.json)
    try:
        info = rundir.load_run_json(path)
    except (OSError, ValueError) as exc:
        print(terminal(f"run: cannot read {path / rundir.RUN_FILE}: {exc}; nothing to control"), file=err)
        return EXIT_USAGE
    action = args.action.replace("-", "_")
    if action in ("stop", "kill", "restart", "signal") and not args.role:
        print(terminal(f"{args.action}: name the role, e.g. `ctl {args.run} {args.action} worker:0`"), file=err)
        return EXIT_USAGE
    if action == "signal" and (not args.signal or signal_number(args.signal) is None):
        print(f"signal: {args.signal!r} is not a signal; {SIGNAL_HINT}", file=err)
        return EXIT_USAGE
    sock = info.get("control_socket")
    payload: dict[str, Any] = {"action": action, "role": args.role, "signal": args.signal}
    try:
        if not sock:
            raise OSError("no control socket recorded")
        if action == "profile":
            return cmd_profile(args, path, Path(str(sock)), out=out, err=err)
        if action == "why":
            return cmd_why(args, path, Path(str(sock)), out=out, err=err)
        if action == "chaos":
            return cmd_chaos(args, Path(str(sock)), out=out, err=err)
        reply = control.request(Path(str(sock)), payload)
    except control.NotRunning:
        print(terminal(_not_running(info)), file=err)  # run.json may have been edited by anyone
        return EXIT_FAILED
    except control.NoAnswer as exc:  # it may act yet: say where to look
        print(terminal(f"run {info.get('id')}: {exc}; see what it did with `ctl {args.run} status`"), file=err)
        return EXIT_FAILED
    except control.ControlError as exc:  # a reply too long or garbled, a socket not ours to reach
        print(terminal(f"run {info.get('id')}: {exc}"), file=err)
        return EXIT_FAILED
    except (OSError, ValueError):  # no socket recorded; ValueError: a hand-edited socket path with a NUL in it
        print(terminal(_not_running(info)), file=err)  # run.json may have been edited by anyone
        return EXIT_FAILED
    if not reply.get("ok"):
        print(terminal(f"refused: {reply.get('error')}"), file=err)
        return EXIT_FAILED
    if action == "status" and args.json:
        print(json.dumps(reply, indent=2), file=out)
    elif action == "status":
        return print_status(reply, out, err)
    else:
        print(terminal(reply.get("message", "ok")), file=out)
    return EXIT_OK


def print_checkpoints(path: Path, out: TextIO, err: TextIO, *, as_json: bool) -> int:
    """``ctl RUN checkpoints``: where the run's checkpoints are, and a line per checkpoint (step,
    when saved, size), the one TensorFlow would restore marked; ``--json``: the same as JSON."""
    try:
        found = read_run_checkpoints(path)
    except ValueError as exc:
        print(terminal(f"checkpoints: {exc}"), file=err)
        return EXIT_FAILED
    if as_json:
        print(json.dumps(found.to_json(), indent=2), file=out)
        return EXIT_OK
    listing = found.listing
    if found.source is None or listing is None:
        print(terminal(f"no checkpoint directory found ({found.looked})"), file=err)
        return EXIT_OK
    # Paths and names come from the cluster file and the trainers' state file: escaped.
    print(terminal(f"checkpoints in {found.source.words()}"), file=out)
    if listing.problem:
        print(terminal(f"problem: {listing.problem}"), file=out)
    if not listing.checkpoints:
        print("  none yet", file=out)
    for checkpoint in listing.checkpoints:
        mark = "*" if checkpoint.name == listing.latest else " "
        step = f"{checkpoint.step:,}" if checkpoint.step is not None else "?"
        saved = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(checkpoint.saved_at)) if checkpoint.saved_at else "?"
        print(
            terminal(f"{mark} {checkpoint.name:<24} step {step:>10}  {saved}  {size_text(checkpoint.size_bytes)}"),
            file=out,
        )
    if listing.latest:
        print(terminal(f"* the one TensorFlow restores: {listing.latest}"), file=out)
    return EXIT_OK


def _not_running(info: dict[str, Any]) -> str:
    state, result = info.get("state"), info.get("result")
    return f"run {info.get('id')} is not running (state: {state}, result: {result}); nothing to control"


def print_status(reply: dict[str, Any], out: TextIO, err: TextIO) -> int:
    """The control socket's ``status`` reply as ``ctl status`` prints it: the cluster's phase, a line
    per role (read through :meth:`RoleStatus.from_json`), why a role waits, the hosts, Slurm."""
    # Details, reasons and last lines carry trainers' and hosts' words: every line is escaped.
    print(
        terminal(
            f"cluster {reply['phase']}" + (f" ({reply['result']}: {reply['reason']})" if reply.get("result") else "")
        ),
        file=out,
    )
    if reply.get("recovery"):  # under way, or how the last one ended
        print(terminal(str(reply["recovery"])), file=out)
    try:
        # last_lines rides along in the reply (it is no RoleStatus field): a failed role's last output.
        roles = [(RoleStatus.from_json(r), r.get("last_lines") or []) for r in reply.get("roles") or []]
    except ValueError as exc:
        print(terminal(f"the run's control socket sent a status this TowerDeck cannot read: {exc}"), file=err)
        return EXIT_FAILED
    now = time.time()
    for role, last_lines in roles:
        pid = role.pid if role.pid is not None else "-"
        stalled = f"  STALLED for {role.stalled_for_s or 0:.0f} s" if role.stalled else ""
        # A running role's detail is its pid ("pid 3486"): said once, in the pid column.
        detail = "" if role.detail == f"pid {role.pid}" else role.detail
        state = "CRASH-LOOP" if role.crash_looping else str(role.state)
        print(
            terminal(
                f"  {role.role:<12} {state:<10} pid {pid:<8} restarts {role.restarts}  {detail}{stalled}".rstrip()
            ),
            file=out,
        )
        if trouble := trouble_text(role, now):  # a crash loop or a failure, with its exit and error line
            print(terminal(f"  {'':<12} {trouble}"), file=out)
        if role.waiting_for:  # the diagnosis of a wait: for whom, why, the fix (core/diagnosis)
            waiting = {"waiting_for": role.waiting_for, "message": role.waiting_message, "fix": role.waiting_fix}
            for line in waiting_lines("", waiting):
                print(terminal(f"  {line}"), file=out)
        if role.state in (RoleState.FAILED, RoleState.BACKOFF):
            for line in last_lines[-3:]:
                print(f"  {'':<12} | {terminal(line)}", file=out)
    for host, h in (reply.get("hosts") or {}).items():
        print(terminal(f"  host {host:<16} {h.get('state')}: {h.get('reason', '')}"), file=out)
    if reply.get("slurm"):
        for line in slurm_lines({**reply["slurm"], "steps": None}):
            print(terminal(f"  {line}"), file=out)
    return EXIT_OK
