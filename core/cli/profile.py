"""The CLI's profiling commands.

``python main.py ctl RUN profile ROLE... | --workers | --all [--seconds N] [--light]`` captures the
roles of a running launch and prints the summary; ``python main.py ctl RUN why [ROLE]`` profiles a
straggler (by default the slowest worker) and the median worker together and says why the one is
slower; ``python main.py profile-summary PATH`` prints the summary of a stored capture (a capture
folder, or a run directory: its latest capture), with the verdict when ``why`` made it. All three
print the capture's one breakdown (:mod:`core.profiling.breakdown`), kept with the capture: the
figures the window's Profile tab shows too.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from core.cli.exits import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from core.cli.helptree import command
from core.cli.progname import PROG
from core.profiling.breakdown import breakdown_after, capture_breakdown
from core.profiling.capture import (
    MAX_SECONDS,
    MAX_TIMEOUT_S,
    MIN_SECONDS,
    Capture,
    capture,
    list_captures,
    select,
)
from core.profiling.env import ProfileError
from core.profiling.files import RECORD_NAME
from core.profiling.summary import format_profiles
from core.profiling.why_record import WhyRecord, load_why
from core.profiling.why_run import WhyAnswer, WhyRefused, why_slow
from core.run import control
from core.run.status import RoleStatus
from core.run.status import agent_hosts as agent_hosts_of
from core.textsafe import terminal

SECONDS_RANGE = f"from {MIN_SECONDS:g} to {MAX_SECONDS:g}"
TIMEOUT_RANGE = f"above 0, at most {MAX_TIMEOUT_S:g}"


def _seconds_in(text: str, low: float, high: float, *, low_included: bool, words: str) -> float:
    """``text`` as a finite number of seconds within [low, high] (or (low, high]); else
    ArgumentTypeError, which argparse prints as one line naming the flag."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    inside = (low <= value if low_included else low < value) and value <= high  # False for nan
    if not inside:
        raise argparse.ArgumentTypeError(f"give a number of seconds {words}, not {text!r}")
    return value


def trace_seconds(text: str) -> float:
    """``--seconds``, at parse time: a finite number from MIN_SECONDS to MAX_SECONDS (xprof refuses
    a trace under a millisecond; a long one grows the role's memory)."""
    return _seconds_in(text, MIN_SECONDS, MAX_SECONDS, low_included=True, words=SECONDS_RANGE)


def timeout_seconds(text: str) -> float:
    """``--timeout``, at parse time: a finite number above 0, at most MAX_TIMEOUT_S."""
    return _seconds_in(text, 0.0, MAX_TIMEOUT_S, low_included=False, words=TIMEOUT_RANGE)


def add_profile_arguments(p: argparse.ArgumentParser, *, which_roles: bool) -> None:
    """The options of ``ctl RUN profile`` and ``ctl RUN why``; ``which_roles``: also profile's
    ``--workers`` and ``--all`` (why picks its two workers itself)."""
    if which_roles:
        p.add_argument("--workers", action="store_true", help="every worker")
        p.add_argument("--all", action="store_true", help="every role")
    p.add_argument(
        "--seconds",
        type=trace_seconds,
        default=2.0,
        help=f"how long to trace, in seconds {SECONDS_RANGE} (default 2)",
    )
    p.add_argument(
        "--light",
        action="store_true",
        help="host_tracer_level=1: step times and a ~2 MB file, no per-op detail",
    )
    p.add_argument(
        "--unsafe",
        action="store_true",
        help="also trace roles known to crash when traced (MultiWorkerMirrored workers but worker:0)",
    )
    p.add_argument(
        "--timeout",
        type=timeout_seconds,
        metavar="SECONDS",
        help=(
            f"give up on a role that has not answered after this long, in seconds {TIMEOUT_RANGE} "
            "and no less than --seconds (default: --seconds + 20, and 60 s more for a role traced by its host's "
            "agent, whose python imports TensorFlow first)"
        ),
    )


