"""Notifications (``[notify]``): the user's command gets each one as JSON on stdin, with a
timeout, at most one per kind a minute, its failures reported and never fatal to the run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from core.cluster.notify_table import NotifyConfig
from core.cluster.spec import dumps, load, parse_text
from core.controller.session import LaunchSession
from core.notify import Notification, Notifier
from core.run import journal
from core.run.events import Event
from tests.helpers.cli_launch import Launch
from tests.helpers.events import make_event
from tests.helpers.ports import free_ports
from tests.helpers.procs import gone
from tests.helpers.project import ROOT, TRAINERS, run_cli
from tests.helpers.waits import wait_for

SINK = ROOT / "tests" / "helpers" / "notify_sink.py"

CLUSTER = """
name = "notified"
workdir = "{trainers}"
command = ["python", "-u", "light_trainer.py", "--steps={steps}", "--rate_hz=20"]
stop_grace_s = 3
stall_after_s = {stall}
[jobs.ps]
tasks = ["127.0.0.1:{p[0]}"]
[jobs.worker]
tasks = ["127.0.0.1:{p[1]}", "127.0.0.1:{p[2]}"]
restart = "Never"
[notify]
command = {command}
timeout_s = {timeout}
events = {events}
"""


def cluster_file(
    tmp_path: Path,
    command: list[str],
    steps: int = 0,
    timeout: float = 10,
    stall: float = 0,
    events: tuple[str, ...] = ("run_finished", "role_failed", "stalled", "host_lost"),
) -> Path:
    path = tmp_path / "notified.toml"
    text = CLUSTER.format(
        trainers=TRAINERS,
        steps=steps,
        p=free_ports(3),
        command=json.dumps(command),
        timeout=timeout,
        stall=stall,
        events=json.dumps(list(events)),
    )
    path.write_text(text)
    return path


def received(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


# ---------------------------------------------------------------------------- the cluster file


def test_notify_table_parses_checks_and_writes_back() -> None:
    base = 'command = ["python", "t.py"]\n[jobs.ps]\ntasks = ["127.0.0.1:2222"]\n[jobs.worker]\ntasks = ["127.0.0.1:2223"]\n'
    spec, problems = parse_text(base + '[notify]\ncommand = "tell-me --to ops"\nevents = ["role_failed"]\n')
    assert spec is not None and spec.notify is not None, problems
    assert spec.notify.command == ("tell-me", "--to", "ops") and spec.notify.events == ("role_failed",)
    again, _ = parse_text(dumps(spec))
    assert again is not None and again.notify == spec.notify

    _, problems = parse_text(base + '[notify]\ncommand = []\nevents = ["stalld"]\ntimeout_s = -1\nmail = 1\n')
    text = "\n".join(p.format("c.toml") for p in problems)
    assert "notify.command: is empty" in text
    assert "notify.events[0]: 'stalld' is not an event kind" in text and "did you mean 'stalled'?" in text
    assert "notify.timeout_s: must be at least 0.1" in text
    assert "notify.mail: unknown key 'mail'" in text
    _, problems = parse_text("notify = 3\n" + base)
    assert any("notify: must be a table" in p.format() for p in problems)
    _, problems = parse_text(base + "[notify]\nevents = []\n")
    assert [p.field for p in problems] == ["notify.command"]  # missing: nothing else can be used


# ---------------------------------------------------------------------------- the rate limit


def test_one_notification_per_kind_a_minute_the_rest_folded(tmp_path: Path) -> None:
    out = tmp_path / "got.jsonl"
    now = [1000.0]
    notifier = Notifier(NotifyConfig((sys.executable, str(SINK), str(out))), {"run": "r1"}, clock=lambda: now[0])
    notifier.start()
    try:

        def failed(role: str) -> Event:
            return make_event(
                "role_state", time.time(), role, {"state": "failed", "detail": f"{role} died", "restarts": 0}
            )

        notifier.on_event(failed("worker:0"))  # sent at once
        wait_for(lambda: len(received(out)) == 1, 30, "the first notification")
        for role in ("worker:1", "worker:2", "worker:3"):
            now[0] += 5
            notifier.on_event(failed(role))  # within the minute: held, the newest kept
        notifier.on_event(make_event("role_state", time.time(), "worker:4", {"state": "running"}))  # not a notification
        notifier.on_event(make_event("role_stalled", time.time(), "worker:5", {"stalled": True, "detail": "no step"}))
        wait_for(lambda: len(received(out)) == 2, 30, "the other kind, not held")
        time.sleep(0.5)  # the notifier thread polls several times: nothing more may come yet
        assert [p["kind"] for p in received(out)] == ["role_failed", "stalled"]

        now[0] += 46  # 61 s after the first role_failed
        wait_for(lambda: len(received(out)) == 3, 30, "the held one, when its minute is up")
        folded = received(out)[2]
        assert folded["kind"] == "role_failed" and folded["role"] == "worker:3" and folded["folded"] == 2

        now[0] += 1
        notifier.on_event(failed("worker:6"))  # held again (1 s after the last)
        notifier.on_event(
            make_event("cluster_state", time.time(), None, {"phase": "done", "result": "failed", "reason": "x"})
        )
        wait_for(lambda: len(received(out)) == 4, 30, "run_finished")
        final = received(out)[3]
        assert final["kind"] == "run_finished" and final["event"]["result"] == "failed"
        assert final["unsent"] == [
            {"kind": "role_failed", "title": "worker:6 failed", "message": "worker:6 died", "count": 1}
        ]
    finally:
        notifier.close()
    assert received(out)[0] | {"time": "", "t": 0} == {
        "towerdeck_notification": 1,
        "kind": "role_failed",
        "title": "worker:0 failed",
        "message": "worker:0 died",
        "t": 0,
        "time": "",
        "role": "worker:0",
        "host": None,
        "run": "r1",
        # The event's own fields: a typed role_state carries every field of its kind.
        "event": {
            "old": None,
            "state": "failed",
            "detail": "worker:0 died",
            "pid": None,
            "attempt": 0,
            "restarts": 0,
            "returncode": None,
            "signal": None,
        },
        "folded": 0,
    }


def test_a_failing_command_is_reported_not_raised(tmp_path: Path) -> None:
    reports: list[Event] = []
    kept: list[dict[str, Any]] = []
    notifier = Notifier(
        NotifyConfig((sys.executable, str(SINK), str(tmp_path / "x"), "--fail")), {}, journal=kept.append
    )
    notifier.subscribe(reports.append)
    notifier.start()
    notifier.offer(Notification("run_finished", "run succeeded", "", time.time()))
    notifier.close()
    assert [e.kind for e in reports] == ["warning"]
    assert "exited with code 3: mail server said no" in reports[0].payload.message
    assert {
        "kind": "notify",
        "notification": "run_finished",
        "error": "exited with code 3: mail server said no",
    }.items() <= kept[0].items()
    missing = Notifier(NotifyConfig((str(tmp_path / "no-such-program"),)), {})
    missing.subscribe(reports.append)
    missing.start()
    missing.offer(Notification("run_finished", "run succeeded", "", time.time()))
    missing.close()
    assert "could not start" in reports[-1].payload.message


# ---------------------------------------------------------------------------- real runs


def test_a_killed_role_sends_its_json_to_the_command(tmp_path: Path, launches: list[Launch]) -> None:
    out = tmp_path / "got.jsonl"
    cluster = cluster_file(tmp_path, [sys.executable, str(SINK), str(out)])
    launch = Launch(cluster, tmp_path / "run")
    launches.append(launch)
    worker = launch.wait_role("worker:1", "running")
    launch.wait_output("worker:1", r"Step: \d+")
    killed = launch.ctl("signal", "worker:1", "KILL")  # a crash: `ctl kill` would be a stop the user asked for
    assert killed.returncode == 0, killed.stderr
    code, printed = launch.finish()
    assert code == 1, printed  # the run failed: worker:1 failed for good (restart policy Never)
    got = received(out)
    assert [p["kind"] for p in got] == ["role_failed", "run_finished"], got
    role_failed, finished = got
    assert role_failed["role"] == "worker:1" and role_failed["title"] == "worker:1 failed"
    assert role_failed["event"]["signal"] == 9 and role_failed["event"]["state"] == "failed"
    assert role_failed["event"]["pid"] is None and worker["pid"] > 0
    assert role_failed["run"] == "run" and role_failed["run_dir"] == str(tmp_path / "run")
    assert role_failed["cluster"] == "notified" and role_failed["folded"] == 0
    assert finished["event"]["result"] == "failed" and "worker:1 failed" in finished["message"]
    records = [r for r in journal.iter_journal(tmp_path / "run") if r["kind"] == "notify"]
    assert [(r["notification"], r.get("ok")) for r in records] == [("role_failed", True), ("run_finished", True)]


def test_a_hanging_command_is_killed_and_reported_while_the_run_goes_on(tmp_path: Path) -> None:
    out = tmp_path / "hang"
    cluster = cluster_file(
        tmp_path, [sys.executable, str(SINK), str(out), "--hang"], steps=0, timeout=3, stall=1, events=("stalled",)
    )
    spec, problems = load(cluster)
    assert spec is not None, problems
    session = LaunchSession.launch(spec, root=tmp_path / "runs")
    events: list[Event] = []
    session.subscribe(events.append)
    session.start()
    controller = session.controller
    pid_file = Path(str(out) + ".pid")
    try:
        wait_for(lambda: (controller.status().roles[2].step or 0) > 5, 60, "worker:1 training")
        controller.signal_role("worker:1", "STOP").result(10)  # no more steps: stalled after 1 s
        wait_for(pid_file.exists, 60, "the notification command to start")
        hung = psutil.Process(int(pid_file.read_text()))
        step = controller.status().roles[1].step or 0
        # The run goes on while the command hangs: worker:0 keeps training.
        wait_for(lambda: (controller.status().roles[1].step or 0) > step + 10, 30, "worker:0 to go on")
        assert hung.is_running() and not any("timed out" in str(getattr(e.payload, "message", None)) for e in events)
        wait_for(
            lambda: any("timed out after 3 s" in str(getattr(e.payload, "message", None)) for e in events),
            30,
            "the report",
        )
        wait_for(lambda: not hung.is_running() or hung.status() == psutil.STATUS_ZOMBIE, 10, "the command killed")
        assert controller.status().phase == "running"
        controller.signal_role("worker:1", "CONT").result(10)
    finally:
        controller.stop_all()
        controller.wait(60)
        controller.close()
        session.close()
    warnings = [r["message"] for r in journal.iter_journal(session.run.path) if r["kind"] == "warning"]
    assert any(
        m.startswith("notify command for stalled (worker:1 stalled) timed out after 3 s (killed)") for m in warnings
    )
    assert not os.path.exists(out)  # it never got past its sleep


def test_attach_notifies_too(tmp_path: Path, launches: list[Launch]) -> None:
    out = tmp_path / "got.jsonl"
    cluster = cluster_file(tmp_path, [sys.executable, str(SINK), str(out)], steps=200)
    launch = Launch(cluster, tmp_path / "run")
    launches.append(launch)
    launch.wait_role("worker:1", "running")
    assert launch.ctl("detach").returncode == 0
    code, printed = launch.finish()
    assert code == 0 and "left running" in printed, printed
    assert received(out) == []  # leaving a run running is not the run finishing
    attached = run_cli("attach", str(tmp_path / "run"), "--progress-every", "0", timeout=240)
    assert attached.returncode == 0, attached.stdout + attached.stderr
    got = received(out)
    assert [(p["kind"], p["event"]["result"]) for p in got] == [("run_finished", "succeeded")]
    assert got[0]["run_dir"] == str(tmp_path / "run")


def test_launch_prints_a_failing_command_and_succeeds(tmp_path: Path) -> None:
    cluster = cluster_file(tmp_path, [sys.executable, str(SINK), str(tmp_path / "x"), "--fail"], steps=10)
    result = run_cli("launch", str(cluster), "--run-dir", str(tmp_path / "run"), "--progress-every", "0")
    assert result.returncode == 0, result.stdout + result.stderr  # the run succeeded all the same
    assert (
        "warning: notify command for run_finished (run succeeded) exited with code 3: mail server said no; "
        "the run is not affected" in result.stdout
    ), result.stdout


def test_validate_warns_when_the_notify_program_is_missing(tmp_path: Path) -> None:
    cluster = cluster_file(tmp_path, ["no-such-notifier-xyz", "--to", "ops"])
    result = run_cli("validate", str(cluster), "--no-ports")
    assert result.returncode == 0, result.stderr  # a warning: the run itself can launch
    assert "warning: notify.command: 'no-such-notifier-xyz' was not found on PATH" in result.stderr, result.stderr
    assert "fix: install it, or give its full path" in result.stderr


def test_a_command_still_running_when_towerdeck_exits_is_killed_not_orphaned(tmp_path: Path) -> None:
    # The window does not wait for its notifier when it closes a run; the process may then exit.
    out = tmp_path / "hang"
    script = f"""
