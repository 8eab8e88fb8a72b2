"""Typed events: the type checker refuses a wrong kind or field, every payload goes to its JSON record
and back unchanged, and the journal lines an older TowerDeck wrote read as the same records."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.run import journal
from core.run.events import (
    STATE_KINDS,
    TELEMETRY_KINDS,
    ClusterStateChanged,
    Event,
    EventKind,
    GpuStatus,
    HostStateChanged,
    Metrics,
    RecoveryChanged,
    RoleCrashLoop,
    RoleOutput,
    RolePid,
    RoleStalled,
    RoleStateChanged,
    RoleWaiting,
    Sample,
    Scalars,
    SlurmChanged,
    WarningMessage,
    payload_from_record,
)
from core.run.status import ClusterPhase, RoleState
from tests.helpers.project import ROOT

OLD_RUN = ROOT / "tests" / "fixtures" / "run_c23e87e"  # written by commit c23e87e, before events were typed


@pytest.mark.timeout(180)
def test_mypy_rejects_a_mistyped_kind_a_wrong_field_and_a_dict_payload(tmp_path: Path) -> None:
    wrong = tmp_path / "wrong.py"
    wrong.write_text(
        textwrap.dedent(
            """
            from core.run.events import Event, EventKind, RoleStateChanged
            from core.run.status import RoleState

            kind = EventKind.ROLE_STAET
            payload = RoleStateChanged(old=None, state=RoleState.RUNNING, detial="pid 1")
            event = Event(1.0, "worker:0", {"state": "running"})
            """
        )
    )
    right = tmp_path / "right.py"
    right.write_text(
        textwrap.dedent(
            """
            from core.run.events import Event, EventKind, RoleStateChanged
            from core.run.status import RoleState

            kind = EventKind.ROLE_STATE
            event = Event(1.0, "worker:0", RoleStateChanged(old=None, state=RoleState.RUNNING, detail="pid 1"))
            """
        )
    )
    mypy = [sys.executable, "-m", "mypy", "--no-incremental", "--follow-imports=silent", "--strict"]
    env_root = {"cwd": ROOT, "capture_output": True, "text": True, "timeout": 170}
    bad = subprocess.run([*mypy, str(wrong)], check=False, **env_root)  # type: ignore[call-overload]
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert 'has no attribute "ROLE_STAET"' in bad.stdout, bad.stdout
    assert 'Unexpected keyword argument "detial" for "RoleStateChanged"' in bad.stdout, bad.stdout
    assert 'Argument 3 to "Event" has incompatible type "dict[str, str]"' in bad.stdout, bad.stdout
    good = subprocess.run([*mypy, str(right)], check=False, **env_root)  # type: ignore[call-overload]
    assert good.returncode == 0, good.stdout + good.stderr


def test_every_kind_has_its_payload_and_the_journal_keeps_only_the_state_kinds() -> None:
    assert frozenset(EventKind) == STATE_KINDS | TELEMETRY_KINDS and not STATE_KINDS & TELEMETRY_KINDS
    for kind in EventKind:
        assert journal.is_state_record(str(kind)) == (kind in STATE_KINDS)
    assert journal.is_state_record("command") and journal.is_state_record("notify")
    # A kind nobody knows is not journalled nor replayed (it was, silently, as a "state" record).
    assert not journal.is_state_record("role_staet") and not journal.is_state_record(["role_state"])
    assert payload_from_record({"kind": "role_staet", "state": "running"}) is None


texts = st.text(max_size=20)
opt_int = st.none() | st.integers(-(2**31), 2**31)
opt_float = st.none() | st.floats(allow_nan=False, allow_infinity=False, width=32)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | texts,
    lambda inner: st.lists(inner, max_size=3),
    max_leaves=5,
)
records = st.dictionaries(st.sampled_from(["step", "loss", "t", "tag", "value"]), json_values, max_size=4)
payloads = st.one_of(
    st.builds(
        RoleStateChanged,
        old=st.none() | st.sampled_from(RoleState),
        state=st.sampled_from(RoleState),
        detail=texts,
        pid=opt_int,
        attempt=st.integers(0, 100),
        restarts=st.integers(0, 100),
        returncode=opt_int,
        signal=opt_int,
        error=texts,
    ),
    st.builds(RolePid, pid=opt_int, attempt=st.integers(0, 100), log=texts, pid_started=opt_float),
    st.builds(RoleOutput, text=texts, attempt=opt_int, offset=opt_int),
    st.builds(
        RoleStalled,
        stalled=st.booleans(),
        stalled_for_s=opt_float,
        step=opt_int,
        stall_after_s=opt_float,
        attempt=st.integers(0, 9),
        detail=texts,
    ),
    st.builds(
        RoleWaiting,
        waiting=st.booleans(),
        waiting_for=st.none() | texts,
        cause=texts,
        certain=st.booleans(),
        message=texts,
        fix=texts,
        line=texts,
        since=opt_float,
    ),
    st.builds(ClusterStateChanged, phase=st.sampled_from(ClusterPhase), result=st.none() | texts, reason=texts),
    st.builds(
        RoleCrashLoop,
        looping=st.booleans(),
        attempt=st.integers(0, 9),
        attempts=opt_int,
        exit=texts,
        error=texts,
        next_attempt_at=opt_float,
        detail=texts,
    ),
    st.builds(
        RecoveryChanged,
        phase=st.sampled_from(["started", "recovered", "failed"]),
        number=st.integers(0, 9),
        of=st.integers(0, 9),
        cause=texts,
        action=texts,
        roles=st.lists(texts, max_size=3).map(tuple),
        step_before=opt_int,
        resumed_step=opt_int,
        lost_steps=opt_int,
        checkpoint=st.none() | texts,
        detail=texts,
    ),
    st.builds(HostStateChanged, host=texts, state=texts, reason=texts, attempt=opt_int, retry_in_s=opt_float),
    st.builds(GpuStatus, host=texts, status=st.none() | texts, count=opt_int),
    st.builds(
        SlurmChanged,
        state=texts,
        job_id=st.none() | texts,
        reason=texts,
        partition=st.none() | texts,
        nodelist=texts,
        nodes=st.lists(texts, max_size=3).map(tuple),
        hosts=st.dictionaries(texts, texts, max_size=3),
        steps=st.dictionaries(texts, texts, max_size=3),
    ),
    st.builds(WarningMessage, message=texts, path=st.none() | texts, lost_bytes=opt_int),
    st.builds(Metrics, samples=st.lists(records, max_size=3)),
    st.builds(Scalars, points=st.lists(records, max_size=3), attempt=opt_int),
    st.builds(
        Sample,
        host=texts,
        figures=st.none() | records,
        roles=st.dictionaries(texts, records, max_size=2),
        gpus=st.lists(records, max_size=2),
    ),
)


@given(payloads, st.floats(0, 2e9, allow_nan=False), st.none() | texts)
def test_every_payload_goes_to_its_json_record_and_back_unchanged(payload: object, t: float, role: str | None) -> None:
    event = Event(t, role, payload)  # type: ignore[arg-type]
    line = json.dumps(event.to_record())
    back = Event.from_record(json.loads(line))
    assert back == event


def test_the_journal_an_older_towerdeck_wrote_reads_as_the_same_records() -> None:
    lines = (OLD_RUN / "events.jsonl").read_text().splitlines()
    checked = 0
    for line in lines:
        record = json.loads(line)
        if not journal.is_state_record(record.get("kind")) or record["kind"] in ("command", "notify"):
            continue
        event = Event.from_record(record)
        assert event is not None, line
        # Written again, the record is the one the old code wrote, field for field and in order.
        assert event.to_record() == record, line
        assert list(event.to_record()) == list(record), line
        checked += 1
    assert checked >= 10
