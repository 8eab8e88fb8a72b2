"""Issue 20, lost or false records: output that is not UTF-8, a second controller, exits and
metrics across a SIGKILLed launcher. Through the real CLI, each with a hard limit."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.fault_role import badutf8_lines
from tests.faults.harness import Cli, role_cluster

pytestmark = pytest.mark.slow


@pytest.fixture
def clis() -> Iterator[list[Cli]]:
    started: list[Cli] = []
    yield started
    for cli in started:
        cli.end()


def metric_steps(run: Path, role: str = "worker-0") -> list[int]:
    path = run / "roles" / role / "metrics.jsonl"
    if not path.is_file():
        return []
    return [
        json.loads(line)["step"] for line in path.read_text().splitlines() if json.loads(line).get("step") is not None
    ]


def test_output_that_is_not_utf8_keeps_whole_lines_every_step_and_every_byte(tmp_path: Path, clis: list[Cli]):
    cluster = role_cluster(tmp_path, ["badutf8", "20", "0.05"])
    run = tmp_path / "run"
    cli = Cli("launch", str(cluster), "--run-dir", str(run), "--follow", "all")
    clis.append(cli)
    code, out = cli.finish(120)
    assert code == 0, out
    expected = badutf8_lines(20)
    assert (run / "roles" / "worker-0" / "attempt-1.log").read_bytes() == b"".join(expected)
    shown = [line.split(" | ", 1)[1] for line in out.splitlines() if line.startswith("    worker:0 | ")]
    assert shown == [line[:-1].decode("utf-8", "replace") for line in expected], out
    assert metric_steps(run) == list(range(20))
