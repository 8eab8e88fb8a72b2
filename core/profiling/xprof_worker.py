"""Runs inside the profiler environment (.venv-prof: xprof, no TensorFlow, no TowerDeck imports).

TowerDeck starts this file as a subprocess, so a crash in xprof's native code ends this process,
never the window or the launch. Two commands, each printing one JSON object on stdout:

    capture ADDRESS LOGDIR DURATION_MS HOST_TRACER_LEVEL
        asks the TensorFlow server at ADDRESS (host:port) for a trace; the *role* writes
        LOGDIR/plugins/profile/<session>/<host>_<port>.xplane.pb. {"ok": true} or
        {"ok": false, "error": "..."}; xprof prints the real cause of a failure on stderr only,
        which the caller reads.
    tables XPLANE...
        {"<xplane>": {"overview_page": [...], "framework_op_stats": [...]}, ...}: xprof's tool
        data (Google Charts data tables), computed afresh (``use_saved_result`` False: the saved
        result is cached beside the file and was returned for every role of a capture); a file
        that is no readable XSpace gets {"unreadable": "why"} instead.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
from typing import Any

TOOLS = ("overview_page", "framework_op_stats")
PARENT_ENV = "TOWERDECK_PROFILER_PARENT"  # the pid of the TowerDeck process that started this one
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent() -> None:
    """Be killed when the TowerDeck process that started this one dies, even by SIGKILL: a killed
    ``ctl profile`` must not leave a tracer holding the role's one profiling session (the role
    ends the session when this client goes). Linux's parent-death signal; a parent that died
    before it was set is caught by this process's new parent id."""
    parent = os.environ.get(PARENT_ENV, "")
    if not parent.isdigit():
        return  # started by hand, not by TowerDeck
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return  # not Linux: no such call; the caller's own cleanup still kills it on Ctrl-C
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != int(parent):
        os._exit(1)  # the parent is gone already: nobody waits for a trace


def capture(address: str, logdir: str, duration_ms: int, *, host_tracer_level: int) -> dict[str, Any]:
    from xprof.convert import _pywrap_profiler_plugin as plugin

    options = {
        "host_tracer_level": host_tracer_level,
        "device_tracer_level": 1,
        "python_tracer_level": 0,
        "delay_ms": 0,
    }
    try:
        # One attempt: the caller's hard time limit covers the whole call.
        plugin.trace(address, logdir, "", True, duration_ms, 1, options)
    except Exception as exc:  # xprof raises one generic error; the cause is on stderr
        return {"ok": False, "error": str(exc)}
    return {"ok": True}


def unreadable(path: str) -> str | None:
    """Why ``path`` is no XSpace to summarise (xprof's tools read a missing, truncated or foreign
    file as an empty profile, the cause on stderr only), or None."""
    from xprof.profile_data import ProfileData

    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return "is missing"
    except OSError as exc:
        return f"is unreadable: {exc.strerror or exc}"
    try:
        with ProfileData.from_serialized_xspace(data) as space:
            planes = len(space.planes)
    except ValueError:
        return "is not a profile xprof can read (truncated, or another kind of file)"
    return None if planes else "holds no profile data (an empty XSpace)"


def tables(paths: list[str]) -> dict[str, Any]:
    from xprof.convert import raw_to_tool_data

    result: dict[str, Any] = {}
    for path in paths:
        problem = unreadable(path)
        if problem:
            result[path] = {"unreadable": problem}
            continue
        entry: dict[str, Any] = {}
        for tool in TOOLS:
            try:
                data, _ = raw_to_tool_data.xspace_to_tool_data([path], tool, {"use_saved_result": False})
                entry[tool] = json.loads(data) if data else None
            except Exception as exc:  # one unreadable file or tool is reported, the rest still come
                entry[tool] = None
                entry.setdefault("errors", []).append(f"{tool}: {exc}")
        result[path] = entry
    return result


def main(argv: list[str]) -> int:
    die_with_parent()
    if len(argv) == 5 and argv[0] == "capture":
        reply = capture(argv[1], argv[2], int(argv[3]), host_tracer_level=int(argv[4]))
    elif len(argv) >= 2 and argv[0] == "tables":
        reply = tables(argv[1:])
    else:
        print(json.dumps({"ok": False, "error": f"usage: capture ADDR LOGDIR MS LEVEL | tables XPLANE...; got {argv}"}))
        return 2
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
