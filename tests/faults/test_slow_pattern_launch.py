"""A metric pattern too slow for a trainer's line, through the real CLI: the launcher says which
pattern on which line, turns it off for that role, goes on, and stops on Ctrl-C or SIGTERM.

Before, ``(?P<step>.*x.*y.*z.*w.*v)`` passed ``validate`` and a line of ``'xyzw' * 512`` froze the
launcher for good: SIGINT twice and SIGTERM were ignored (``re`` held the GIL)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from core.cli.exits import EXIT_INTERRUPTED
from core.run.journal import iter_jsonl
from tests.helpers.cli_process import Cli, launch_roles
from tests.helpers.procs import assert_nothing_left
from tests.helpers.waits import wait_for

POLYNOMIAL = r"(?P<step>.*x.*y.*z.*w.*v)"


def _warnings(run: Path) -> list[str]:
    try:
        text = (run / "events.jsonl").read_text(encoding="utf-8")
    except OSError:
        return []
    records = [json.loads(line) for line in text.splitlines() if line.strip()]
    return [str(r.get("message")) for r in records if r.get("kind") == "warning"]


def _steps(run: Path) -> list[int]:
    return [r["step"] for r in iter_jsonl(run / "roles" / "worker-0" / "metrics.jsonl")]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_slow_pattern_is_named_turned_off_and_the_launcher_still_stops(
    tmp_path: Path, clis: list[Cli], signum: int
) -> None:
    marker = f"slow-pattern-{tmp_path.name}"
    cli, run = launch_roles(
        tmp_path, clis, ["longline", "512", "0.1", marker], extra=f"metric_patterns = ['{POLYNOMIAL}']"
    )
    said = wait_for(lambda: [m for m in _warnings(run) if "metric pattern" in m], 60, "the slow pattern's warning")
    assert len(said) == 1, said
    message = said[0]
    assert message.startswith("worker:0: metric pattern '(?P<step>.*x.*y.*z.*w.*v)' took over 0.25 s on the line")
    assert "'xyzwxyzw" in message and "(2048 characters)" in message and "off for this role" in message
    assert "\n" not in message
    # The run goes on: the step lines after the long one are parsed (by the built-in format).
    wait_for(lambda: len(_steps(run)) >= 3, 60, "steps parsed after the long line")
    cli.signal(signum)
    code, out = cli.finish(60)
    assert code == EXIT_INTERRUPTED, out
    assert "warning: worker:0: metric pattern" in out and "Traceback" not in out
    assert_nothing_left([], marker)
