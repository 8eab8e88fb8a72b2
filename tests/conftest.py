"""Shared test set-up: runs never touch the user's data dir, roles find the venv's python.

What tests import lives in tests/helpers (no test imports another test module or a conftest;
tests/test_imports.py checks it); the fixtures of tests/helpers are registered here."""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.helpers.ports import free_ports

# Fixtures that tests in several folders use: ``launches`` (CLI launches ended after the test) and
# ``small_disk`` (a tmpfs to fill). As plugins they reach every test without an import that a test's
# parameter of the same name would shadow.
pytest_plugins = ["tests.helpers.cli_launch", "tests.helpers.tmpfs"]

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


@pytest.fixture
def ports() -> Iterator[list[int]]:
    yield free_ports(6)