def add_summary_parser(sub: Any) -> None:
    p = command(
        sub,
        "profile-summary",
        summary="summarise a stored profile capture (from `ctl RUN profile` or `ctl RUN why`)",
        description="Print the summary of a profile capture kept on disk: steps, breakdown, bottleneck and top ops\n"
        "per role side by side, and the verdict when `ctl RUN why` made it.",
        examples=(
            ("a run's latest capture", f"{PROG} profile-summary RUN"),
            ("one capture", f"{PROG} profile-summary RUN/profiles/20261127-153512"),
        ),
    )
    p.set_defaults(handler=cmd_profile_summary)
    p.add_argument("path", type=Path, help="a capture folder (RUN/profiles/<time>) or a run directory (its latest)")


def usage_problem(args: argparse.Namespace) -> str | None:
    """What the flags' own checks (at parse time) cannot see: one against the other. Asked before
    the run is looked up."""
    if args.timeout is not None and args.timeout < args.seconds:
        return (
            f"--timeout: {args.timeout:g} s would end the {args.seconds:g} s trace (--seconds) before it is done; "
            f"give at least {args.seconds:g}"
        )
    return None


@dataclass(frozen=True)
class _LiveStatus:
    roles: list[RoleStatus]
    agent_hosts: frozenset[str]


def _status(socket_path: Path, err: TextIO) -> _LiveStatus | int:
    """The run's roles and agent hosts, read from its launch; else the exit code, the reason printed."""
    reply = control.request(socket_path, {"action": "status"})  # control.ControlError: the caller says which
    if not reply.get("ok"):
        print(terminal(f"refused: {reply.get('error')}"), file=err)
        return EXIT_FAILED
    try:
        roles = [RoleStatus.from_json(r) for r in reply.get("roles") or []]
    except (ValueError, TypeError, AttributeError) as exc:
        print(terminal(f"the launch's status cannot be read: {exc}"), file=err)
        return EXIT_FAILED
    return _LiveStatus(roles, agent_hosts_of(reply))


def cmd_profile(args: argparse.Namespace, run_path: Path, socket_path: Path, *, out: TextIO, err: TextIO) -> int:
    """``ctl RUN profile ...``: capture, then print the summary. The roles come from the status."""
    names = list(args.names)
    live = _status(socket_path, err)
    if isinstance(live, int):
        return live
    try:
        targets = select(live.roles, names, workers=args.workers, every=args.all, agent_hosts=live.agent_hosts)
    except ProfileError as exc:
        print(terminal(f"profile: {exc}"), file=err)
        return EXIT_USAGE
    try:
        result = capture(
            run_path,
            targets,
            seconds=args.seconds,
            light=args.light,
            timeout_s=args.timeout,
            unsafe=args.unsafe,
            control_socket=socket_path,
            purpose="profile",
            origin="cli",
        )
    except ProfileError as exc:
        print(terminal(f"profile: {exc}"), file=err)
        return EXIT_FAILED
    except OSError as exc:  # the profiler environment cannot be started: not "the run is not running"
        print(terminal(f"profile: {exc}"), file=err)
        return EXIT_FAILED
    return report_capture(result, out, err)


def cmd_why(args: argparse.Namespace, run_path: Path, socket_path: Path, *, out: TextIO, err: TextIO) -> int:
    """``ctl RUN why [ROLE]``: profile the straggler and the median worker together, print both side
    by side, then the likely cause of the difference and its evidence."""
    live = _status(socket_path, err)
    if isinstance(live, int):
        return live
    try:
        answer = why_slow(
            live.roles,
            run_path,
            args.role,
            seconds=args.seconds,
            light=args.light,
            timeout_s=args.timeout,
            unsafe=args.unsafe,
            agent_hosts=live.agent_hosts,
            control_socket=socket_path,
            origin="cli",
        )
    except WhyRefused as exc:
        print(terminal(f"why: {exc}"), file=err)
        return EXIT_USAGE
    except (ProfileError, OSError) as exc:  # OSError: the profiler environment cannot be started
        print(terminal(f"why: {exc}"), file=err)
        return EXIT_FAILED
    for error in answer.failures:
        print(terminal(f"why: {error}"), file=err)
    if answer.capture.problem:
        print(terminal(f"why: {answer.capture.problem}"), file=err)
    if answer.problem:
        print(terminal(f"why: {answer.problem}"), file=err)
    if answer.verdict is None:
        return EXIT_FAILED
    for line in why_lines(answer):
        print(terminal(line), file=out)
    return EXIT_OK


