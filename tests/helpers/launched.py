"""A ``python main.py launch`` running in the background, watched and controlled as a user would:
through ``ctl`` and the run directory's journal. Waits are for a condition, with a deadline."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from tests.conftest import ROOT, run_cli

T = TypeVar("T")


def wait_for(condition: Callable[[], T], timeout_s: float, what: str) -> T:
    """``condition()``'s first truthy value within ``timeout_s``; AssertionError naming ``what``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")


class LaunchedRun:
    """``launch CLUSTER --run-dir RUN_DIR`` in the background; :meth:`kill` ends it (Ctrl-C first)."""

    def __init__(self, cluster: Path, run_dir: Path) -> None:
        self.run_dir = run_dir
        command = [sys.executable, str(ROOT / "main.py"), "launch", str(cluster), "--run-dir", str(run_dir)]
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run_cli("ctl", str(self.run_dir), *args, timeout=60)

    def status(self) -> dict[str, Any] | None:
        """``ctl status --json``, or None while the run cannot answer yet."""
        if not (self.run_dir / "run.json").exists() or "control_socket" not in (self.run_dir / "run.json").read_text():
            return None
        result = self.ctl("status", "--json")
        return json.loads(result.stdout) if result.returncode == 0 else None

    def role(self, name: str) -> dict[str, Any] | None:
        status = self.status()
        return next((r for r in status["roles"] if r["role"] == name), None) if status else None

    def journal(self, kind: str) -> list[dict[str, Any]]:
        """The journal's records of ``kind`` so far."""
        path = self.run_dir / "events.jsonl"
        lines = path.read_text().splitlines() if path.exists() else []
        return [r for r in map(json.loads, lines) if r.get("kind") == kind]

    def finish(self, timeout_s: float = 120) -> tuple[int, str]:
        out, _ = self.proc.communicate(timeout=timeout_s)
        return self.proc.returncode, out

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.communicate()
