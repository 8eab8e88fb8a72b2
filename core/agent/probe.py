"""The pre-flight probe: what one host can do, checked on that host with the agent's python.

Given a JSON request (working directory, training commands, task ports, a time limit for
importing TensorFlow) it prints one JSON object: the python version, the working directory,
for each command whether it is found, whether its script exists and (for a python) which
TensorFlow it imports and which of the script's module-level imports it cannot find, whether each
port is free, and whether NVML answers. The controller
turns it into a table (core/preflight/runner.py).

Standard library only, and no import from the rest of the agent package: over SSH this module's
source is read from the agent's zipapp and run as is (see ``core.remote.ssh.PROBE_BOOTSTRAP``).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import subprocess
import sys
from typing import Any


def _find(exe: str, workdir: str) -> str | None:
    """The executable a command's argv[0] names, as the role would find it, or None."""
    found = (os.path.join(workdir, exe) if not os.path.isabs(exe) else exe) if "/" in exe else shutil.which(exe)
    return found if found and os.path.isfile(found) and os.access(found, os.X_OK) else None


def _tensorflow(python: str, workdir: str | None, timeout_s: float) -> tuple[str | None, str | None]:
    """(TensorFlow version, None) when ``python`` imports it, else (None, why not)."""
    try:
        p = subprocess.run(
            [python, "-c", "import tensorflow as tf; print(tf.__version__)"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            cwd=workdir,
        )
    except subprocess.TimeoutExpired:
        return None, f"importing tensorflow took longer than {timeout_s} s"
    except OSError as exc:
        return None, str(exc)
    if p.returncode == 0:
        return (p.stdout.strip().splitlines() or ["?"])[-1], None
    return None, (p.stderr.strip().splitlines() or [f"exit code {p.returncode}"])[-1]


def _top_level_imports(script: str) -> list[str]:
    """The modules ``script`` imports unconditionally (module-level ``import``/``from`` statements,
    not those inside ``try``, ``if`` or functions, which may be optional), first names only."""
    import ast

    try:
        with open(script, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return []
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            names += [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module.split(".")[0])
    return [n for n in dict.fromkeys(names) if n != "__future__"]


_FIND_SPECS = "import importlib.util as u,sys;print(' '.join(m for m in sys.argv[1:] if u.find_spec(m) is None))"


def missing_imports(python: str, script: str, timeout_s: float = 20.0) -> tuple[list[str], str | None]:
    """The modules ``script`` imports that ``python`` cannot find (run beside the script, as the
    role would import its own modules), and why the check could not run, if so. Finding a
    module does not import it: a second at most, TensorFlow included."""
    modules = _top_level_imports(script)
    if not modules:
        return [], None
    try:
        p = subprocess.run(
            [python, "-c", _FIND_SPECS, *modules],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            cwd=os.path.dirname(os.path.abspath(script)),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [], str(exc)
    if p.returncode != 0:
        return [], (p.stderr.strip().splitlines() or [f"exit code {p.returncode}"])[-1]
    return p.stdout.split(), None


def _port_state(host: str, port: int) -> str:
    """``free``, ``busy``, ``not here`` (not an address of this machine), or the error.

    TensorFlow binds every address: a port held on another address only is ``busy`` too."""
    state = _bind_state(host, port)
    if state == "free":
        every_address = "::" if ":" in host else "0.0.0.0"  # noqa: S104 - bound to test, never listened on
        state = _bind_state(every_address, port)
    return state


def _bind_state(host: str, port: int) -> str:
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind((host, port))
        return "free"
    except OSError as e:
        return "busy" if e.errno == errno.EADDRINUSE else ("not here" if e.errno == errno.EADDRNOTAVAIL else str(e))
    finally:
        s.close()


def probe(req: dict[str, Any]) -> dict[str, Any]:
    """Answer one pre-flight request (the protocol between core/preflight/runner.py and this module)."""
    out: dict[str, Any] = {"python": sys.version.split()[0], "workdir": None, "commands": [], "ports": [], "nvml": None}
    wd = os.path.expanduser(req["workdir"])
    out["workdir"] = {"path": wd, "ok": os.path.isdir(wd)}
    for cmd in req["commands"]:
        exe = cmd["argv"][0]
        found = _find(exe, wd)
        item: dict[str, Any] = {
            "argv0": exe,
            "found": found,
            "script": cmd.get("script"),
            "script_ok": None,
            "tf": None,
            "tf_error": None,
        }
        if cmd.get("script"):
            script = os.path.expanduser(cmd["script"])
            script = script if os.path.isabs(script) else os.path.join(wd, script)
            item["script_ok"] = os.path.isfile(script)
            if found and item["script_ok"] and os.path.basename(exe).startswith("python"):
                item["missing_imports"], _why = missing_imports(found, script, req["tf_timeout_s"])
        if found and os.path.basename(exe).startswith("python"):
            cwd = wd if out["workdir"]["ok"] else None
            item["tf"], item["tf_error"] = _tensorflow(found, cwd, req["tf_timeout_s"])
        out["commands"].append(item)
    for host, port in req["ports"]:
        out["ports"].append([host, port, _port_state(host, port)])
    try:
        import pynvml  # type: ignore[import-not-found,unused-ignore]

        pynvml.nvmlInit()
        out["nvml"] = f"{pynvml.nvmlDeviceGetCount()} GPU(s)"
    except Exception as e:
        out["nvml"] = None
        out["nvml_error"] = (str(e) or type(e).__name__)[:200]
    return out


def main(argv: list[str]) -> int:
    """``argv[0]`` is the JSON request; prints the answer on one line."""
    print(json.dumps(probe(json.loads(argv[0]))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
