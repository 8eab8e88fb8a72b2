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
from core.cli.helptree import add_topic_help, command
from core.cli.profile import add_profile_arguments, cmd_profile, cmd_why, usage_problem
from core.cli.progname import PROG as BASE_PROG
from core.diagnosis.wording import waiting_lines
from core.run import control, rundir
from core.run.checkpoints import read_run_checkpoints
from core.run.status import RoleState, RoleStatus
from core.textsafe import terminal
from core.views.checkpoints import size_text
from core.views.conditions import trouble_text
from core.views.slurm_text import slurm_lines

PROG = f"{BASE_PROG} ctl"
RUN_HELP = "a run directory, a run id from `runs`, or 'latest'"
ROLE_HELP = "the role: worker:1, worker/1 or /job:worker/task:1"


def add_parser(sub: Any) -> None:
    """``ctl RUN ACTION``: a subcommand per action, each with its own arguments, help and examples.
    The run comes first, as every existing spelling has it (``ctl latest stop worker:1``)."""
    p = command(
        sub,
        "ctl",
        summary="control a running launch: status, stop, kill or restart roles, profile, why, detach",
        description="Control a run that a `launch`, `attach` or window still runs, through its control socket:\n"
        "print its status, stop, kill, restart or signal one role or the whole cluster, detach from it,\n"
        "profile roles, explain a slow worker, or kill random roles to prove recovery. `checkpoints`\n"
        "reads the run's files, so it works on a run that is over too.\n"
        "\n"
        f"RUN is {RUN_HELP}.\n"
        f"`{PROG} RUN ACTION --help` (or `{PROG} ACTION --help`) prints an action's own\n"
        "options and examples.",
        examples=(
            ("the last run's roles", f"{PROG} latest status"),
            ("stop one worker; the others go on", f"{PROG} latest stop worker:1"),
            ("stop the whole cluster", f"{PROG} latest stop-all"),
            ("why is worker 3 slower than the others?", f"{PROG} latest why worker:3"),
        ),
        add_help=False,
    )
    actions = add_topic_help(p, key="run")  # `ctl why --help`: why's help, the run not named yet
    p.set_defaults(handler=cmd_ctl, role=None, signal=None, json=False)
    p.add_argument("run", metavar="RUN", help=RUN_HELP)
    p.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    sub_actions = p.add_subparsers(dest="action", metavar="ACTION", required=True, title="actions")

    def action(name: str, summary: str, description: str, *examples: tuple[str, str]) -> argparse.ArgumentParser:
        a = command(sub_actions, name, summary=summary, description=description, examples=examples)
        a.prog = f"{PROG} RUN {name}"  # argparse's would read "ctl run NAME"
        # --root after the action too; SUPPRESS keeps the value given before it.
        a.add_argument("--root", type=Path, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        actions[name] = a
        return a

    a = action(
        "status",
        "each role's state, pid, restarts; why a role waits; the hosts",
        "Print the cluster's phase and a line per role: state, pid, restarts, what it waits for (and the\n"
        "fix), a failed role's last lines; then the hosts and, on Slurm, the allocation.",
        ("the last run", f"{PROG} latest status"),
        ("as JSON, for a script", f"{PROG} latest status --json"),
    )
    a.add_argument("--json", action="store_true", help="print the control socket's reply as JSON")
    for name, verb, what in (
        ("stop", "stop", "SIGTERM, then SIGKILL after the cluster's stop_grace_s"),
        ("kill", "kill", "SIGKILL at once"),
        ("restart", "restart", "stopped, then started again as a new attempt"),
    ):
        a = action(
            name,
            f"{verb} one role while the others go on",
            f"{verb.capitalize()} one role ({what}); the other roles go on.",
            (f"{verb} worker 1", f"{PROG} latest {name} worker:1"),
        )
        a.add_argument("role", metavar="ROLE", help=ROLE_HELP)
    a = action(
        "signal",
        "send a signal to one role's process group",
        "Send a signal to one role's process group, e.g. STOP to pause it and CONT to resume it.",
        ("pause worker 0, then resume it", f"{PROG} latest signal worker:0 STOP"),
        ("", f"{PROG} latest signal worker:0 CONT"),
    )
    a.add_argument("role", metavar="ROLE", help=ROLE_HELP)
    a.add_argument("signal", metavar="SIGNAL", help="a signal name or number: STOP, CONT, INT, TERM, USR1 ...")
    for name, verb in (("stop-all", "stop"), ("kill-all", "kill"), ("restart-all", "restart")):
        action(
            name,
            f"{verb} every role of the cluster",
            f"{verb.capitalize()} every role of the cluster.",
            (f"{verb} the last run's cluster", f"{PROG} latest {name}"),
        )
    action(
        "detach",
        "end the launch but leave the cluster running",
        "End the launch (or attach) that controls the run, and leave its roles running; it prints how\n"
        "to take control again (`attach RUN`).",
        ("leave the last run running without its launcher", f"{PROG} latest detach"),
        ("take control again later", f"{BASE_PROG} attach latest"),
    )
    a = action(
        "profile",
        "capture TensorFlow's profiler on running roles and summarise it",
        "Capture TensorFlow's profiler on running roles (here, on SSH hosts, on Slurm nodes) into\n"
        "RUN/profiles/<time>/ and print their summaries side by side: steps, breakdown, bottleneck, top ops.",
        ("two workers for 2 s", f"{PROG} latest profile worker:0 worker:1"),
        ("every worker, step times only (a small file)", f"{PROG} latest profile --workers --light"),
    )
    a.add_argument("names", nargs="*", metavar="ROLE", help="the roles to capture (or --workers, --all)")
    add_profile_arguments(a, which_roles=True)  # core/cli/profile.py
    a = action(
        "why",
        "say why a worker is slower than the others",
        "Profile the straggler (the worker named, else the slowest) beside the median worker and say in\n"
        "one sentence, with the evidence, why it is slower.",
        ("the slowest worker", f"{PROG} latest why"),
        ("worker 3, traced for 5 s", f"{PROG} latest why worker:3 --seconds 5"),
    )
    a.add_argument("role", nargs="?", metavar="ROLE", help="the worker to explain (default: the slowest)")
    add_profile_arguments(a, which_roles=False)  # core/cli/profile.py
    a = action(
        "chaos",
        "kill random roles one at a time and time each recovery",
        "Kill random running roles one at a time (through the control socket, as the OOM killer would),\n"
        "wait until the cluster is whole again, and print each recovery's time and a summary.\n"
        "Exit 1 when one was not recovered within --recover-within.",
        ("one kill of a random worker", f"{PROG} latest chaos --roles worker --every 0"),
        ("three kills a minute apart, repeatable", f"{PROG} latest chaos --count 3 --every 60 --seed 7"),
    )
    add_chaos_arguments(a)  # core/cli/chaos.py
    a = action(
        "checkpoints",
        "list the run's checkpoints (a run that is over too)",
        "List the run's checkpoints: step, time, size, the one TensorFlow would restore marked; read\n"
        "from the checkpoint directory, so a run that is over lists them too.",
        ("the last run's checkpoints", f"{PROG} latest checkpoints"),
        ("as JSON", f"{PROG} latest checkpoints --json"),
    )
    a.add_argument("--json", action="store_true", help="print JSON")


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