import sys, time
sys.path.insert(0, {str(ROOT)!r})
from core.cluster.notify_table import NotifyConfig
from core.notify import Notification, Notifier
notifier = Notifier(NotifyConfig(({sys.executable!r}, {str(SINK)!r}, {str(out)!r}, "--hang"), timeout_s=600), {{}})
notifier.start()
notifier.offer(Notification("run_finished", "run failed", "", time.time()))
deadline = time.time() + 60
while not __import__("os").path.exists({str(out) + ".pid"!r}):
    assert time.time() < deadline
    time.sleep(0.05)
notifier.close(0)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    pid = int(Path(str(out) + ".pid").read_text())
    wait_for(lambda: gone(pid), 10, "gone")


def test_which_events_are_notifications() -> None:
    from core.notify import classify

    def kind(event_kind: str, role: str | None = None, **data: Any) -> tuple[str, str] | None:
        n = classify(make_event(event_kind, 1.0, role, data))
        return (n.kind, n.title) if n is not None else None

    assert kind("cluster_state", phase="done", result="succeeded", reason="training finished") == (
        "run_finished",
        "run succeeded",
    )
    assert kind("cluster_state", phase="failing", result="failed") is None  # not over yet
    assert kind("cluster_state", phase="detached") is None  # left running is not finished
    assert kind("role_state", "worker:1", state="failed", restarts=3) == (
        "role_failed",
        "worker:1 failed after 3 restarts",
    )
    assert kind("role_state", "worker:1", state="backoff") is None  # a restart is coming
    assert kind("role_stalled", "worker:0", stalled=True, detail="no step") == ("stalled", "worker:0 stalled")
    assert kind("role_stalled", "worker:0", stalled=False) is None
    assert kind("role_waiting", "worker:1", waiting=True, certain=True, message="m") == ("stalled", "worker:1 is stuck")
    assert kind("role_waiting", "worker:1", waiting=True, certain=False) is None  # may end by itself
    assert kind("host_state", host="10.0.0.2", state="lost", reason="ssh gave up") == (
        "host_lost",
        "host 10.0.0.2 lost",
    )
    assert kind("host_state", host="10.0.0.2", state="reconnecting") is None
    assert kind("slurm", job_id="42", state="ended", reason="TIMEOUT") == ("host_lost", "Slurm job 42 ended")
    assert kind("slurm", job_id="42", state="cancelled", reason="the run is over") is None  # TowerDeck's own
    assert kind("metrics", "worker:0", samples=[]) is None
