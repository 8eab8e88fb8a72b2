"""``runs tensorboard RUN``: the run's event files in the pinned TensorBoard, on 127.0.0.1, until
Ctrl-C, SIGTERM or SIGHUP (:mod:`core.run.tensorboard`); nothing is left running after."""

from __future__ import annotations

import argparse
import contextlib
import threading
import webbrowser
from typing import TextIO

from core.cli.exits import EXIT_FAILED, EXIT_OK, EXIT_USAGE, resolve_run
from core.cli.interrupts import on_signals
from core.run.rundir import SPEC_FILE, read_run_spec
from core.textsafe import terminal


def cmd_runs_tensorboard(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from core.run.tensorboard import TensorBoardError, start

    if args.run is None:
        print("runs tensorboard: name the run, e.g. `runs tensorboard latest`", file=err)
        return EXIT_USAGE
    path = resolve_run(args.run, args.root, err)
    if path is None:
        return EXIT_USAGE
    spec, problems = read_run_spec(path)
    if spec is None:
        first = problems[0].format() if problems else "unreadable"
        print(terminal(f"{path / SPEC_FILE}: {first}"), file=err)
        return EXIT_USAGE
    stop = threading.Event()
    # Ctrl-C, SIGTERM and SIGHUP (a closed terminal) stop it here, folder included; a SIGKILL
    # takes TensorBoard down with it, and the next start removes the folder (core/run/tensorboard.py).
    with on_signals(lambda signum: stop.set()):
        try:
            if args.profile:  # core/profiling/tensorboard.py: the profiler environment's TensorBoard
                from core.profiling.tensorboard import start_profiles

                server = start_profiles(path)
            else:
                server = start(path, spec)
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