def why_lines(answer: WhyAnswer) -> list[str]:
    """What ``ctl RUN why`` prints of an answer with a verdict: the capture, the two workers side
    by side (the capture's breakdown, the one the verdict was given on), the verdict and its
    evidence."""
    lines = [f"captured {answer.capture.seconds:g} s into {answer.capture.path}", *format_profiles(answer.profiles)]
    if answer.verdict is not None:
        lines += WhyRecord(answer.straggler, answer.median, answer.verdict).lines()
    return lines


def report_capture(result: Capture, out: TextIO, err: TextIO) -> int:
    """What ``ctl RUN profile`` prints of a capture: each role not captured, then the capture's
    breakdown (computed and kept with it); the exit code."""
    failed = [r for r in result.roles if not r.ok]
    for r in failed:
        print(terminal(f"profile: {r.error}"), file=err)
    xplanes = result.xplanes()
    if xplanes:
        sizes = ", ".join(f"{r.role} {r.xplane_bytes / 1e6:.1f} MB" for r in result.roles if r.ok)
        print(terminal(f"captured {result.seconds:g} s into {result.path} ({sizes})"), file=out)
        try:
            found = breakdown_after(result)  # kept with the capture: what profile-summary shows later
        except ProfileError as exc:
            print(terminal(f"profile: captured, but {exc}"), file=err)
            return EXIT_FAILED
        for line in format_profiles(found.profiles if found is not None else ()):
            print(terminal(line), file=out)
        if found is not None and found.problem and not result.problem:
            print(terminal(f"profile: {found.problem}"), file=err)
    if result.problem:
        print(terminal(f"profile: {result.problem}"), file=err)
    return EXIT_FAILED if failed or result.problem else EXIT_OK


def cmd_profile_summary(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    path: Path = args.path
    if not (path / RECORD_NAME).is_file():
        captures = list_captures(path)
        if not captures:
            print(
                terminal(f"profile-summary: {path} holds no profile capture (expected {RECORD_NAME} or profiles/)"),
                file=err,
            )
            return EXIT_USAGE
        path = captures[-1]
    try:
        # A missing or damaged file is said before anything is printed.
        found = capture_breakdown(path)
    except ProfileError as exc:
        print(terminal(f"profile-summary: {exc}"), file=err)
        return EXIT_FAILED
    record = found.record
    if not record.xplanes:
        print(terminal(f"profile-summary: no role was captured in {path} (see {path / RECORD_NAME})"), file=err)
        return EXIT_FAILED
    if found.problem:
        print(terminal(f"profile-summary: {found.problem}"), file=err)
    why = _stored_why(path, err)
    print(terminal(f"profile {path} ({record.describe()}): {', '.join(record.roles)}"), file=out)
    for line in format_profiles(found.profiles):
        print(terminal(line), file=out)
    for line in why.lines() if why is not None else []:
        print(terminal(line), file=out)
    return EXIT_OK


def _stored_why(folder: Path, err: TextIO) -> WhyRecord | None:
    """The verdict kept with the capture (``ctl RUN why``), if any; an unreadable one is said and
    the capture still shown."""
    try:
        return load_why(folder)
    except ProfileError as exc:
        print(terminal(f"profile-summary: {exc}"), file=err)
        return None
