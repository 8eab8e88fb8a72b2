"""An agent link whose agent cannot come back (its Slurm job ended and took the step with it)
says the host is lost at once, instead of reconnecting for RECONNECT_GIVE_UP_S (300 s) while the
run waits for its roles' ends. Real relay processes: the first says hello and ends (the step was
cancelled), every attach fails as ``srun --jobid`` does for an ended job."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

from core.remote.endpoints import Endpoint
from core.remote.link import AgentLink

HELLO = json.dumps({"ev": "hello", "run_dir": "/nowhere", "roles": {}, "ended": {}})
FIRST = [sys.executable, "-c", f"print({HELLO!r}, flush=True)"]
ATTACH = [sys.executable, "-c", "import sys; sys.stderr.write('srun: error: Invalid job id specified\\n'); sys.exit(1)"]


def run_link(tmp_path: Path, gone: Any) -> tuple[list[dict[str, Any]], threading.Event, AgentLink]:
    events: list[dict[str, Any]] = []
    lost = threading.Event()

    def sink(host: str, event: dict[str, Any]) -> None:
        events.append(event)
        if event["ev"] == "agent_lost":
            lost.set()

    link = AgentLink(
        Endpoint("node1", remote=False, first_argv=FIRST, attach_argv=ATTACH),
        sink,
        tmp_path,
        tmp_path / "agent.log",
        give_up_s=300.0,
        gone=gone,
    )
    link.start()
    return events, lost, link


def test_a_link_whose_job_ended_is_lost_at_once_with_the_reason(tmp_path: Path) -> None:
    asked: list[float] = []

    def gone() -> str | None:
        asked.append(time.monotonic())
        return "cancelled by Slurm (job 7)"

    started = time.monotonic()
    events, lost, link = run_link(tmp_path, gone)
    try:
        assert lost.wait(60), events  # not 300 s of back-off
        assert time.monotonic() - started < 30
        ended = next(e for e in events if e["ev"] == "agent_lost")
        assert ended["reason"].endswith("not reconnecting: cancelled by Slurm (job 7)"), ended
        assert asked
        assert not [e for e in events if e["ev"] == "host_state" and e["state"] == "reconnecting"]
    finally:
        link.close(5)


def test_a_link_whose_job_still_runs_keeps_reconnecting(tmp_path: Path) -> None:
    asked = threading.Event()
    events, lost, link = run_link(tmp_path, lambda: asked.set())  # None: keep trying
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not [
            e for e in events if e["ev"] == "host_state" and e["state"] == "reconnecting" and e.get("attempt") == 2
        ]:
            time.sleep(0.05)
        assert asked.is_set()
        assert [e for e in events if e["ev"] == "host_state" and e.get("attempt") == 2], events
        assert not lost.is_set()
    finally:
        link.close(5)
