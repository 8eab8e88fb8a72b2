"""Checkpoints on a live run of light trainers (no TensorFlow: the behaviour is TowerDeck's): listed
as they appear by ``ctl RUN checkpoints`` and ``runs --json``, journalled as ``checkpoints``
events, and named by a recovery: "resumed at step N from ckpt-K; lost M steps". A run whose
recovery is on and that writes none is warned once."""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.cli_launch import Launch, journal
from tests.helpers.ports import free_ports
from tests.helpers.procs import assert_nothing_left
from tests.helpers.project import TRAINERS, run_cli
from tests.helpers.waits import wait_for

pytestmark = pytest.mark.slow

LIGHT = """
name = "light-ckpt"
strategy = "between_graph"
launch_style = "flags"
workdir = "{trainers}"
command = ["python", "-u", "light_trainer.py", "--steps=0", "--rate_hz=20"{flags}]
stop_grace_s = 3
[jobs.ps]
tasks = ["127.0.0.1:{p[0]}"]
[jobs.worker]
tasks = ["127.0.0.1:{p[1]}", "127.0.0.1:{p[2]}"]
[recovery]
backoff_s = 0.5
"""
CHECKPOINTING = ', "--checkpoint_dir={run_dir}/checkpoints", "--checkpoint_every=20"'


def launch(
    tmp_path: Path, launches: list[Launch], flags: str = CHECKPOINTING, recovery: str = ""
) -> tuple[Launch, list[int]]:
    ports = free_ports(3)
    cluster = tmp_path / "cluster.toml"
    cluster.write_text(LIGHT.format(trainers=TRAINERS, p=ports, flags=flags) + recovery)
    run = Launch(cluster, tmp_path / "runs" / "run")
    launches.append(run)
    return run, ports


def running(run: Launch, name: str, *, past_step: int = 0, attempt: int = 1) -> dict[str, Any]:
    run.wait_role(name, "running", timeout_s=120, attempt=attempt)

    def ready() -> dict[str, Any] | None:
        role = run.role(name)
        ok = role["state"] == "running" and role["attempt"] == attempt and (role["step"] or 0) >= past_step
        return role if ok else None

    return wait_for(ready, 120, f"{name} running attempt {attempt} past step {past_step}")


