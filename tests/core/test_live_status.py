"""A run followed from another process gets the launch's live status through its real control
socket (issue 19: the socket added ``last_lines`` to each role, the reader's ``RoleStatus(**r)``
raised TypeError, and the window silently showed no live status)."""

from __future__ import annotations

import json
from pathlib import Path

from core.cluster.spec import load
from core.controller.session import LaunchSession
from core.run import control
from core.run.events import Metrics
from core.run.reader import RunReader
from core.run.status import RoleState, RoleStatus
from tests.helpers.clusters import light_cluster
from tests.helpers.procs import assert_nothing_left
from tests.helpers.project import run_cli
from tests.helpers.waits import wait_for


def test_a_reader_of_a_live_launch_shows_the_launch_s_own_status(tmp_path: Path) -> None:
    path = light_cluster(tmp_path, workers=2, steps=0, rate=20.0)
    marker = f"--test_marker={tmp_path.name}"  # this test's processes, not another test's
    path.write_text(path.read_text().replace('"--rate_hz=20.0"', f'"--rate_hz=20.0", "{marker}"'))
    spec, problems = load(path)
    assert spec is not None, problems
    assert marker in spec.command
    ports = [t.port for t in spec.tasks()]
    session = LaunchSession.launch(spec, root=tmp_path / "runs")
    session.start()
    reader = RunReader(session.run.path)
    reader.start()
    controller = session.controller
    try:
        wait_for(
            lambda: all(
                r.state == RoleState.RUNNING and r.step for r in controller.status().roles if r.job == "worker"
            ),
            60,
            "every worker to step",
        )
        sock = reader.control_socket()
        assert sock is not None
        reply = control.request(sock, {"action": "status"})
        assert reply["ok"] and all("last_lines" in r for r in reply["roles"])
        read = [RoleStatus.from_json(r) for r in reply["roles"]]
        assert [(r.role, r.pid, r.state, r.log_path) for r in read] == [
            (r.role, r.pid, r.state, r.log_path) for r in controller.status().roles
        ]
        for role in controller.status().roles:  # one JSON round trip gives the same status back
            assert RoleStatus.from_json(json.loads(json.dumps(role.to_json()))) == role

        # `ctl status` prints the same statuses, read with the same from_json.
        result = run_cli("ctl", str(session.run.path), "status", timeout=60)
        assert result.returncode == 0, result.stderr
        for r in read:
            assert f"{r.role:<12} running    pid {r.pid:<8} restarts 0" in result.stdout

        wait_for(lambda: reader.live, 30, "the reader to take the launch's live status")
        wait_for(lambda: reader.status().role("worker:0").cpu_percent is not None, 30, "live CPU figures")
        assert {r.role: r.pid for r in reader.status().roles} == {r.role: r.pid for r in controller.status().roles}
    finally:
        controller.stop_all()
        controller.wait(60)
        session.close()
        reader.close()
        controller.close()
    assert_nothing_left(ports, marker)


def test_a_reader_opened_on_a_live_launch_has_its_live_status_before_the_first_telemetry(tmp_path: Path) -> None:
    """A window opened on a live run shows every role's latest figures (the launch's own status)
    at once, not after the reader's first pass over the run's files: opened a minute into a
    256-worker simulated run at load 15, that pass took 5-10 s and the roles table was blank
    meanwhile. Before, the first poll of the control socket came after the whole first pass, so
    every worker's metrics were published while the reader still had no live status."""
    path = light_cluster(tmp_path, workers=2, steps=0, rate=20.0)
    marker = f"--test_marker={tmp_path.name}"
    path.write_text(path.read_text().replace('"--rate_hz=20.0"', f'"--rate_hz=20.0", "{marker}"'))
    spec, problems = load(path)
    assert spec is not None, problems
    ports = [t.port for t in spec.tasks()]
    session = LaunchSession.launch(spec, root=tmp_path / "runs")
    session.start()
    controller = session.controller
    reader: RunReader | None = None
    try:
        wait_for(
            lambda: all(r.step for r in controller.status().roles if r.job == "worker"),
            60,
            "every worker to step",
        )
        reader = RunReader(session.run.path)
        live_at_metrics: list[bool] = []
        first = reader  # the callback runs on the reader's thread; it reads the same object
        reader.subscribe(lambda e: live_at_metrics.append(first.live) if isinstance(e.payload, Metrics) else None)
        reader.start()
        wait_for(lambda: len(live_at_metrics) >= 2, 30, "both workers' metrics from the reader")
        assert live_at_metrics[0], "the reader published metrics before it had the launch's live status"
        steps = [r.step for r in reader.status().roles if r.job == "worker"]
        assert all(s is not None for s in steps), steps
    finally:
        controller.stop_all()
        controller.wait(60)
        session.close()
        if reader is not None:
            reader.close()
        controller.close()
    assert_nothing_left(ports, marker)
