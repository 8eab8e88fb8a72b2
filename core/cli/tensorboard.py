"""``runs tensorboard RUN [RUN ...]``: the runs' event files in one pinned TensorBoard, on
127.0.0.1, each role named by role (``worker-0``), or with several runs by run and role
(``<run name>/worker-0``, the runs overlaid), until Ctrl-C, SIGTERM or SIGHUP
(:mod:`core.run.tensorboard`); nothing is left running after."""

from __future__ import annotations

import argparse
import contextlib
import threading
import webbrowser
from pathlib import Path
from typing import TextIO

from core.cli.exits import EXIT_FAILED, EXIT_OK, EXIT_USAGE, resolve_run
from core.cli.interrupts import on_signals
from core.cluster.spec import ClusterSpec
from core.run.rundir import SPEC_FILE, read_run_spec
from core.textsafe import terminal


def _runs(names: list[str], args: argparse.Namespace, err: TextIO) -> list[tuple[Path, ClusterSpec]] | None:
    """Each named run's directory and spec, or None after one line saying which cannot be read."""
    runs: list[tuple[Path, ClusterSpec]] = []
    for name in names:
        path = resolve_run(name, args.root, err)
        if path is None:
            return None
        spec, problems = read_run_spec(path)
        if spec is None:
            first = problems[0].format() if problems else "unreadable"
            print(terminal(f"{path / SPEC_FILE}: {first}"), file=err)
            return None
        if all(path != seen for seen, _ in runs):  # a run named twice is shown once
            runs.append((path, spec))
    return runs


def cmd_runs_tensorboard(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from core.run.tensorboard import TensorBoardError, start_runs

    names: list[str] = list(args.run or [])
    if not names:
        print("runs tensorboard: name the run, e.g. `runs tensorboard latest` (or several runs)", file=err)
        return EXIT_USAGE
    if args.profile and len(names) > 1:
        print("runs tensorboard --profile: name one run, e.g. `runs tensorboard latest --profile`", file=err)
        return EXIT_USAGE
    runs = _runs(names, args, err)
    if runs is None:
        return EXIT_USAGE
    path = runs[0][0]
    stop = threading.Event()
    # Ctrl-C, SIGTERM and SIGHUP (a closed terminal) stop it here, folder included; a SIGKILL
    # takes TensorBoard down with it, and the next start removes the folder (core/run/tensorboard.py).
    with on_signals(lambda signum: stop.set()):
        try:
            if args.profile:  # core/profiling/tensorboard.py: the profiler environment's TensorBoard
                from core.profiling.tensorboard import start_profiles

                server = start_profiles(path)
            else:
                server = start_runs(runs)
        except TensorBoardError as exc:
            print(terminal(f"tensorboard: {exc}"), file=err)
            return EXIT_FAILED
        try:
            print(terminal(f"TensorBoard on {server.url} (pid {server.pid}): {', '.join(server.dirs.local)}"), file=out)
            for role, why in server.dirs.missing.items():
                print(terminal(f"  not shown: {role} {why}"), file=out)
            print("Ctrl-C stops it", file=out, flush=True)
            if not args.no_browser:
                webbrowser.open(server.url)
            while not stop.wait(0.5):
                if not server.alive():
                    print(terminal("tensorboard exited: " + " | ".join(server.log_tail(3))), file=err)
                    return EXIT_FAILED
        finally:
            server.stop()
        with contextlib.suppress(OSError):  # the terminal may be gone (SIGHUP)
            print("TensorBoard stopped", file=out)
        return EXIT_OK
