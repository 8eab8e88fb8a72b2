"""Issue 20, lost or false records: output that is not UTF-8, a second controller, exits and
metrics across a SIGKILLed launcher. Through the real CLI, each with a hard limit."""

from __future__ import annotations

import contextlib
import json
import re
import signal
from pathlib import Path

import psutil
import pytest

from core.run.journal import iter_jsonl
from tests.helpers.cli_process import Cli, launch_roles, role_cluster
from tests.helpers.fault_role import badutf8_lines, step_line
from tests.helpers.waits import wait_for

pytestmark = pytest.mark.slow


def role_pids(run: Path) -> list[int]:
    """Live processes of the run's roles (they carry TOWERDECK_RUN_DIR)."""
    found = []
    for p in psutil.process_iter(["status"]):
        with contextlib.suppress(psutil.Error):
            if p.info["status"] != psutil.STATUS_ZOMBIE and p.environ().get("TOWERDECK_RUN_DIR") == str(run):
                found.append(p.pid)
    return found


def metric_steps(run: Path, role: str = "worker-0") -> list[int]:
    path = run / "roles" / role / "metrics.jsonl"
    if not path.is_file():
        return []
    return [r["step"] for r in iter_jsonl(path) if r.get("step") is not None]


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


def wait_state(run: Path, role: str, state: str, detail: str = "", timeout_s: float = 60) -> None:
    """Until events.jsonl records ``role`` entering ``state`` (with ``detail`` in its detail)."""

    def seen() -> bool:
        journal = run / "events.jsonl"
        if not journal.is_file():
            return False
        for line in journal.read_text().splitlines():
            e = json.loads(line)
            if (e.get("kind"), e.get("role"), e.get("state")) == ("role_state", role, state) and detail in str(
                e.get("detail")
            ):
                return True
        return False

    wait_for(seen, timeout_s, f"{role} {state} {detail}")


def test_attach_while_launch_runs_is_refused_naming_the_launcher(tmp_path: Path, clis: list[Cli]):
    launch, run = launch_roles(tmp_path, clis, ["forever", "0", "0.05"])
    wait_state(run, "worker:0", "running")
    attach = Cli("attach", str(run))
    clis.append(attach)
    code, out = attach.finish(30)
    assert code == 2, out
    assert f"controlled by pid {launch.proc.pid} on " in out and "main.py launch" in out, out
    assert len(out.strip().splitlines()) == 1, out
    launch.signal(signal.SIGINT)
    code, out = launch.finish(60)
    assert code == 130 and "stopped after" in out and "reattached" not in out, out
    steps = metric_steps(run)
    assert steps == list(range(len(steps))) and steps, steps  # no step twice


def test_a_second_attach_is_refused_and_the_first_stops_the_run_as_asked(tmp_path: Path, clis: list[Cli]):
    launch, run = launch_roles(tmp_path, clis, ["forever", "0", "0.05"])
    wait_state(run, "worker:0", "running")
    wait_for(lambda: len(metric_steps(run)) >= 5, 30, "steps")
    launch.kill_group()
    launch.finish(30)
    first = Cli("attach", str(run))
    clis.append(first)
    wait_state(run, "worker:0", "running", "reattached")
    second = Cli("attach", str(run))
    clis.append(second)
    code, out = second.finish(30)
    assert code == 2 and f"controlled by pid {first.proc.pid} on " in out and "main.py attach" in out, out
    wait_for(lambda: len(metric_steps(run)) >= 10, 30, "more steps")
    first.signal(signal.SIGINT)
    code, out = first.finish(60)
    assert code == 130, out
    assert "stopped after" in out and "agent lost" not in out and out.count("reattached") == 1, out
    steps = metric_steps(run)
    assert steps == list(range(len(steps))), steps  # every step once, in order


def journal_states(run: Path, role: str) -> list[tuple[str, str]]:
    lines = (run / "events.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines]
    return [(e["state"], e["detail"]) for e in events if e.get("kind") == "role_state" and e.get("role") == role]


def test_launcher_killed_while_roles_start_then_attach_gives_real_states_and_each_step_once(
    tmp_path: Path, clis: list[Cli]
):
    # 20 s of steps: still running when attach reconnects on a loaded machine (with 3 s of steps, a
    # slow attach found them done, and "running" was never recorded).
    workers = [["steps", "400", "0.05"]] * 3
    cluster = role_cluster(tmp_path, *workers, extra="start_s = 2")
    run = tmp_path / "run"
    launch = Cli("launch", str(cluster), "--run-dir", str(run))
    clis.append(launch)
    wait_state(run, "worker:2", "starting")
    wait_for(lambda: metric_steps(run, "worker-0"), 30, "a first step parsed")
    launch.proc.kill()  # SIGKILL while the roles are still starting (start_s = 2)
    launch.finish(30)
    attach = Cli("attach", str(run))
    clis.append(attach)
    code, out = attach.finish(120)
    assert code == 0, out
    for i in range(3):
        states = [state for state, _ in journal_states(run, f"worker:{i}")]
        assert "running" in states and states[-1] == "succeeded", (i, states, out)
        assert metric_steps(run, f"worker-{i}") == list(range(400)), i


def test_roles_that_ended_while_the_launcher_lagged_keep_exit_codes_and_metrics(tmp_path: Path, clis: list[Cli]):
    lines = 150_000
    cluster = role_cluster(tmp_path, ["steps", str(lines), "0"], ["steps", str(lines), "0"])
    run = tmp_path / "run"
    launch = Cli("launch", str(cluster), "--run-dir", str(run))
    clis.append(launch)

    size = sum(len(step_line(i)) for i in range(lines))

    def ended_unrecorded() -> bool:
        logs = [run / "roles" / f"worker-{i}" / "attempt-1.log" for i in range(2)]
        done = all(p.is_file() and p.stat().st_size == size for p in logs)
        return done and not any(s == "succeeded" for i in range(2) for s, _ in journal_states(run, f"worker:{i}"))

    wait_for(ended_unrecorded, 60, "both workers done writing while the launcher has not recorded their end")
    wait_for(lambda: not role_pids(run), 30, "the workers' exit")
    launch.proc.kill()
    launch.finish(30)
    assert not any(s == "succeeded" for i in range(2) for s, _ in journal_states(run, f"worker:{i}")), "no lag"
    attach = Cli("attach", str(run))
    clis.append(attach)
    code, out = attach.finish(180)
    assert code == 0 and "succeeded after" in out, out
    assert re.search(r"worker:0 +succeeded +exit code 0", out) and re.search(r"worker:1 +succeeded +exit code 0", out)
    for i in range(2):
        steps = metric_steps(run, f"worker-{i}")
        # A launcher far behind samples a flood's steps (every line is in the log): never one twice,
        # and the last one is there.
        assert steps and steps == sorted(set(steps)) and steps[-1] == lines - 1, (i, len(steps), steps[-5:])
