"""The agent's read of a role's log (core.agent.watch.tail), one call at a time, on a real file: a
role read to its end makes one output event a period, even when its pump writes between the
agent's reads (under load a line written between the read that reached the end and the read that
found nothing more made two events 0 ms apart; the full suite saw it once)."""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

from core.agent import watch
from core.agent.processes import Role


class _Proc:
    pid = 1
    returncode = None


class _Agent:
    connected, awaiting_resume, shutting_down = True, False, False

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def emit(self, event: str, **fields: Any) -> bool:
        self.events.append({"ev": event, **fields})
        return True

    def error(self, message: str, **fields: Any) -> None:
        raise AssertionError(message)


class _PumpWritesAfterRead:
    """The role's reader; after its first read, the pump appends a line (as a loaded pump does)."""

    def __init__(self, reader: IO[bytes], log: Path) -> None:
        self.reader, self.log, self.reads = reader, log, 0

    def read(self, n: int) -> bytes:
        data = self.reader.read(n)
        self.reads += 1
        if self.reads == 1:
            with open(self.log, "ab") as f:
                f.write(b"written between the reads\n")
        return data

    def close(self) -> None:
        self.reader.close()


def test_a_line_written_between_two_reads_waits_for_the_next_period(tmp_path: Path, monkeypatch) -> None:
    log = tmp_path / "worker-0.log"
    log.write_bytes(b"step 1\nstep 2\n")
    role = Role("worker:0", 1, _Proc(), str(log), "token")
    assert role.reader is not None
    role.reader = _PumpWritesAfterRead(role.reader, log)  # type: ignore[assignment]
    role.output_period_s = 0.5
    agent = _Agent()
    clock = [100.0]
    monkeypatch.setattr(watch, "now", lambda: clock[0])
    try:
        assert watch.tail(agent, role) is True  # type: ignore[arg-type]
        assert [e["data"] for e in agent.events] == ["step 1\nstep 2\n"]  # one event, not two
        assert role.next_read_at == 100.5
        clock[0] = 100.4
        assert watch.tail(agent, role) is True  # type: ignore[arg-type]
        assert len(agent.events) == 1  # within the period: not read
        clock[0] = 100.5
        assert watch.tail(agent, role) is True  # type: ignore[arg-type]
        assert [e["data"] for e in agent.events][1:] == ["written between the reads\n"]
        assert agent.events[1]["offset"] == len(b"step 1\nstep 2\n")
    finally:
        role.close()
