"""The host agent (its zipapp) as a child process, spoken to through its JSON-lines protocol."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from core.agent import artifact_file


class AgentProcess:
    """One agent in a session of its own; ``events`` keeps all it said, in order."""

    def __init__(self, python_flags: tuple[str, ...] = (), args: tuple[str, ...] = ()) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-u", *python_flags, str(artifact_file()), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.events: list[dict[str, Any]] = []
        hello = self.next_event()
        assert hello["ev"] == "hello" and hello["protocol"] == 1

    def send(self, line: str | dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((line if isinstance(line, str) else json.dumps(line)) + "\n")
        self.proc.stdin.flush()

    def next_event(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, "the agent closed its output"
        event = json.loads(line)
        self.events.append(event)
        return event

    def wait_for(self, ev: str, timeout_s: float = 20.0, **match: Any) -> dict[str, Any]:
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            event = self.next_event()
            if event["ev"] == ev and all(event.get(k) == v for k, v in match.items()):
                return event
        raise AssertionError(f"no {ev} {match} in {self.events[-10:]}")

    def output(self, role: str) -> str:
        chunks = sorted((e["offset"], e["data"]) for e in self.events if e["ev"] == "output" and e["role"] == role)
        return "".join(d for _, d in chunks)

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.proc.wait(20)


def start(
    agent: AgentProcess,
    role: str,
    argv: list[str],
    log: Path,
    env: dict[str, str] | None = None,
    *,
    output_period_s: float | None = None,
) -> dict[str, Any]:
    """Start ``role`` as ``argv`` with its output in ``log`` (read to its end every ``output_period_s``,
    or the agent's default); its ``started`` event."""
    command: dict[str, Any] = {
        "op": "start",
        "role": role,
        "attempt": 1,
        "argv": argv,
        "env": env or {},
        "log": str(log),
    }
    if output_period_s is not None:
        command["output_period_s"] = output_period_s
    agent.send(command)
    return agent.wait_for("started", role=role)
