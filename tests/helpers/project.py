"""The checkout the tests run from, its example trainers, and its CLI run as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
TRAINERS = ROOT / "resources" / "trainers"


def run_cli(
    *args: str, cwd: Path | None = None, timeout: float = 240, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``python main.py ARGS`` as a user would; returns the finished process."""
    return subprocess.run(
        [sys.executable, str(ROOT / "main.py"), *args],
        cwd=cwd or ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )
