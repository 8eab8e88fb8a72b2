"""The status rebuild's cost is bounded by what changed: a refresh of 257 roles of which one took
new records builds one role's status and keeps the other 256 objects (at 256 simulated workers the
rebuild of every role's 39-field status, several times a second, was the controller thread's
largest single cost). Kept statuses must never be stale: every change a table shows rebuilds."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from core.cluster.spec import ClusterSpec, parse_text
from core.controller.roles import RoleMachine
from core.run.events import RoleStalled
from core.run.publish import Publisher
from core.run.role_view import apply_sample
from core.run.status import RoleState, RoleStatus, role_status
from core.telemetry.metrics import MetricSample

WORKERS = 256


def _spec() -> ClusterSpec:
    # Never launched: the addresses only need to be distinct.
    tasks = ", ".join(f'"127.0.0.1:{20000 + i}"' for i in range(WORKERS))
    spec, problems = parse_text(
        f'strategy = "custom"\ncommand = ["python", "x.py"]\n[jobs.ps]\ntasks = ["127.0.0.1:19999"]\n'
        f"[jobs.worker]\ntasks = [{tasks}]\n"
    )
    assert spec is not None, problems
    return spec


def _trained(tmp_path: Path) -> RoleMachine:
    roles = RoleMachine(_spec(), tmp_path, Publisher(), on_changed=lambda role, now: None)
    for role in roles:
        role.enter_state(RoleState.RUNNING, 999.0, "")  # process figures are shown while it lives
        for i in range(20):
            role.stats.add(MetricSample(1000.0 + i * 0.1, i, 1.0 / (i + 1), None, None, {}, "classic"))
    roles.refresh_figures(2000.0, every_s=0.0)
    return roles


def _rebuilt(before: tuple[RoleStatus, ...], after: tuple[RoleStatus, ...]) -> list[str]:
    assert [r.role for r in before] == [r.role for r in after]
    return [b.role for a, b in zip(before, after, strict=True) if a is not b]


def test_a_refresh_where_one_role_of_257_took_a_record_builds_one_status(tmp_path: Path) -> None:
    roles = _trained(tmp_path)
    before = roles.status().roles
    assert len(before) == WORKERS + 1
    # A record in the same second as the newest: the run's window ends in the same bucket.
    roles.find("worker:7").stats.add(MetricSample(1001.95, 20, 0.04, None, None, {}, "classic"))
    roles.refresh_figures(2000.5, every_s=0.0)
    after = roles.status().roles
    assert _rebuilt(before, after) == ["worker:7"]
    assert after[8].step == 20 and before[8].step == 19


def test_every_change_a_table_shows_rebuilds_that_role(tmp_path: Path) -> None:
    roles = _trained(tmp_path)
    before = roles.status().roles
    worker = roles.find("worker:3")
    # A host sample's figures, set on the view by apply_sample.
    apply_sample(roles.by_name(), {"roles": {"worker:5": {"cpu_percent": 55.0, "rss_bytes": 1, "threads": 2}}})
    worker.detail = "told something"  # a field set directly, as the controller's modules do
    roles.refresh_figures(2001.0, every_s=0.0)
    after = roles.status().roles
    assert _rebuilt(before, after) == ["worker:3", "worker:5"]
    assert after[4].detail == "told something" and after[6].cpu_percent == 55.0

    # The run's window moving into the next second changes every role's window sums.
    roles.find("worker:0").stats.add(MetricSample(1003.5, 20, 0.04, None, None, {}, "classic"))
    roles.refresh_figures(2002.0, every_s=0.0)
    moved = roles.status().roles
    assert len(_rebuilt(after, moved)) == WORKERS + 1


def test_a_stalled_role_s_status_counts_on_at_every_refresh(tmp_path: Path) -> None:
    roles = _trained(tmp_path)
    worker = roles.find("worker:2")
    worker.apply(2000.0, RoleStalled(True, stalled_for_s=10.0))
    roles.refresh_figures(2001.0, every_s=0.0)
    first = roles.status().role("worker:2")
    roles.refresh_figures(2003.0, every_s=0.0)
    second = roles.status().role("worker:2")
    assert (first.stalled_for_s, second.stalled_for_s) == (11.0, 13.0)


def test_the_status_made_without_init_is_the_dataclass_s_own(tmp_path: Path) -> None:
    roles = _trained(tmp_path)
    for status in roles.status().roles:
        made = RoleStatus(**{f.name: getattr(status, f.name) for f in dataclasses.fields(RoleStatus)})
        assert made == status and vars(made) == vars(status)
    values = {f.name: getattr(status, f.name) for f in dataclasses.fields(RoleStatus)}
    del values["detail"]
    try:
        role_status(values)
    except TypeError as exc:  # a field left out is said, as __init__ says it
        assert "detail" in str(exc)
    else:
        raise AssertionError("a status without its detail was made")
