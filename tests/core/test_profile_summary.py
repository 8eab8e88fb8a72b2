"""Reading xprof's tables into a role's profile, side by side, and the profile commands' refusals
that need no TensorFlow (a light cluster of real processes on real ports)."""

from __future__ import annotations

import json
import math
import socket
import statistics
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.profiling.capture import Target, capture_lock, select
from core.profiling.env import ProfileError, profiler_python
from core.profiling.summary import OpTime, RoleProfile, format_profiles, parse
from tests.helpers.cli_launch import Launch
from tests.helpers.ports import free_ports
from tests.helpers.project import (
    ROOT,
    TRAINERS,
    run_cli,
)
from tests.helpers.statuses import role_status
from tests.helpers.tmpfs import fill, make_read_only, mounted_tmpfs

FIXTURE = ROOT / "tests" / "core" / "fixtures" / "profile" / "tables_one_worker.json"


def step_column(tables: dict[str, Any], column: str) -> list[float]:
    """One column of the recorded step table, read by its header (what xprof's page shows)."""
    for table in tables["overview_page"]:
        ids = [c["id"] for c in table.get("cols", [])]
        if "stepTimeMs" in ids:
            return [row["c"][ids.index(column)]["v"] for row in table["rows"]]
    raise AssertionError("no step table in the fixture")


def test_a_recorded_profile_gives_steps_breakdown_bottleneck_and_top_ops() -> None:
    # Recorded from a real TF 2.21 server with step markers, captured and converted by xprof 2.24.2.
    tables = json.loads(FIXTURE.read_text())
    profile = parse("worker:0", tables)
    step_ms = step_column(tables, "stepTimeMs")
    assert profile.steps == len(step_ms) == 30
    assert profile.mean_step_ms == pytest.approx(statistics.fmean(step_ms))
    assert profile.median_step_ms == pytest.approx(statistics.median(step_ms))
    # The parts of a step add up to the step (this trainer has only host compute and the rest).
    assert sum(profile.breakdown_ms.values()) == pytest.approx(profile.mean_step_ms, rel=0.02)
    assert profile.breakdown_ms["host compute"] == pytest.approx(
        statistics.fmean(step_column(tables, "hostComputeTimeMs"))
    )
    assert "input-bound" in profile.bottleneck and "<" not in profile.bottleneck
    assert [o.op_type for o in profile.top_ops] == ["_MklMatMul", "Sum"]  # IDLE is not an op
    assert profile.top_ops[0].occurrences > 0 and profile.top_ops[0].self_time_ms > profile.top_ops[1].self_time_ms


def test_a_profile_without_step_markers_says_so() -> None:
    tables = json.loads(FIXTURE.read_text())
    for table in tables["overview_page"]:
        if "rows" in table:
            table["rows"] = []
    profile = parse("ps:0", tables)
    assert profile.steps == 0 and profile.mean_step_ms is None
    assert "no steps were marked" in profile.bottleneck
    assert profile.top_ops  # ops are still there


def _profile(role: str, step_ms: float, matmul_ms: float) -> RoleProfile:
    return RoleProfile(
        role=role,
        step_times_ms=(step_ms,) * 10,
        breakdown_ms={"input": 0.0, "host compute": step_ms * 0.8, "device compute": 0.0, "communication": 0.0},
        bottleneck=f"{role} is compute-bound",
        top_ops=(OpTime("MatMul", 10, matmul_ms * 10), OpTime("Sum", 10, 1.0)),
    )


def test_side_by_side_marks_an_op_taking_twice_as_long_on_one_worker() -> None:
    lines = format_profiles([_profile("worker:0", 10.0, 2.0), _profile("worker:1", 11.0, 4.6)])
    assert lines[0].split() == ["worker:0", "worker:1"]
    matmul = next(line for line in lines if line.strip().startswith("MatMul"))
    assert "2.00" in matmul and "4.60" in matmul and "<- 2.3x on worker:1" in matmul
    # 10 vs 11 ms per step is not a difference worth a mark.
    assert not any("<-" in line for line in lines if "step time" in line)
    # Under the table, where most of each step went; xprof's sentence is not about input, so the
    # breakdown cannot confirm it: not shown.
    assert "worker:1: 80% of a step is host compute (8.80 ms)" in lines
    assert not any("compute-bound" in line for line in lines)


