"""The fault tests launch clusters the way tests/core/test_launch.py does; its fixture is shared.
``clis``: the CLI processes a test started (tests/faults/harness.py), ended after it with whatever
agents and roles it left running (keep mode outlives a failed test)."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.core.test_launch import launches
from tests.faults.harness import Cli
from tests.ssh.conftest import kill_strays

__all__ = ["clis", "launches"]


@pytest.fixture
def clis(tmp_path: Path) -> Iterator[list[Cli]]:
    started: list[Cli] = []
    yield started
    for cli in started:
        cli.end()
    kill_strays(tmp_path)
