"""Empty and in-between views say what is going on: the Training tab's key says why no worker has
a curve (not launched, none has stepped yet because they wait for the ps, one is between attempts)
and says "no worker ticked" only when workers with curves are all unticked; the Logs tab says why
a role has printed nothing; a tile and a row say a role is between attempts.

The statuses are the controller's own :class:`RoleStatus` records (``waiting_for`` is the
diagnosis of a wait, core/diagnosis)."""

from __future__ import annotations

import dataclasses

from core.run.status import ClusterPhase, ClusterStatus
from core.telemetry.metrics import MetricSample
from core.views.empty import log_placeholder, no_curve_text
from tests.helpers.statuses import role_status

ERROR = "ZeroDivisionError: division by zero"
NOW = 1000.0


def waiting_on_the_ps() -> tuple:  # type: ignore[type-arg]
    return (
        role_status("ps:0", state="starting"),
        role_status("worker:0", waiting_for="ps:0", waiting_message="CreateSession still waiting for ps:0"),
        role_status("worker:1", waiting_for="ps:0", waiting_message="CreateSession still waiting for ps:0"),
    )


def between_attempts() -> tuple:  # type: ignore[type-arg]
    return (
        role_status("ps:0"),
        role_status("worker:0", step=40),
        role_status(
            "worker:1",
            state="backoff",
            attempt=2,
            crash_looping=True,
            last_exit="exit code 1",
            last_error=ERROR,
            attempts=5,
            next_attempt_at=NOW + 4.2,
        ),
    )


def test_what_the_training_key_says_when_a_worker_has_no_curve() -> None:
    assert no_curve_text(None, plotted=[], ticked=0, now=NOW).startswith("Not launched")
    assert (
        no_curve_text(waiting_on_the_ps(), plotted=[], ticked=0, now=NOW)
        == "No step from any worker yet: worker:0, worker:1 wait for ps:0"
    )
    assert no_curve_text(between_attempts(), plotted=["worker:0"], ticked=1, now=NOW) == (
        f"worker:1 is crash-looping: exit 1 ({ERROR}), attempt 3 of 5; next attempt in 4 s"
    )
    assert no_curve_text(between_attempts(), plotted=["worker:0"], ticked=0, now=NOW).startswith(
        "no worker ticked: tick one in the Workers list; worker:1 is crash-looping"
    )
    fresh = (role_status("ps:0"), role_status("worker:0", state="starting"), role_status("worker:1", state="pending"))
    assert no_curve_text(fresh, plotted=[], ticked=0, now=NOW) == (
        "No step from any worker yet: worker:0 is starting; worker:1 has not started yet"
    )
    quiet = (role_status("ps:0"), role_status("worker:0"), role_status("worker:1"))
    assert no_curve_text(quiet, plotted=[], ticked=0, now=NOW) == (
        "No step from any worker yet: worker:0, worker:1 run, no step printed yet"
    )
    ended = (role_status("worker:0", state="failed", last_exit="exit code 2", last_error="OSError: no data"),)
    assert no_curve_text(ended, plotted=[], ticked=0, now=NOW) == (
        "The workers ended without printing a step: worker:0 failed: exit 2 (OSError: no data)"
    )
    assert no_curve_text((role_status("ps:0"),), plotted=[], ticked=0, now=NOW).startswith("No worker in this run")
    healthy = (role_status("ps:0"), role_status("worker:0", step=3))
    assert no_curve_text(healthy, plotted=["worker:0"], ticked=1, now=NOW) == ""


def test_the_training_tab_never_says_no_worker_ticked_of_workers_that_have_not_reported(qtbot) -> None:
    """On the old code the key read "no worker ticked" for a run whose workers all waited for the
    ps (none had a curve to tick), and before any launch."""
    from gui.run.tabs.training import TrainingPanel

    panel = TrainingPanel()
    qtbot.addWidget(panel)
    panel.show()
    panel.set_status(None, NOW)
    panel.refresh(force=True)
    assert panel.key_text().startswith("Not launched")
    panel.set_status(waiting_on_the_ps(), NOW)
    panel.refresh(force=True)
    assert panel.key_text() == "No step from any worker yet: worker:0, worker:1 wait for ps:0"
    # worker:0 steps; worker:1 crash-loops: its curve is missing for a reason the key says.
    step = MetricSample(t=1.0, step=40, loss=0.5, step_time_s=0.1, steps_per_sec=None, extra={}, source="tf1")
    panel.add_samples("worker:0", [dataclasses.asdict(step)])
    panel.set_status(between_attempts(), NOW)
    panel.refresh(force=True)
    assert panel.key_text() == (
        f"■ worker:0 · worker:1 is crash-looping: exit 1 ({ERROR}), attempt 3 of 5; next attempt in 4 s"
    )
    panel.set_status(between_attempts(), NOW + 2)  # the countdown moves on
    panel.refresh(force=True)
    assert panel.key_text().endswith("next attempt in 2 s")
    panel.workers.item(0).setCheckState(panel.workers.item(0).checkState().Unchecked)
    panel.set_status(between_attempts(), NOW + 2)
    panel.refresh(force=True)
    assert panel.key_text().startswith("no worker ticked: tick one in the Workers list")


def test_the_logs_tab_tile_and_row_say_a_role_is_between_attempts_or_waiting(qtbot) -> None:
    """On the old code an empty log was a blank view, a role in back-off a bare "backoff"."""
    from core.views.overview import build_overview
    from gui.run.roles import RolesView
    from gui.run.tabs.logs import LogPanel

    looping = between_attempts()[2]
    plain_backoff = role_status("worker:2", state="backoff", attempt=1, returncode=0)
    assert log_placeholder("worker:1", looping, NOW) == (
        f"worker:1 has printed nothing here yet: crash-looping: exit 1 ({ERROR}), attempt 3 of 5."
    )
    assert log_placeholder("worker:2", plain_backoff, NOW) == (
        "worker:2 has printed nothing yet; it is between attempts: attempt 2 next."
    )
    waiting = waiting_on_the_ps()[1]
    assert log_placeholder("worker:0", waiting, NOW) == "worker:0 runs and has printed nothing yet; it waits for ps:0."
    assert log_placeholder("ps:0", role_status("ps:0", state="pending"), NOW).startswith("ps:0 has not started yet")
    assert log_placeholder(None, None).startswith("Select a role")

    panel = LogPanel()
    qtbot.addWidget(panel)
    panel.show()
    panel.set_roles(["worker:0", "worker:1"])
    panel.show_role("worker:0")
    panel.set_status(waiting_on_the_ps(), NOW)
    assert panel.view.placeholderText() == "worker:0 runs and has printed nothing yet; it waits for ps:0."
    panel.show_role("worker:1")
    assert panel.view.placeholderText() == "worker:1 runs and has printed nothing yet; it waits for ps:0."

    model = build_overview((*between_attempts(), plain_backoff, *waiting_on_the_ps()[1:2]), now=NOW)
    assert model.cell("worker:2").notes == ("restarting",)  # type: ignore[union-attr]
    tiles = build_overview(waiting_on_the_ps(), now=NOW)
    assert tiles.cell("worker:0").notes == ("waits for ps0",)  # type: ignore[union-attr]
    assert tiles.cell("worker:0").category == "waiting"  # type: ignore[union-attr]

    view = RolesView(lambda role, n: [])
    qtbot.addWidget(view)
    view.show_status(ClusterStatus(ClusterPhase.RUNNING, None, "", (plain_backoff,)), {})
    assert view.cell("worker:2", "State") == "backoff (attempt 2 next)"