def test_roles_are_compared_within_their_job_where_it_has_several() -> None:
    ps = RoleProfile(role="ps:0", top_ops=(OpTime("MatMul", 1, 0.0), OpTime("Sum", 1, 0.0)))
    lines = format_profiles([_profile("worker:0", 10.0, 2.0), _profile("worker:1", 10.0, 2.1), ps])
    matmul = next(line for line in lines if line.strip().startswith("MatMul"))
    assert "<-" not in matmul  # the ps does no MatMul by design: not a difference between workers
    lines = format_profiles([_profile("worker:0", 10.0, 0.0), ps])
    matmul = next(line for line in lines if line.strip().startswith("MatMul"))
    assert "<-" not in matmul  # 0 vs 0
    lines = format_profiles([_profile("worker:0", 10.0, 2.0), ps])
    matmul = next(line for line in lines if line.strip().startswith("MatMul"))
    assert matmul.endswith("<- mainly on worker:0")  # one role of each job: compared across


def test_no_mark_below_twice() -> None:
    lines = format_profiles([_profile("worker:0", 10.0, 2.0), _profile("worker:1", 10.0, 3.9)])
    assert not any("<-" in line for line in lines)


def test_selecting_roles_names_an_unknown_one_and_the_run_s_roles() -> None:
    roles = [
        role_status("ps:0", host="127.0.0.1", address="127.0.0.1:1", pid=1),
        role_status("worker:0", host="127.0.0.1", address="127.0.0.1:2", pid=2),
    ]
    assert [t.role for t in select(roles, [], workers=True, every=False)] == ["worker:0"]
    assert [t.port for t in select(roles, [], workers=False, every=True)] == [1, 2]
    six = role_status("worker:1", host="::1", address="[::1]:2224", pid=3)
    assert select([six], ["worker:1"], workers=False, every=False)[0].address == "[::1]:2224"
    with pytest.raises(ProfileError, match=r"no role worker:7 in this run \(its roles: ps:0, worker:0\)"):
        select(roles, ["worker:7"], workers=False, every=False)
    # Every spelling `ctl stop` takes names the same role here (the README's worker/1 too), once.
    chosen = select(roles, ["worker/0", "/job:ps/task:0", "worker:0", "ps-0"], workers=False, every=False)
    assert [t.role for t in chosen] == ["worker:0", "ps:0"]
    with pytest.raises(ProfileError, match=r"^no role worker/7 in this run"):
        select(roles, ["worker/7"], workers=False, every=False)
    with pytest.raises(ProfileError, match="name the roles"):
        select(roles, [], workers=False, every=False)


