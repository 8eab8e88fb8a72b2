"""The roles table and banner show a diagnosed wait (issue 13): who waits for whom, and the fix."""

from __future__ import annotations

import time
from pathlib import Path

from core.diagnosis.rules import Diagnoser
from core.run.status import ClusterPhase, ClusterStatus, RoleState, RoleStatus

FIXTURE = Path(__file__).parent.parent / "core" / "fixtures" / "stuck_worker1_create_session.log"


def role(name: str, state: RoleState, **extra: object) -> RoleStatus:
    job, index = name.split(":")
    now = time.time()
    fields: dict[str, object] = dict(
        role=name,
        job=job,
        index=int(index),
        host="127.0.0.1",
        address="127.0.0.1:1",
        state=state,
        state_since=now,
        pid=None,
        attempt=1,
        restarts=0,
        returncode=None,
        signal=None,
        started_at=now - 60,
        ended_at=None,
        detail="",
        log_path=None,
    )
    fields.update(extra)
    return RoleStatus(**fields)  # type: ignore[arg-type]


def test_a_waiting_role_reads_waiting_for_its_peer_with_the_fix(qtbot):
    from PySide6 import QtCore

    from gui.run.roles import STATE_COLUMN, RolesView

    # The diagnosis of the recorded real output, as the controller makes it.
    diagnoser = Diagnoser(["ps:0", "worker:0", "worker:1"])
    for name in ("ps:0", "worker:0", "worker:1"):
        diagnoser.on_state(name, "running", 0.0)
    diagnoser.on_state("worker:0", "succeeded", 10.0, detail="exit code 0")
    [diagnosis] = [d for d in diagnoser.on_output("worker:1", FIXTURE.read_text(), 42.0) if d.certain]

    view = RolesView(lambda role, n: [])
    qtbot.addWidget(view)
    status = ClusterStatus(
        ClusterPhase.RUNNING,
        None,
        "",
        (
            role("ps:0", RoleState.RUNNING),
            role("worker:0", RoleState.SUCCEEDED, returncode=0),
            role(
                "worker:1",
                RoleState.RUNNING,
                waiting_for=diagnosis.waiting_for,
                waiting_message=diagnosis.message,
                waiting_fix=diagnosis.fix,
            ),
        ),
    )
    view.show_status(status, {})
    cell = view.state_index("worker:1")
    assert cell.column() == STATE_COLUMN and cell.data() == "running (waiting for worker:0)"
    R = QtCore.Qt.ItemDataRole
    assert cell.data(R.FontRole).bold() and "device_filters" in cell.data(R.ToolTipRole)
    assert not view.banner.isHidden()
    banner = view.banner.text()
    assert "<b>worker:1 is waiting for worker:0</b>" in banner
    assert "which exited (succeeded, exit code 0) 32 s ago; it will wait forever" in banner
    assert "Fix: Stop worker:1" in banner
    # Once the wait clears, the banner goes.
    cleared = status.roles[2].__class__(**{**status.roles[2].__dict__, "waiting_for": None})
    view.show_status(ClusterStatus(ClusterPhase.RUNNING, None, "", (*status.roles[:2], cleared)), {})
    assert view.banner.isHidden()
    assert view.cell("worker:1", "State") == "running"


def test_the_cluster_form_keeps_the_stuck_cluster_keys_it_has_no_field_for(qtbot):
    from gui.editor.cluster import ClusterForm

    form = ClusterForm(lambda job: ("127.0.0.1", 2222))
    qtbot.addWidget(form)
    data = {
        "name": "x",
        "strategy": "between_graph",
        "command": ["python", "t.py"],
        "success_policy": "chief",
        "start_stall_after_s": 90.0,
        "stall_after_s": 30.0,
        "jobs": {"ps": {"tasks": ["127.0.0.1:2222"]}, "worker": {"tasks": ["127.0.0.1:2223"]}},
    }
    form.set_data(data)
    out, problems = form.data()
    assert not problems
    assert out["success_policy"] == "chief" and out["start_stall_after_s"] == 90.0 and out["stall_after_s"] == 30.0
    assert not form.has_unknown_key(["success_policy"])
