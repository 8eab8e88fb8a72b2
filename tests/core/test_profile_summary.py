"""Reading xprof's tables into a role's profile, side by side, and the profile commands' refusals
that need no TensorFlow (a light cluster of real processes on real ports)."""

from __future__ import annotations

import json
import socket
import statistics
from pathlib import Path
from typing import Any

import pytest

from core.profiling.capture import Target, capture_lock, select
from core.profiling.env import ProfileError, profiler_python
from core.profiling.summary import OpTime, RoleProfile, format_profiles, parse
from tests.conftest import ROOT, free_ports, run_cli
from tests.core.test_launch import TRAINERS, Launch, launches  # noqa: F401 - the fixture

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
    assert "worker:1: worker:1 is compute-bound" in lines


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
        {"role": "ps:0", "job": "ps", "index": 0, "host": "127.0.0.1", "address": "127.0.0.1:1", "pid": 1},
        {"role": "worker:0", "job": "worker", "index": 0, "host": "127.0.0.1", "address": "127.0.0.1:2", "pid": 2},
    ]
    assert [t.role for t in select(roles, [], workers=True, every=False)] == ["worker:0"]
    assert [t.port for t in select(roles, [], workers=False, every=True)] == [1, 2]
    six = {"role": "worker:1", "job": "worker", "index": 1, "host": "::1", "address": "[::1]:2224", "pid": 3}
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


def test_profile_refusals_name_the_real_cause(tmp_path: Path, launches: list[Launch]) -> None:  # noqa: F811
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


def test_a_role_of_another_host_is_traced_by_its_agent_only_when_the_launcher_names_that_host() -> None:
    from core.profiling.capture import check

    status = [{"role": "worker:3", "job": "worker", "index": 3, "host": "gpu-node-7.example",
               "address": "gpu-node-7.example:2222", "pid": 4242, "state": "running"}]  # fmt: skip
    (unnamed,) = select(status, ["worker:3"], False, False)
    reason = check(unnamed)
    assert reason is not None and "runs on gpu-node-7.example" in reason and "names no agent there" in reason
    (named,) = select(status, ["worker:3"], False, False, {"gpu-node-7.example"})
    assert named.by_agent and check(named) is None  # its agent checks the rest on its host


def test_a_role_traced_by_its_agent_without_a_launcher_to_ask_is_refused_in_one_line(tmp_path: Path) -> None:
    from core.profiling.capture import capture

    target = Target("worker:3", "worker", 3, "gpu-node-7.example", 2222, 4242, "running", by_agent=True)
    (outcome,) = capture(tmp_path, [target], 1.0).roles
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