def test_a_missing_profiler_environment_says_make_setup(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TOWERDECK_PROFILER_PYTHON", str(tmp_path / "nowhere" / "python"))
    with pytest.raises(ProfileError, match=r"not installed .* run `make setup`"):
        profiler_python()


def test_profile_summary_of_a_folder_without_a_capture_is_one_line(tmp_path: Path) -> None:
    result = run_cli("profile-summary", str(tmp_path))
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "holds no profile capture" in result.stderr


# ------------------------------------------------------------------ refusals on a live cluster

LIGHT = """
name = "light"
workdir = "{trainers}"
command = ["python", "-u", "light_trainer.py", "--steps=0", "--rate_hz=5"]
stop_grace_s = 3
[jobs.ps]
tasks = ["127.0.0.1:{p[0]}"]
[jobs.worker]
tasks = ["127.0.0.1:{p[1]}", "127.0.0.1:{p[2]}"]
restart = "Never"
"""


def one_line_refusal(result: Any, code: int = 1) -> str:
    assert result.returncode == code, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    return str(result.stderr.strip())


def test_profile_refusals_name_the_real_cause(tmp_path: Path, launches: list[Launch]) -> None:
    ports = free_ports(3)
    cluster = tmp_path / "light.toml"
    cluster.write_text(LIGHT.format(trainers=TRAINERS, p=ports))
    launch = Launch(cluster, tmp_path / "run")
    launches.append(launch)
    launch.wait_role("worker:0", "running")
    launch.wait_role("worker:1", "running")
    worker0_pid = launch.wait_role("ps:0", "running") and launch.role("worker:0")["pid"]
    # Another process holds worker:0's port (the light trainer is no TensorFlow server).
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", ports[1]))
    squatter.listen(1)
    try:
        held = one_line_refusal(launch.ctl("profile", "worker:0"))
    finally:
        squatter.close()
    assert f"port {ports[1]} of worker:0 is held by another process (pid " in held
    assert f"not by worker:0 (pid {worker0_pid})" in held
    # Nobody on worker:1's port: its process is not a TensorFlow server.
    nobody = one_line_refusal(launch.ctl("profile", "worker:1"))
    assert nobody.startswith("profile: worker:1 (pid") and f"does not listen on port {ports[2]}" in nobody
    # The README's other spelling names the same role (as `ctl stop worker/1` does).
    assert one_line_refusal(launch.ctl("profile", "worker/1")) == nobody
    # Two at once: one line per role.
    both = one_line_refusal(launch.ctl("profile", "worker:0", "worker:1", "ps:0"))
    assert len(both.splitlines()) == 3
    # An unknown role is bad input.
    unknown = one_line_refusal(launch.ctl("profile", "worker:9"), code=2)
    assert unknown == "profile: no role worker:9 in this run (its roles: ps:0, worker:0, worker:1)"
    # Another capture of this run is in progress (the window's, say): refused before asking anything.
    run_dir = tmp_path / "run"
    with capture_lock(run_dir):
        busy = one_line_refusal(launch.ctl("profile", "--workers"))
    assert busy.startswith("profile: another profile of this run is in progress (pid ")
    # A stopped role.
    assert launch.ctl("stop", "worker:1").returncode == 0
    launch.wait_role("worker:1", "stopped")
    stopped = one_line_refusal(launch.ctl("profile", "worker:1"))
    assert stopped == "profile: worker:1 is stopped; only a running role can be profiled"
    # What was asked and what came of it is kept, one folder per attempt that got past the checks.
    records = sorted((run_dir / "profiles").glob("*/profile.json"))
    assert records and json.loads(records[0].read_text())["roles"][0]["role"] == "worker:0"
    assert launch.ctl("stop-all").returncode == 0
    launch.finish()
    gone = one_line_refusal(launch.ctl("profile", "worker:0"))
    assert "is not running" in gone and "nothing to control" in gone


def test_a_full_or_read_only_profiles_folder_is_named_with_its_path_and_leaves_nothing(
    tmp_path: Path,
    launches: list[Launch],
) -> None:
    ports = free_ports(3)
    cluster = tmp_path / "light.toml"
    cluster.write_text(LIGHT.format(trainers=TRAINERS, p=ports))
    launch = Launch(cluster, tmp_path / "run")
    launches.append(launch)
    launch.wait_role("worker:0", "running")
    profiles = tmp_path / "run" / "profiles"
    with mounted_tmpfs(profiles, size="1m") as disk:
        filler = fill(disk)
        full = one_line_refusal(launch.ctl("profile", "worker:0"))  # was "run ... is not running"
        assert full.startswith(f"profile: cannot write {profiles}/"), full
        assert full.endswith(
            "/profile.json: the disk is full (No space left on device); free some space, then try again"
        )
        # No temporary record, no empty capture folder to list.
        assert sorted(p.name for p in disk.iterdir()) == [".capture.lock", "filler"]
        filler.unlink()
        make_read_only(disk)
        read_only = one_line_refusal(launch.ctl("profile", "worker:0"))
        assert read_only == (
            f"profile: cannot write {profiles / '.capture.lock'}: the file system is read-only (Read-only file system); "
            "make it writable, then try again"
        )
        assert sorted(p.name for p in disk.iterdir()) == [".capture.lock"]
    assert launch.role("worker:0")["state"] == "running"  # the run was never in question


def test_a_verdict_that_cannot_be_written_names_the_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    from core.profiling.why import Verdict
    from core.profiling.why_record import WhyRecord, save_why

    record = WhyRecord("worker:1", "worker:0", Verdict("input", "worker:1 waits for input", ("evidence",)))
    with mounted_tmpfs(tmp_path / "capture", size="64k") as folder:
        filler = fill(folder)
        with pytest.raises(ProfileError) as refused:
            save_why(folder, record)
        assert str(refused.value) == (
            f"cannot write {folder / 'why.json'}: the disk is full (No space left on device); free some space, then try again"
        )
        assert [p.name for p in folder.iterdir()] == ["filler"]
        filler.unlink()
        assert save_why(folder, record).is_file()


def test_a_role_of_another_host_is_traced_by_its_agent_only_when_the_launcher_names_that_host() -> None:
    from core.profiling.capture import check

    status = [role_status("worker:3", host="gpu-node-7.example", address="gpu-node-7.example:2222", pid=4242)]
    (unnamed,) = select(status, ["worker:3"], workers=False, every=False)
    reason = check(unnamed)
    assert reason is not None and "runs on gpu-node-7.example" in reason and "names no agent there" in reason
    (named,) = select(status, ["worker:3"], workers=False, every=False, agent_hosts={"gpu-node-7.example"})
    assert named.by_agent and check(named) is None  # its agent checks the rest on its host


def test_a_role_traced_by_its_agent_without_a_launcher_to_ask_is_refused_in_one_line(tmp_path: Path) -> None:
    from core.profiling.capture import capture

    target = Target("worker:3", "worker", 3, "gpu-node-7.example", 2222, 4242, "running", by_agent=True)
    (outcome,) = capture(tmp_path, [target], seconds=1.0).roles
    assert not outcome.ok
    assert outcome.error == "worker:3 runs on gpu-node-7.example: only its launcher can have it traced there"


def test_a_multi_worker_mirrored_worker_but_the_first_is_refused_unless_unsafe() -> None:
    from core.profiling.capture import check

    worker1 = Target("worker:1", "worker", 1, "203.0.113.9", 2222, 4242, "running")
    refused = check(worker1, "multi_worker_mirrored")
    assert refused is not None and "crashes it on TensorFlow 2.21" in refused and "--unsafe" in refused
    # --unsafe goes on to the ordinary checks (here: the host is not this machine).
    assert "runs on 203.0.113.9" in (check(worker1, "multi_worker_mirrored", unsafe=True) or "")
    worker0 = Target("worker:0", "worker", 0, "203.0.113.9", 2222, 4242, "running")
    assert "crashes" not in (check(worker0, "multi_worker_mirrored") or "")
    assert "crashes" not in (check(worker1, "parameter_server") or "")


# ------------------------------------------------------------------ bad numbers, damaged captures

XPLANE = ROOT / "tests" / "core" / "fixtures" / "profile" / "worker_light.xplane.pb"


@pytest.mark.parametrize(
    ("flag", "value", "words"),
    [
        ("--timeout", "inf", "above 0, at most 3600"),  # was an OverflowError traceback
        ("--timeout", "nan", "above 0, at most 3600"),  # was "no answer in nan s"
        ("--timeout", "1e400", "above 0, at most 3600"),
        ("--timeout", "0", "above 0, at most 3600"),
        ("--timeout", "-5", "above 0, at most 3600"),
        ("--timeout", "soon", "above 0, at most 3600"),
        ("--seconds", "1e-9", "from 0.1 to 30"),  # reached xprof, which refused it
        ("--seconds", "nan", "from 0.1 to 30"),
        ("--seconds", "inf", "from 0.1 to 30"),
        ("--seconds", "31", "from 0.1 to 30"),
    ],
)
def test_bad_numbers_are_refused_when_parsed_in_one_line_naming_the_flag(
    tmp_path: Path, flag: str, value: str, words: str
) -> None:
    # A run directory that exists: the refusal comes before the run is even looked at.
    (tmp_path / "run.json").write_text(json.dumps({"id": "r1", "state": "done"}))
    for action in ("profile", "why"):
        result = run_cli("ctl", str(tmp_path), action, "worker:0", flag, value, timeout=60)
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        # One line: the action's own usage error, then an example of it typed right.
        [line] = result.stderr.splitlines()
        assert line.startswith(
            f"python main.py ctl RUN {action}: error: argument {flag}: give a number of seconds {words}, "
            f"not '{value}' (e.g. `python main.py ctl latest {action}"
        ), line


def test_a_time_limit_shorter_than_the_trace_is_refused_before_the_run_is_asked(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text(json.dumps({"id": "r1", "state": "done"}))
    result = run_cli("ctl", str(tmp_path), "profile", "worker:0", "--seconds", "5", "--timeout", "2", timeout=60)
    assert result.returncode == 2 and result.stderr.strip() == (
        "--timeout: 2 s would end the 5 s trace (--seconds) before it is done; give at least 5"
    )


@given(st.one_of(st.text(max_size=12), st.floats(allow_nan=True, allow_infinity=True).map(repr)))
@settings(max_examples=300, deadline=None)
def test_the_number_flags_take_a_finite_number_in_range_or_refuse_it(text: str) -> None:
    from argparse import ArgumentTypeError

    from core.cli.profile import timeout_seconds, trace_seconds
    from core.profiling.capture import MAX_SECONDS, MAX_TIMEOUT_S, MIN_SECONDS, limits_problem

    for read, low, high in ((trace_seconds, MIN_SECONDS, MAX_SECONDS), (timeout_seconds, 0.0, MAX_TIMEOUT_S)):
        try:
            value = read(text)
        except ArgumentTypeError as exc:
            assert repr(text) in str(exc) and "\n" not in str(exc).replace(repr(text), "")
            continue
        assert math.isfinite(value) and low <= value <= high and (value > 0)
    # The capture itself refuses what the command line would (the window asks it directly).
    for seconds, timeout_s in ((math.nan, None), (math.inf, None), (1e-9, None), (2.0, math.inf), (2.0, math.nan)):
        assert limits_problem(seconds, timeout_s) is not None


def write_capture(folder: Path, roles: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "profile.json").write_text(json.dumps({"requested": {}, "roles": roles}))
    return folder


def summary_refusal(path: Path, cwd: Path | None = None) -> str:
    result = run_cli("profile-summary", str(path), cwd=cwd, timeout=120)
    assert result.returncode == 1 and result.stdout == "", result.stdout + result.stderr
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1, result.stderr
    return str(result.stderr.strip())


@pytest.mark.parametrize(
    ("record", "words"),
    [
        ({"roles": ["x"]}, "roles[0] is not a role's outcome (no role name)"),  # was an AttributeError
        ({"roles": {"a": 1}}, "it has no list of roles"),  # was an AttributeError
        ({"a": 1}, "it has no list of roles"),
        (["x"], "it has no list of roles"),
        ({"roles": [{"role": "worker:0", "ok": True}]}, "roles[0] (worker:0) was captured but names no file"),
        (
            {"roles": [{"role": "worker:0", "ok": True, "xplane": "../../../etc/hostname"}]},
            "roles[0] (worker:0) names a file outside the capture: ../../../etc/hostname",
        ),
    ],
)
def test_profile_summary_of_a_damaged_record_names_it_in_one_line(tmp_path: Path, record: Any, words: str) -> None:
    folder = tmp_path / "capture"
    folder.mkdir()
    (folder / "profile.json").write_text(json.dumps(record))
    assert summary_refusal(folder) == f"profile-summary: {folder / 'profile.json'} is not a capture's record: {words}"


def test_profile_summary_of_a_record_that_is_not_json_says_so(tmp_path: Path) -> None:
    folder = tmp_path / "capture"
    folder.mkdir()
    (folder / "profile.json").write_bytes(b"\x00\xff{not json")
    refusal = summary_refusal(folder)
    assert refusal.startswith(f"profile-summary: {folder / 'profile.json'} is unreadable: not JSON (")


def test_profile_summary_says_a_role_s_file_is_missing_unreadable_or_not_a_capture(tmp_path: Path) -> None:
    # A real capture: one TF 2.21 role traced by xprof 2.24.2 (light, with step markers).
    roles = [
        {"role": "worker:0", "ok": True, "xplane": "worker-0/plugins/profile/s/127.0.0.1_2222.xplane.pb"},
        {"role": "ps:0", "ok": False, "error": "ps:0 is stopped"},
    ]
    folder = write_capture(tmp_path / "run" / "profiles" / "20261127-170558", roles)
    xplane = folder / "worker-0" / "plugins" / "profile" / "s" / "127.0.0.1_2222.xplane.pb"
    xplane.parent.mkdir(parents=True)
    xplane.write_bytes(XPLANE.read_bytes())
    good = run_cli("profile-summary", str(folder), timeout=120)
    assert good.returncode == 0 and int(table_row(good.stdout, "steps captured")) > 10, good.stdout + good.stderr
    # The same, named relative to the working directory.
    relative = run_cli("profile-summary", "run", cwd=tmp_path, timeout=120)
    assert relative.returncode == 0, relative.stdout + relative.stderr
    assert table_row(relative.stdout, "steps captured") == table_row(good.stdout, "steps captured")

    # The breakdown computed above is kept with the capture and read back from then on; without
    # it (a capture not summarised yet), profile-summary reads each role's file and names a bad one.
    assert "breakdown" in json.loads((folder / "profile.json").read_text())
    write_capture(folder, roles)
    data = XPLANE.read_bytes()
    xplane.write_bytes(data[: len(data) // 2])  # truncated: a disk that filled up, a copy cut short
    cannot = "is not a profile xprof can read (truncated, or another kind of file)"
    assert summary_refusal(folder) == f"profile-summary: worker:0's capture {xplane} {cannot}"
    xplane.write_text("a note, not a profile\n")
    assert summary_refusal(folder) == f"profile-summary: worker:0's capture {xplane} {cannot}"
    xplane.write_bytes(b"")
    assert (
        summary_refusal(folder)
        == f"profile-summary: worker:0's capture {xplane} holds no profile data (an empty XSpace)"
    )
    xplane.unlink()
    assert summary_refusal(folder) == f"profile-summary: worker:0's capture {xplane} is missing"
    xplane.mkdir()
    assert summary_refusal(folder) == f"profile-summary: worker:0's capture {xplane} is a folder, not a capture file"


def table_row(stdout: str, label: str) -> str:
    line = next(line for line in stdout.splitlines() if line.startswith(label))
    return line.split()[-1]