def listed(run: Launch) -> dict[str, Any]:
    result = run.ctl("checkpoints", "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def recovered(run: Launch) -> dict[str, Any]:
    found = wait_for(
        lambda: [r for r in journal(run.run_dir, "recovery") if r["phase"] == "recovered"], 120, "recovered"
    )
    return dict(found[0])


@pytest.mark.timeout(300)
def test_a_killed_ps_resumes_from_the_checkpoint_the_chief_saved_as_it_was_stopped(
    tmp_path: Path, launches: list[Launch]
) -> None:
    run, ports = launch(tmp_path, launches)
    ps = running(run, "ps:0")
    running(run, "worker:0", past_step=45)
    found = wait_for(lambda: (c := listed(run))["checkpoints"] and c, 60, "a checkpoint listed")
    assert found["directory"] == str(run.run_dir / "checkpoints")
    assert found["found_from"] == "worker:0's --checkpoint_dir" and found["problem"] == ""
    assert all(c["step"] % 20 == 0 and c["size_bytes"] > 0 and c["saved_at"] for c in found["checkpoints"])
    human = run.ctl("checkpoints")
    assert human.returncode == 0 and f"checkpoints in {run.run_dir / 'checkpoints'}" in human.stdout, human.stdout
    assert re.search(r"^\* ckpt-\d+ +step +\d+ ", human.stdout, re.MULTILINE), human.stdout

    os.kill(ps["pid"], signal.SIGKILL)
    done = recovered(run)
    # The recovery stopped the chief with SIGTERM: it saved where it was (as PreemptionCheckpointHandler
    # does), and every restarted worker resumed there, not at step 0.
    log = (run.run_dir / "roles" / "worker-0" / "attempt-2.log").read_text()
    said = re.search(r"resumed from checkpoint (ckpt-(\d+)) at step (\d+)", log)
    assert said is not None, log
    assert done["checkpoint"] == said.group(1) and done["resumed_step"] == int(said.group(3)), done
    first_step = int(re.findall(r"^Step: (\d+),", log, re.MULTILINE)[0])
    assert first_step == done["resumed_step"] + 1 > 40
    assert done["step_before"] is not None and done["resumed_step"] >= done["step_before"] - 20
    saved = {c["name"] for r in journal(run.run_dir, "checkpoints") for c in r["added"]}
    assert done["checkpoint"] in saved  # journalled as it appeared
    status = run.status()
    assert status["recovery"].startswith(f"recovered: resumed at step {done['resumed_step']:,}")
    assert f"from {done['checkpoint']}" in status["recovery"]

    assert run.ctl("stop-all").returncode == 0
    run.finish(timeout_s=60)
    summary = json.loads(run_cli("runs", "--root", str(run.run_dir.parent), "--json").stdout.splitlines()[0])
    names = [c["name"] for c in summary["checkpoints"]["checkpoints"]]
    assert names and summary["checkpoints"]["latest"] == names[-1], summary["checkpoints"]
    assert_nothing_left(ports, marker=str(tmp_path))


@pytest.mark.timeout(300)
def test_a_sigkilled_chief_resumes_from_its_last_checkpoint_and_the_steps_lost_are_said(
    tmp_path: Path, launches: list[Launch]
) -> None:
    run, ports = launch(tmp_path, launches)
    # Killed between two checkpoints (every 20 steps): it cannot save, some steps are lost. Timed
    # by the role's log, not by the status, which lags the process: at 20 steps/s under load the
    # status said a step between checkpoints while the trainer had reached the next one (step 80,
    # nothing lost). The log is written as the lines come; 4-10 leaves half a second to the next.
    chief = running(run, "worker:0", past_step=30)
    log = run.run_dir / "roles" / "worker-0" / "attempt-1.log"

    def between_checkpoints() -> bool:
        steps = re.findall(r"^Step: (\d+),", log.read_text(errors="replace"), re.MULTILINE)
        return bool(steps) and int(steps[-1]) > 30 and 4 <= int(steps[-1]) % 20 <= 10

    wait_for(between_checkpoints, 120, "worker:0 between two checkpoints in its log")
    os.kill(chief["pid"], signal.SIGKILL)
    done = recovered(run)
    started = next(r for r in journal(run.run_dir, "recovery") if r["phase"] == "started")
    assert started["roles"] == ["worker:0"] and started["cause"] == "worker:0 killed by SIGKILL"
    assert done["checkpoint"] == f"ckpt-{done['resumed_step']}" and done["resumed_step"] % 20 == 0
    assert done["lost_steps"] == done["step_before"] - done["resumed_step"] > 0, done
    lost = done["lost_steps"]
    text = f"recovered: resumed at step {done['resumed_step']:,} from {done['checkpoint']}; lost {lost:,} step"
    status = run.status()
    assert status["recovery"].startswith(text), status["recovery"]
    assert run.ctl("stop-all").returncode == 0
    _code, out = run.finish(timeout_s=60)
    assert text in out, out
    assert_nothing_left(ports, marker=str(tmp_path))


@pytest.mark.timeout(200)
def test_recovery_on_and_no_checkpoint_after_training_a_while_is_warned_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from core.cluster.spec import load
    from core.controller import checkpoints as watch
    from core.controller.controller import Controller
    from core.run.events import Event, WarningMessage
    from core.run.rundir import RunDir

    monkeypatch.setattr(watch, "NO_CHECKPOINT_AFTER_S", 2.0)
    ports = free_ports(3)
    cluster = tmp_path / "cluster.toml"
    cluster.write_text(LIGHT.format(trainers=TRAINERS, p=ports, flags=""))
    spec, problems = load(cluster)
    assert spec is not None, problems
    controller = Controller(spec, RunDir.create(spec, path=tmp_path / "run"))
    events: list[Event] = []
    controller.subscribe(events.append)
    controller.start()
    try:
        warned = wait_for(
            lambda: [
                e for e in events if isinstance(e.payload, WarningMessage) and "no checkpoint" in e.payload.message
            ],
            120,
            "the warning",
        )
        assert len(warned) == 1
        message = warned[0].payload.message  # type: ignore[union-attr]
        assert message.startswith("recovery is on, but no checkpoint has appeared after"), message
        assert "no checkpoint_dir key nor --checkpoint_dir-style flag" in message
        assert "a recovery would restart training from step 0" in message
        records = [json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
        assert [r["message"] for r in records if r.get("kind") == "warning"] == [message]  # journalled once
    finally:
        controller.close(timeout_s=60)
    assert_nothing_left(ports, marker=str(tmp_path))


@pytest.mark.timeout(200)
def test_a_fifo_for_a_state_file_is_one_line_in_launch_and_ctl_and_nothing_hangs(
    tmp_path: Path, launches: list[Launch]
) -> None:
    hostile = tmp_path / "ckpt"
    hostile.mkdir()
    os.mkfifo(hostile / "checkpoint")  # reading it would wait for a writer forever
    run, ports = launch(tmp_path, launches, flags="", recovery=f'checkpoint_dir = "{hostile}"\n')
    running(run, "worker:0", past_step=10)
    said = wait_for(lambda: journal(run.run_dir, "checkpoints"), 60, "the checkpoints event")
    problem = f"{hostile / 'checkpoint'} is not a regular file"
    assert (
        said[0]["problem"] == problem
        and said[0]["added"] == []
        and said[0]["found_from"] == "[recovery] checkpoint_dir"
    )
    human = run.ctl("checkpoints")
    assert human.returncode == 0 and f"problem: {problem}" in human.stdout, human.stdout
    assert run.ctl("stop-all").returncode == 0
    code, out = run.finish(timeout_s=60)
    lines = [line for line in out.splitlines() if "not a regular file" in line]
    assert len(lines) == 1 and lines[0].endswith(f"checkpoints  {problem}"), out
    assert "Traceback" not in out and code != 2, out
    assert_nothing_left(ports, marker=str(tmp_path))
