"""A role whose attempts keep failing is crash-looping, in a state of its own, with how its last
attempt ended and why (its traceback's exception line) wherever it is shown, until an attempt runs
healthily; when the restart policy gives up, the failure says the same."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from core.controller.crashloop import attempts_allowed
from core.run.reader import RunReader
from core.run.status import RoleState
from core.views.conditions import crash_text, next_attempt_text, short_exit, trouble_text
from tests.helpers.cli_launch import Launch
from tests.helpers.clusters import CRASH_LOOP, write_cluster
from tests.helpers.ports import free_ports
from tests.helpers.project import ROOT, run_cli
from tests.helpers.statuses import role_status
from tests.helpers.waits import wait_for

CRASHER = ROOT / "tests" / "helpers" / "crasher.py"
ERROR = "ZeroDivisionError: division by zero"


def crash_cluster(tmp_path: Path, crashes: int) -> Path:
    counter = tmp_path / "starts"
    return write_cluster(
        tmp_path, CRASH_LOOP, free_ports(3), crasher=CRASHER, counter=counter, crashes=crashes, backoff=1
    )


def journal(run_dir: Path, kind: str, role: str) -> list[dict[str, Any]]:
    path = run_dir / "events.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [r for r in map(json.loads, lines) if r.get("kind") == kind and r.get("role") == role]


@pytest.mark.slow
def test_a_crash_loop_is_one_everywhere_until_the_policy_gives_up(tmp_path: Path, launches: list[Launch]) -> None:
    launch = Launch(crash_cluster(tmp_path, crashes=99), tmp_path / "run")
    launches.append(launch)

    def looping() -> dict[str, Any] | None:
        role = launch.role("worker:1") if (launch.run_dir / "run.json").exists() else None
        return role if role is not None and role["crash_looping"] and role["attempt"] >= 2 else None

    role = wait_for(looping, 90, "worker:1 crash-looping in its second attempt or later")
    assert role["last_exit"] == "exit code 1" and role["last_error"] == ERROR, role
    assert role["attempts"] == 5, role
    human = launch.ctl("status").stdout
    line = re.search(r"worker:1\s+CRASH-LOOP .*\n\s+(crash-looping: .*)", human)
    assert line, human
    assert re.fullmatch(
        rf"crash-looping: exit 1 \({ERROR}\), attempt [2-5] of 5(; next attempt (in \d+ s|now))?", line[1]
    ), line[1]
    code, out = launch.finish(timeout_s=120)
    assert code != 0
    assert f"CRASH-LOOP exit 1 ({ERROR}); attempt 2 of 5 in 1 s" in out, out
    failed = journal(launch.run_dir, "role_state", "worker:1")[-1]
    assert failed["state"] == "failed" and failed["error"] == ERROR
    assert failed["detail"] == f"exit code 1 ({ERROR}); gave up after 4 restarts", failed
    loops = journal(launch.run_dir, "role_crash_loop", "worker:1")
    assert [r["looping"] for r in loops] == [True, True, True, True, False], loops
    assert [r["attempt"] for r in loops[:4]] == [2, 3, 4, 5] and loops[0]["attempts"] == 5
    assert loops[-1]["detail"] == f"gave up: exit code 1 ({ERROR})", loops[-1]
    assert f"worker:1 failed: exit code 1 ({ERROR}); gave up after 4 restarts" in out, out
    listed = json.loads(run_cli("runs", "--json", "--root", str(tmp_path)).stdout or "null")
    assert listed is None or ERROR in json.dumps(listed)
    # Read back, the run shows what it showed live.
    reader = RunReader(launch.run_dir)
    reader.start()
    try:
        shown = wait_for(
            lambda: (r := reader.status().role("worker:1")).state == RoleState.FAILED and r, 30, "the replay"
        )
    finally:
        reader.close()
    assert shown.last_error == ERROR and shown.last_exit == "exit code 1" and not shown.crash_looping
    assert trouble_text(shown, time.time()) == f"failed: exit 1 ({ERROR})"


@pytest.mark.slow
def test_a_crash_loop_ends_when_an_attempt_makes_a_step(tmp_path: Path, launches: list[Launch]) -> None:
    launch = Launch(crash_cluster(tmp_path, crashes=2), tmp_path / "run")
    launches.append(launch)
    wait_for(lambda: journal(launch.run_dir, "role_crash_loop", "worker:1"), 90, "the crash loop")
    ended = wait_for(
        lambda: [r for r in journal(launch.run_dir, "role_crash_loop", "worker:1") if not r["looping"]],
        90,
        "the loop's end",
    )
    assert re.fullmatch(r"attempt 3 made step \d+", ended[0]["detail"]), ended
    role = launch.role("worker:1")
    assert role["state"] == "running" and not role["crash_looping"] and role["attempt"] == 3
    assert role["last_error"] == ERROR  # the last failure is still said, beside the healthy attempt
    assert launch.ctl("stop-all").returncode == 0
    launch.finish(timeout_s=60)


def test_the_attempts_a_policy_allows_and_the_words_for_a_crash_loop() -> None:
    assert attempts_allowed(4, attempt=1, policy_restarts=0) == 5
    assert attempts_allowed(4, attempt=3, policy_restarts=2) == 5
    assert attempts_allowed(4, attempt=3, policy_restarts=0) == 7  # a user's restarts or a healthy stretch
    assert short_exit("exit code 1") == "exit 1" and short_exit("killed by SIGSEGV") == "SIGSEGV"
    waiting = role_status(
        "worker:1",
        state="backoff",
        attempt=2,
        crash_looping=True,
        last_exit="exit code 1",
        last_error=ERROR,
        attempts=5,
        next_attempt_at=104.2,
    )
    assert crash_text(waiting) == f"crash-looping: exit 1 ({ERROR}), attempt 3 of 5"
    assert next_attempt_text(waiting, 100.0) == "next attempt in 4 s"
    assert trouble_text(waiting, 100.0) == f"crash-looping: exit 1 ({ERROR}), attempt 3 of 5; next attempt in 4 s"
    running = role_status("worker:1", attempt=3, crash_looping=True, last_exit="killed by SIGSEGV", attempts=5)
    assert trouble_text(running, 100.0) == "crash-looping: SIGSEGV, attempt 3 of 5"
    assert trouble_text(role_status("worker:0"), 100.0) == ""
