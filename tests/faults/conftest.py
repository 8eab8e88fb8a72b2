"""``clis``: the CLI processes a fault test started (tests/helpers/cli_process.py), ended after it
with whatever agents and roles it left running (keep mode outlives a failed test). The fault tests
launch clusters as tests/core/test_launch.py does, with the ``launches`` fixture of
tests/helpers/cli_launch.py (registered in tests/conftest.py)."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.cli_process import Cli
from tests.helpers.ssh_server import kill_strays


@pytest.fixture
def clis(tmp_path: Path) -> Iterator[list[Cli]]:
    started: list[Cli] = []
    yield started
    for cli in started:
        cli.end()
    kill_strays(tmp_path)
