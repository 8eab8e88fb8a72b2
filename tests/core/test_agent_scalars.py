"""The agent tails each role's TensorBoard directory and sends ``scalars`` events.

Real TensorFlow writes the event files (the role itself is a small trainer using
``tf.compat.v1.summary.FileWriter``), and the agent reads them with TensorBoard's loader.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.agent_process import AgentProcess, start

pytestmark = pytest.mark.slow

# Writes steps [first, first+count) of "loss" (step/4) and "lr" (0.5), flushes, keeps the file open
# until the file `go` exists, then writes 10 more steps and closes.
TRAINER = r"""
import os, sys, time
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tensorflow as tf
logdir, first, count, go = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
tf.compat.v1.disable_eager_execution()
writer = tf.compat.v1.summary.FileWriter(logdir)
def put(lo, hi):
    for step in range(lo, hi):
        values = [tf.compat.v1.Summary.Value(tag="loss", simple_value=step / 4),
                  tf.compat.v1.Summary.Value(tag="lr", simple_value=0.5)]
        writer.add_summary(tf.compat.v1.Summary(value=values), step)
    writer.flush()
put(first, first + count)
print("flushed", flush=True)
while not os.path.exists(go):  # the test says when to go on: the file stays open meanwhile
    time.sleep(0.05)
put(first + count, first + count + 10)
writer.close()
"""

WAITER = "import os, sys, time\nwhile not os.path.exists(sys.argv[1]):\n    time.sleep(0.05)\n"


def expected(first: int, last: int) -> set[tuple[str, int, float]]:
    return {(tag, step, step / 4 if tag == "loss" else 0.5) for step in range(first, last) for tag in ("loss", "lr")}


def collect(agent: AgentProcess, role: str, want: set[tuple[str, int, float]], timeout_s: float = 120) -> list[Any]:
    """``scalars`` events of ``role`` until every point of ``want`` has come; returns the events."""
    events: list[dict[str, Any]] = []
    seen: set[tuple[str, int, float]] = set()
    while not want <= seen:
        event = agent.wait_for("scalars", timeout_s=timeout_s, role=role)
        events.append(event)
        seen |= {(p["tag"], p["step"], p["value"]) for p in event["points"]}
    return events


def triples(events: list[dict[str, Any]]) -> list[tuple[str, int, float]]:
    return [(p["tag"], p["step"], p["value"]) for e in events for p in e["points"]]


def record_ends(data: bytes) -> list[int]:
    """Byte offsets where each TFRecord ends (8-byte length, 4-byte CRC, data, 4-byte CRC)."""
    ends, position = [], 0
    while position + 12 <= len(data):
        position += 12 + int.from_bytes(data[position : position + 8], "little") + 4
        ends.append(position)
    return ends


def test_scalars_of_a_live_trainer_bounded_per_event_and_kept_across_attempts(tmp_path: Path):
    agent = AgentProcess(args=("--sample-period", "0.2"))
    try:
        assert agent.events[0]["tensorboard"] is True
        tb_dir = tmp_path / "tb"
        script = tmp_path / "trainer.py"
        script.write_text(TRAINER)
        go = tmp_path / "go"
        argv = [sys.executable, str(script), str(tb_dir), "1", "1500", str(go)]
        agent.send(
            {"op": "start", "role": "worker:1", "attempt": 1, "argv": argv, "log": str(tmp_path / "a1.log"),
             "tb_dir": str(tb_dir)}
        )  # fmt: skip
        agent.wait_for("started", role="worker:1")
        # 3000 points written at once, the file still open: more than one event, none over the bound.
        first = collect(agent, "worker:1", expected(1, 1501))
        assert len(first) >= 2 and max(len(e["points"]) for e in first) <= 2000
        assert all(e["attempt"] == 1 for e in first)
        assert all(isinstance(p["wall_time"], float) and p["wall_time"] > 1e9 for e in first for p in e["points"])
        go.touch()  # the trainer appends to the same file and closes it
        rest = collect(agent, "worker:1", expected(1501, 1511))
        agent.wait_for("exited", role="worker:1", timeout_s=60)
        got = triples(first + rest)
        assert sorted(got) == sorted(expected(1, 1511)), "a point was lost or sent twice"

        # A restarted attempt writes a new file in the same directory: only its points are sent.
        go.unlink()
        argv = [sys.executable, str(script), str(tb_dir), "2000", "5", str(go)]
        start_again = {"op": "start", "role": "worker:1", "attempt": 2, "argv": argv, "log": str(tmp_path / "a2.log")}
        agent.send({**start_again, "tb_dir": str(tb_dir)})
        agent.wait_for("started", role="worker:1", attempt=2)
        second = collect(agent, "worker:1", expected(2000, 2005))
        go.touch()
        second += collect(agent, "worker:1", expected(2005, 2015))
        agent.wait_for("exited", role="worker:1", attempt=2, timeout_s=60)
        assert all(e["attempt"] == 2 for e in second)
        assert sorted(triples(second)) == sorted(expected(2000, 2015))
        assert len(list(tb_dir.glob("events.out.tfevents.*"))) == 2
    finally:
        agent.close()


def test_a_half_written_record_is_sent_once_when_complete(tmp_path: Path):
    # A real event file, written by TensorFlow, then offered to the agent in two cuts.
    made = tmp_path / "made"
    go = tmp_path / "go"
    go.touch()
    script = tmp_path / "trainer.py"
    script.write_text(TRAINER)
    subprocess.run([sys.executable, str(script), str(made), "1", "20", str(go)], check=True, timeout=300)
    (source,) = made.glob("events.out.tfevents.*")
    data = source.read_bytes()
    ends = record_ends(data)
    assert ends[-1] == len(data) and len(ends) >= 30  # a version record, then one per step
    cut = (ends[14] + ends[15]) // 2  # inside the record of step 15 (record 0 is the file version)

    agent = AgentProcess(args=("--sample-period", "0.2"))
    try:
        tb_dir = tmp_path / "tb"
        tb_dir.mkdir()
        target = tb_dir / source.name
        target.write_bytes(data[:cut])
        release = tmp_path / "release"
        argv = [sys.executable, "-c", WAITER, str(release)]
        start(agent, "ps:0", argv, tmp_path / "ps.log")  # no tb_dir: nothing to tail for it
        agent.send({"op": "start", "role": "worker:0", "argv": argv, "log": str(tmp_path / "w.log"),
                    "tb_dir": str(tb_dir)})  # fmt: skip
        agent.wait_for("started", role="worker:0")
        before = collect(agent, "worker:0", expected(1, 15))
        with target.open("ab") as f:
            f.write(data[cut:])
        after = collect(agent, "worker:0", expected(15, 31))
        release.touch()
        exited = [agent.wait_for("exited", timeout_s=30)["role"], agent.wait_for("exited", timeout_s=30)["role"]]
        assert sorted(exited) == ["ps:0", "worker:0"]
        assert sorted(triples(before + after)) == sorted(expected(1, 31))
        assert not any(e["ev"] == "scalars" and e["role"] == "ps:0" for e in agent.events)
    finally:
        agent.close()
