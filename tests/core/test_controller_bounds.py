"""The controller's queue is bounded (issue 19): when the controller thread falls behind, the
agent links wait (nothing is dropped), it says so once, and a user's command is refused rather
than queued without end."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import pytest

from core.agent import protocol
from core.cluster.spec import load
from core.controller import controller as controller_module
from core.controller.controller import Controller
from core.controller.roles import RoleMachine
from core.controller.stalls import StallWatch
from core.controller.supervisor import JUDGE_EVERY_S
from core.run.events import Event
from core.run.rundir import RunDir
from tests.helpers.clusters import light_cluster
from tests.helpers.ports import free_ports
from tests.helpers.waits import wait_for


def test_a_slow_controller_holds_back_its_agents_and_loses_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(controller_module, "MAX_QUEUE", 4)
    spec, problems = load(light_cluster(tmp_path, workers=2, steps=200, rate=200.0))
    assert spec is not None, problems
    controller = Controller(spec, RunDir.create(spec, root=tmp_path / "runs"))
    warnings: list[str] = []
    run_path = controller.run.path
    held = [False]

    def slow_listener(event: Event) -> None:  # a controller thread far slower than its agents
        if event.kind == "warning":
            warnings.append(str(event.payload.message))
        if event.kind == "role_output" and not held[0]:
            # Held at the first output until the trainers are far ahead: the agents then have
            # more chunks to send than the queue holds, however slow a loaded machine makes them.
            held[0] = True
            logs = [run_path / "roles" / f"worker-{i}" / "attempt-1.log" for i in (0, 1)]
            wait_for(lambda: all(p.exists() and p.read_text().count("\n") >= 150 for p in logs), 60, "the output")
        time.sleep(0.02)

    controller.subscribe(slow_listener)
    refused = [controller.stop_role("worker:0") for _ in range(25)]  # not started: nothing drains
    assert sum(f.exception() is not None for f in refused if f.done()) == 25 - 4
    assert "4 events behind" in str(next(f.exception() for f in refused if f.done()))
    controller.start()
    try:
        assert controller.wait(120), "the cluster did not finish"
    finally:
        controller.close()
    status = controller.status()
    # Said once, not once for every event a link found the queue full for (at 256 simulated
    # workers the journal held 23,438 of them after a minute).
    behind = [w for w in warnings if "fell 4 events behind" in w]
    assert len(behind) == 1, f"{len(behind)} warnings that the controller fell behind"
    # Nothing was dropped: every worker's last step arrived (its stop was refused or came early).
    steps = {r.role: r.step for r in status.roles if r.job == "worker"}
    assert steps["worker:1"] == 200, steps


def test_the_status_figures_rebuild_keeps_to_a_share_of_the_controller_thread(tmp_path: Path) -> None:
    """Rebuilding every role's figures 4 times a second took 28 % of the controller's thread at 256
    simulated workers; the rebuild now waits FIGURES_COST_FACTOR times what the last one cost."""
    from core.cluster.spec import parse_text
    from core.controller.roles import FIGURES_COST_FACTOR, RoleMachine
    from core.run.publish import Publisher

    ports = free_ports(2)
    spec, problems = parse_text(
        f'strategy = "custom"\ncommand = ["python", "x.py"]\n[jobs.worker]\n'
        f'tasks = ["127.0.0.1:{ports[0]}", "127.0.0.1:{ports[1]}"]\n'
    )
    assert spec is not None, problems
    roles = RoleMachine(spec, tmp_path, Publisher(), on_changed=lambda role, now: None)
    rebuilds: list[float] = []
    board_refresh = roles._board.refresh

    def costly_refresh(now: float) -> None:  # a rebuild that takes 20 ms of CPU, as at a few hundred roles
        rebuilds.append(now)
        until = time.thread_time() + 0.02
        while time.thread_time() < until:
            pass
        board_refresh(now)

    roles._board.refresh = costly_refresh  # type: ignore[method-assign]
    for tick in range(100):  # 10 s of controller ticks, 10 a second
        roles.refresh_figures(1000.0 + tick / 10, every_s=0.25)
    gaps = [b - a for a, b in itertools.pairwise(rebuilds)]
    assert gaps and min(gaps) >= 0.02 * FIGURES_COST_FACTOR - 0.05, gaps  # every_s alone: 0.3 s
    assert len(rebuilds) <= 10 / (0.02 * FIGURES_COST_FACTOR) + 1, len(rebuilds)


@pytest.mark.timeout(180)
def test_the_judges_of_every_role_run_at_their_period_not_at_every_tick(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The controller ticks 10 to 20 times a second; the stall, crash-loop and diagnosis judges,
    which look at every role, run at most every JUDGE_EVERY_S (at 256 simulated workers, judging
    every role at each tick was ~7 % of the controller's thread)."""
    ticks: list[float] = []
    judged: list[float] = []
    refresh, check = RoleMachine.refresh_figures, StallWatch.check

    def counted_refresh(self: RoleMachine, now: float, *, every_s: float) -> None:
        ticks.append(time.monotonic())
        refresh(self, now, every_s=every_s)

    def counted_check(self: StallWatch, now: float) -> None:
        judged.append(time.monotonic())
        check(self, now)

    monkeypatch.setattr(RoleMachine, "refresh_figures", counted_refresh)
    monkeypatch.setattr(StallWatch, "check", counted_check)
    spec, problems = load(light_cluster(tmp_path, workers=1, steps=100_000, rate=20.0))
    assert spec is not None, problems
    controller = Controller(spec, RunDir.create(spec, root=tmp_path / "runs"))
    controller.start()
    try:
        wait_for(lambda: len(ticks) >= 60, 120, "60 ticks of the controller")
        seen_ticks, seen_judged = list(ticks), list(judged)
    finally:
        controller.close()
    span_s = seen_ticks[-1] - seen_ticks[0]
    assert len(seen_judged) <= span_s / JUDGE_EVERY_S + 2, (len(seen_judged), len(seen_ticks), span_s)


