"""Deleting a run its launcher left (killed): never while its roles run on under their agent.

Real launches of light trainers on 127.0.0.1, the launcher SIGKILLed so its agent keeps the
roles (``--on-disconnect keep``), then ``delete_run`` (what the Runs page's Delete calls).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from core.run import index as runs_index
from core.run import leftover, pids
from tests.helpers.ports import free_ports
from tests.helpers.procs import of_run
from tests.helpers.project import ROOT

pytestmark = pytest.mark.slow

TRAINERS = ROOT / "resources" / "trainers"
CLUSTER = """
name = "{name}"
workdir = "{trainers}"
command = ["python", "-u", "light_trainer.py", "--steps={steps}", "--rate_hz=20"]
stop_grace_s = 3
{strategy}
{ps}
[jobs.worker]
tasks = ["127.0.0.1:{worker}"]
"""


@pytest.fixture(autouse=True)
def no_strays(tmp_path: Path) -> Iterator[None]:
    """Roles and agents left running on purpose never outlive a failed test."""
    yield
    for p in of_run(tmp_path):
        with contextlib.suppress(psutil.Error):
            p.kill()


def wait_for(condition: Callable[[], object], what: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def records(run: Path) -> list[dict[str, object]]:
    path = run / "events.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]


def role_pids(run: Path) -> dict[str, int]:
    return {str(r["role"]): int(r["pid"]) for r in records(run) if r.get("kind") == "role_pid"}  # type: ignore[call-overload]


def agent_pid(run: Path) -> int:
    return int((run / "agents" / "127.0.0.1.sock.pid").read_text())


def left_run(tmp_path: Path, *, steps: int, with_ps: bool) -> Path:
    """Launch, wait for every role to start, SIGKILL the launcher: a run left running."""
    ports = free_ports(2)
    cluster = tmp_path / "left.toml"
    cluster.write_text(
        CLUSTER.format(
            name="left",
            trainers=TRAINERS,
            steps=steps,
            strategy="" if with_ps else 'strategy = "multi_worker_mirrored"\nlaunch_style = "tf_config"',
            ps=f'[jobs.ps]\ntasks = ["127.0.0.1:{ports[0]}"]' if with_ps else "",
            worker=ports[1],
        )
    )
    run = tmp_path / "run"
    launcher = subprocess.Popen(
        [sys.executable, str(ROOT / "main.py"), "launch", str(cluster), "--run-dir", str(run), "--progress-every", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        roles = 2 if with_ps else 1
        wait_for(lambda: len(role_pids(run)) == roles, "every role started")
        wait_for(lambda: (run / "roles" / "worker-0" / "metrics.jsonl").is_file(), "a first step")
        launcher.send_signal(signal.SIGKILL)
        launcher.wait(30)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    summary = runs_index.summarize(run)
    assert summary is not None and summary.outcome == "left"
    return run


@pytest.mark.timeout(300)
def test_a_left_run_whose_roles_run_is_not_deleted_until_they_are_stopped(tmp_path: Path) -> None:
    """Before: delete_run removed the folder while the agent and the roles ran on, unreachable."""
    run = left_run(tmp_path, steps=0, with_ps=True)
    running = role_pids(run)
    agent = agent_pid(run)
    with pytest.raises(runs_index.RunBusyError) as refused:
        runs_index.delete_run(run)
    message = str(refused.value)
    assert "\n" not in message and not refused.value.forceable
    assert f"worker:0 (pid {running['worker:0']})" in message and f"ps:0 (pid {running['ps:0']})" in message
    assert f"the agent of 127.0.0.1 (pid {agent})" in message
    assert f"`python main.py attach {run}`, then Ctrl-C" in message
    with pytest.raises(runs_index.RunBusyError):
        runs_index.delete_run(run, force=True)  # what surely runs here is never forced away
    with pytest.raises(runs_index.RunBusyError):
        runs_index.archive_run(run)
    assert run.is_dir() and all(psutil.pid_exists(p) for p in [*running.values(), agent])

    # As the message says: attach, Ctrl-C; then it goes, and nothing of it is left.
    attach = subprocess.Popen(
        [sys.executable, str(ROOT / "main.py"), "attach", str(run), "--progress-every", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for(lambda: any(r.get("detail") == "reattached" for r in records(run)), "the attach took the run over")
        attach.send_signal(signal.SIGINT)
        out, _ = attach.communicate(timeout=120)
    finally:
        if attach.poll() is None:
            attach.kill()
            attach.communicate()
    assert attach.returncode == 130, out
    runs_index.delete_run(run)
    assert not run.exists()
    wait_for(lambda: not any(psutil.pid_exists(p) for p in [*running.values(), agent]), "every process gone", 30)


@pytest.mark.timeout(300)
def test_an_agent_left_with_no_role_is_stopped_with_the_run_it_served(tmp_path: Path) -> None:
    """The roles ended while nobody watched; the agent waits (up to 10 minutes) for a reattach.
    Before: the folder went and the agent ran on with nothing to serve."""
    run = left_run(tmp_path, steps=60, with_ps=False)
    worker = role_pids(run)["worker:0"]
    agent = agent_pid(run)
    wait_for(lambda: not psutil.pid_exists(worker), "the worker's end")
    assert psutil.pid_exists(agent)
    left = leftover.find(run, json.loads((run / "run.json").read_text()))
    assert not left.runs_here and left.idle_agents == (leftover.Agent("127.0.0.1", agent),)
    runs_index.delete_run(run)
    assert not run.exists()
    wait_for(lambda: not psutil.pid_exists(agent), "the agent's end", 30)


@pytest.mark.timeout(300)
def test_a_pid_journalled_for_a_role_counts_only_while_it_is_still_that_process(tmp_path: Path) -> None:
    """A role's pid, reused by another process since, never holds a run back (nor is that process
    touched); the journal's start time tells them apart, or, in runs from before it was recorded,
    when the pid was journalled."""
    run = left_run(tmp_path, steps=40, with_ps=False)
    worker = role_pids(run)["worker:0"]
    wait_for(lambda: not psutil.pid_exists(worker), "the worker's end")
    info = json.loads((run / "run.json").read_text())
    other = subprocess.Popen(["sleep", "600"])
    try:
        journal = run / "events.jsonl"
        kept = journal.read_bytes()

        def journalled_as(**fields: object) -> leftover.Leftovers:
            record = {"t": time.time(), "kind": "role_pid", "role": "worker:0", "pid": other.pid, "attempt": 1}
            journal.write_bytes(kept + (json.dumps({**record, **fields}) + "\n").encode())
            return leftover.find(run, info)

        started = pids.start_time(other.pid)
        assert started is not None
        # The worker's pid is now another process (another start time): not the role.
        assert journalled_as(pid_started=started + 1).running == ()
        # The same process: the role runs.
        assert journalled_as(pid_started=started).running == (f"worker:0 (pid {other.pid})",)
        # An older journal, with no start time: a process started after its pid was journalled
        # is another one; one started before is taken as the role.
        assert journalled_as(t=time.time() - 3600).running == ()
        assert journalled_as(t=time.time() + 5).running == (f"worker:0 (pid {other.pid})",)
        with pytest.raises(runs_index.RunBusyError, match=f"worker:0 \\(pid {other.pid}\\)"):
            runs_index.delete_run(run)
        journalled_as(t=time.time() - 3600)
        runs_index.delete_run(run)
        assert not run.exists() and other.poll() is None  # that process was never touched
    finally:
        other.kill()
        other.wait()
    assert not os.path.exists(run)
