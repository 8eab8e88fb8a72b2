"""The profiler environment: a separate virtual environment (``make setup`` builds ``.venv-prof``
from ``requirements-prof.lock``) whose python runs :mod:`core.profiling.xprof_worker`.

xprof is native code with ~40 cloud packages behind it: kept out of the app's environment, and run
as a subprocess so that a crash there ends that process only.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
WORKER = Path(__file__).resolve().parent / "xprof_worker.py"
ENV_VAR = "TOWERDECK_PROFILER_PYTHON"
PARENT_ENV = "TOWERDECK_PROFILER_PARENT"  # read by the worker (xprof_worker.py): it dies with this pid


class ProfileError(Exception):
    """A one-line reason a profile cannot be taken or read; shown as it is."""


def profiler_python() -> Path:
    """The profiler environment's python (``$TOWERDECK_PROFILER_PYTHON`` overrides it)."""
    configured = os.environ.get(ENV_VAR)
    path = Path(configured) if configured else ROOT / ".venv-prof" / "bin" / "python"
    if not path.exists():
        where = f"${ENV_VAR}={configured}" if configured else str(path)
        raise ProfileError(f"the profiler environment is not installed ({where} is missing): run `make setup`")
    return path


@dataclass(frozen=True)
class WorkerResult:
    """What one run of the worker said: its JSON reply (None if it printed none) and stderr."""

    reply: Any
    stderr: str
    returncode: int | None  # None: killed at the time limit
    elapsed_s: float


def start_worker(*args: str) -> subprocess.Popen[str]:
    """Start the worker in its own session (its process group is killed whole at the time limit).
    It dies with this process (Linux's parent-death signal, set by the worker): note that Linux
    sends it when the *thread* that started it ends, so start it on a thread that waits for it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}  # not the app's paths
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "0")  # xprof says why a capture failed at INFO/WARNING
    env[PARENT_ENV] = str(os.getpid())
    return subprocess.Popen(
        [str(profiler_python()), "-I", str(WORKER), *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )


def finish_worker(proc: subprocess.Popen[str], timeout_s: float, started: float) -> WorkerResult:
    """Wait for the worker until ``timeout_s``; kill its process group past that (no orphan)."""

    try:
        out, err = proc.communicate(timeout=max(0.0, timeout_s))
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return WorkerResult(None, err or "", None, time.monotonic() - started)
    reply = None
    for line in reversed((out or "").splitlines()):
        if line.startswith("{"):
            try:
                reply = json.loads(line)
            except ValueError:
                continue
            break
    return WorkerResult(reply, err or "", proc.returncode, time.monotonic() - started)


def run_worker(*args: str, timeout_s: float) -> WorkerResult:
    """Run the worker once, within ``timeout_s``."""
    started = time.monotonic()
    return finish_worker(start_worker(*args), timeout_s, started)