@pytest.mark.timeout(180)
def test_a_large_cluster_s_roles_send_their_output_less_often(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every output event costs the controller the same whatever its size (at 256 simulated workers,
    a role's output 4 times a second was 22.6 % of a core, once a second 14.7 %): the controller asks
    each role's agent for a period by the cluster's size (output_period_for). Here its aim is 2 events
    a second, so this 2-role cluster is read as a 512-role one would be at 256: once a second."""
    monkeypatch.setattr(protocol, "OUTPUT_EVENTS_PER_S", 2)
    assert protocol.output_period_for(2) == protocol.MAX_OUTPUT_PERIOD_S == 1.0
    arrived: list[float] = []

    def listener(event: Event) -> None:
        if event.kind == "role_output" and event.role == "worker:0":
            arrived.append(time.monotonic())

    spec, problems = load(light_cluster(tmp_path, workers=1, steps=100_000, rate=50.0))
    assert spec is not None, problems
    controller = Controller(spec, RunDir.create(spec, root=tmp_path / "runs"))
    controller.subscribe(listener)
    controller.start()
    try:
        wait_for(lambda: len(arrived) >= 8, 120, "8 output events of worker:0")
        seen = list(arrived)
    finally:
        controller.close()
    # A load can only make them fewer; 4 a second (the default) would be 8 in under 2 s.
    span_s = seen[-1] - seen[0]
    assert len(seen) <= span_s / 1.0 + 2, (len(seen), span_s)


def test_the_output_period_grows_with_the_cluster_from_a_quarter_second_to_a_second() -> None:
    periods = {roles: protocol.output_period_for(roles) for roles in (1, 64, 128, 256, 1025)}
    assert periods == {1: 0.25, 64: 0.25, 128: 0.5, 256: 1.0, 1025: 1.0}
