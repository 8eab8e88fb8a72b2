"""Shared test set-up: runs never touch the user's data dir, roles find the venv's python."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# Roles run `python` from PATH: make it this interpreter's environment.
os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
# The NVML double lists only the roles of this test session (tests/helpers/fake_nvml.py): another
# suite, or a real run, on this machine never shows on its GPUs. Every agent and role started here
# inherits it.
os.environ["FAKE_NVML_SCOPE"] = f"pytest-{os.getpid()}-{secrets.token_hex(4)}"


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own runs root; the user's data dir is never written."""
    path = tmp_path / "towerdeck-data"
    monkeypatch.setenv("TOWERDECK_DATA_DIR", str(path))
    monkeypatch.setenv("TOWERDECK_SETTINGS_DIR", str(tmp_path / "towerdeck-settings"))  # never the user's
    # A window closed while its cluster runs stops it instead of asking (a modal question would
    # hang a test); tests/gui/test_main_window.py answers the real question itself.
    monkeypatch.setenv("TOWERDECK_CLOSE_CHOICE", "stop")
    return path


@pytest.fixture(autouse=True)
def gc_given_back() -> Iterator[None]:
    """A window holds Python's collector on the GUI thread (gui/window/collector.py); a test's window that
    was never closed must not leave automatic collection off for the tests after it."""
    yield
    collector = sys.modules.get("gui.window.collector")
    if collector is not None:
        collector.release_all()


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """Ports that are free now (held open together so they differ)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@pytest.fixture
def ports() -> Iterator[list[int]]:
    yield free_ports(6)


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
