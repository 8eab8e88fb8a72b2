"""Why is this worker slow? The rules that name the cause (core/profiling/why.py) on constructed
profiles, the choice of the straggler and the median worker from a status reply, and (slow, real
TensorFlow) ``ctl RUN why`` on a between-graph cluster whose worker:1 sleeps in its input pipeline."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from core.profiling.env import ProfileError
from core.profiling.summary import OpTime, input_note
from core.profiling.why import HostFacts, RoleFacts, explain, straggler_and_median, with_input_ops
from core.run.status import RoleStatus
from tests.helpers.captures import write_record
from tests.helpers.cli_launch import Launch
from tests.helpers.clusters import WHY_CLUSTER, WHY_TRAINER, toml_list
from tests.helpers.ports import free_ports
from tests.helpers.procs import assert_nothing_left
from tests.helpers.project import TRAINERS, run_cli
from tests.helpers.role_profiles import OTHER, profile
from tests.helpers.statuses import role_status

SLOW_FACTS = RoleFacts("worker:1", host="h1")
MEDIAN_FACTS = RoleFacts("worker:0", host="h0")


def test_input_that_grew_names_input_with_both_shares() -> None:
    slow = profile("worker:1", 100.0, input=61.0, host=30.0, other=9.0)
    median = profile("worker:0", 40.0, input=3.2, host=30.0, other=6.8)
    verdict = explain(slow, median, slow_facts=SLOW_FACTS, median_facts=MEDIAN_FACTS)
    assert verdict.cause == "input"
    assert verdict.sentence == "worker:1 spends 61% of each step in input (median worker worker:0: 8%)"
    assert "profiled step time: worker:1 100.0 ms, worker:0 40.0 ms (2.5x)" in verdict.evidence
    assert "input: worker:1 61.0 ms (61%), worker:0 3.2 ms (8%)" in verdict.evidence


@pytest.mark.parametrize(
    ("part", "words"),
    [
        ("comm", "communication (send/recv, collectives)"),
        ("device", "device compute"),
        ("host", "host compute"),
        ("other", "Python, I/O or waiting outside TensorFlow ops"),
    ],
)
def test_each_part_that_grew_is_named(part: str, words: str) -> None:
    slow = profile("worker:1", 50.0, **{part: 40.0, "input": 10.0})
    median = profile("worker:0", 20.0, **{part: 10.0, "input": 10.0})
    verdict = explain(slow, median, slow_facts=SLOW_FACTS, median_facts=MEDIAN_FACTS)
    assert verdict.sentence == f"worker:1 spends 80% of each step in {words} (median worker worker:0: 50%)"


def test_a_busy_host_of_its_own_is_named_for_host_compute() -> None:
    slow = profile("worker:1", 50.0, host=45.0, input=5.0)
    median = profile("worker:0", 20.0, host=15.0, input=5.0)
    busy = RoleFacts("worker:1", host="h1", host_facts=HostFacts("h1", 100.0, 9.0, 8, trainers=4))
    calm = RoleFacts("worker:0", host="h0", host_facts=HostFacts("h0", 30.0, 2.0, 8, trainers=1))
    verdict = explain(slow, median, slow_facts=busy, median_facts=calm)
    assert verdict.cause == "host"
    assert verdict.sentence == (
        "worker:1 spends 90% of each step in host compute (median worker worker:0: 75%); "
        "its host h1 is busy: runs 4 trainer processes, CPU 100%"
    )
    assert "worker:1's host h1: CPU 100%, load 9.0 on 8 cores, 4 trainer processes" in verdict.evidence
    # The same busy host under both workers cannot explain their difference.
    shared = RoleFacts("worker:0", host="h1", host_facts=busy.host_facts)
    assert explain(slow, median, slow_facts=busy, median_facts=shared).cause == "host compute"


def test_no_part_that_grew_by_half_the_difference_explains_nothing() -> None:
    slow = profile("worker:1", 60.0, input=15.0, host=15.0, device=15.0, comm=15.0)
    median = profile("worker:0", 20.0, input=5.0, host=5.0, device=5.0, comm=5.0)
    verdict = explain(slow, median, slow_facts=SLOW_FACTS, median_facts=MEDIAN_FACTS)
    assert verdict.cause == "none"
    assert verdict.sentence == (
        "nothing TowerDeck measures explains it: worker:1 takes 60.0 ms a step (worker:0: 20.0 ms), "
        "but no part of its step grew by half the difference"
    )


def test_a_worker_as_fast_as_the_median_is_not_explained() -> None:
    verdict = explain(
        profile("worker:1", 21.0, host=21.0),
        profile("worker:0", 20.0, host=20.0),
        slow_facts=SLOW_FACTS,
        median_facts=MEDIAN_FACTS,
    )
    assert verdict.cause == "none"
    assert verdict.sentence == "worker:1 is not slower than worker:0 in this capture (21.0 ms vs 20.0 ms a step)"


def test_a_profile_without_steps_says_so() -> None:
    verdict = explain(
        profile("worker:1", 0.0, steps=0), profile("worker:0", 20.0), slow_facts=SLOW_FACTS, median_facts=MEDIAN_FACTS
    )
    assert verdict.cause == "none"
    assert verdict.sentence.startswith("nothing TowerDeck measures explains it: the profile of worker:1 has no steps")


def test_tf_data_time_counted_as_other_on_a_cpu_host_becomes_input() -> None:
    # Measured on TF 2.21 CPU: the step table counts the wait in IteratorGetNext as "other".
    dataset = (OpTime("Dataset", 300, 945.0), OpTime("PyFunc", 20, 534.0))
    slow = profile("worker:1", 50.7, ops=dataset, host=0.1, other=50.6)
    median = profile("worker:0", 11.5, ops=(OpTime("Dataset", 900, 3.0),), host=0.1, other=11.4)
    assert with_input_ops(slow).breakdown_ms["input"] == pytest.approx(50.6)  # capped at "other"
    assert with_input_ops(slow).breakdown_ms[OTHER] == pytest.approx(0.0)
    verdict = explain(slow, median, slow_facts=SLOW_FACTS, median_facts=MEDIAN_FACTS)
    assert verdict.sentence == "worker:1 spends 100% of each step in input (median worker worker:0: 3%)"
    # Said once, under the table every view shows (the breakdown's note), not again as evidence.
    assert input_note([with_input_ops(slow), with_input_ops(median)]) == (
        "input of worker:1, worker:0: the time of tf.data's ops (Dataset, IteratorGetNext...), "
        "which xprof's step table counts as other on a CPU-only host"
    )
    assert not any(line.startswith("input of ") for line in verdict.evidence)
    # An op's self time is summed over threads (tf.data's own): 94.5 ms in a 50.7 ms step, said so.
    assert (
        "op Dataset: 94.50 ms/step on worker:1, 0.30 on worker:0 (summed over threads: can exceed the step)"
        in verdict.evidence
    )


def worker(name: str, step_time_s: float | None, state: str = "running", job: str = "worker") -> RoleStatus:
    return role_status(name, job=job, state=state, step_time_s=step_time_s)


def test_the_slowest_worker_and_the_median_of_the_others_are_chosen() -> None:
    roles = [
        worker("ps:0", None, job="ps"),
        *(worker(f"worker:{i}", t) for i, t in enumerate([0.01, 0.05, 0.02, 0.03])),
    ]
    slow, median = straggler_and_median(roles, None)
    assert (slow.role, median.role) == ("worker:1", "worker:2")
    slow, median = straggler_and_median(roles, "worker:3")
    assert (slow.role, median.role) == ("worker:3", "worker:2")


@pytest.mark.parametrize(
    ("roles", "name", "message"),
    [
        ([worker("worker:0", 0.01)], None, "why needs two or more running training workers to compare; this run has 1"),
        (
            [worker("worker:0", 0.01), worker("worker:1", 0.02, state="failed")],
            None,
            "why needs two or more running training workers to compare; this run has 1",
        ),
        (
            [worker("worker:0", None), worker("worker:1", None)],
            None,
            "no worker reports a step time yet; name the worker",
        ),
        (
            [worker("ps:0", None, job="ps"), worker("worker:0", 0.1), worker("worker:1", 0.1)],
            "ps:0",
            "ps:0 is not a worker; why compares a worker with the median worker",
        ),
        ([worker("worker:0", 0.1), worker("worker:1", 0.1)], "worker:7", "no role worker:7 in this run"),
    ],
)
def test_refusals_are_one_line(roles: list[RoleStatus], name: str | None, message: str) -> None:
    with pytest.raises(ProfileError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        straggler_and_median(roles, name)


# ---------------------------------------------------------------- real TensorFlow


def wait_for_step_times(launch: Launch, timeout_s: float) -> dict[str, float]:
    """Both workers' step times once TowerDeck has one for each."""
    deadline = time.monotonic() + timeout_s
    times: dict[str, float] = {}
    while time.monotonic() < deadline:
        roles = launch.status()["roles"]
        times = {r["role"]: r["step_time_s"] for r in roles if r["job"] == "worker" and r["step_time_s"]}
        if len(times) == 2:
            return times
        time.sleep(0.5)
    raise AssertionError(f"the workers never both reported a step time: {times}")


@pytest.mark.slow
def test_why_names_the_worker_with_a_slow_input_pipeline_and_input_as_the_cause(tmp_path: Path) -> None:
    ports = free_ports(3)
    cluster = tmp_path / "cluster.toml"
    dataset = [*WHY_TRAINER, "--input=dataset"]
    cluster.write_text(
        WHY_CLUSTER.format(
            trainers=TRAINERS,
            p=ports,
            command=toml_list(dataset),
            slow=toml_list([*dataset, "--input_sleep_s=0.05"]),
        )
    )
    launch = Launch(cluster, tmp_path / "run")
    try:
        for role in ("worker:0", "worker:1"):
            launch.wait_role(role, "running", timeout_s=180)
            launch.wait_output(role, r"AvgTime", timeout_s=180)
        times = wait_for_step_times(launch, timeout_s=60)
        assert times["worker:1"] > times["worker:0"], times
        result = run_cli("ctl", str(launch.run_dir), "why", timeout=240)
        print(result.stdout, result.stderr)
        assert result.returncode == 0 and "Traceback" not in result.stderr, result.stdout + result.stderr
        header = next(line for line in result.stdout.splitlines() if "worker:" in line)
        assert header.split() == ["worker:1", "worker:0"]  # the straggler beside the median worker
        verdict = re.search(r"^why is worker:1 slow\? (.+)$", result.stdout, re.M)
        assert verdict, result.stdout
        assert re.fullmatch(r"worker:1 spends \d+% of each step in input \(median worker worker:0: \d+%\)", verdict[1])
        share, median_share = (int(n) for n in re.findall(r"(\d+)%", verdict[1]))
        assert share >= 50 and median_share < share / 2, verdict[1]
        # Reopened later, the capture shows the same verdict (kept beside it in why.json).
        stored = run_cli("profile-summary", str(launch.run_dir), timeout=120)
        assert stored.returncode == 0, stored.stdout + stored.stderr
        assert verdict[0] in stored.stdout.splitlines(), stored.stdout
        # A worker that is not a worker is refused in one line.
        refused = run_cli("ctl", str(launch.run_dir), "why", "ps:0", timeout=60)
        assert refused.returncode == 2 and refused.stderr.strip() == (
            "why: ps:0 is not a worker; why compares a worker with the median worker"
        )
        for role in ("worker:0", "worker:1"):
            r = launch.role(role)
            assert r["state"] == "running" and r["restarts"] == 0, r
        launch.ctl("stop-all")
        launch.finish(120)
    finally:
        launch.kill()
    assert_nothing_left(ports, marker="\0never-matches\0", timeout_s=30)


def test_profile_summary_prints_the_verdict_kept_with_a_why_capture(tmp_path: Path) -> None:
    import io
    from argparse import Namespace

    from core.cli import profile as cli_profile
    from core.profiling.why_record import WhyRecord, load_why, save_why

    captures = tmp_path / "run" / "profiles"
    roles = [{"role": r, "ok": True, "xplane": f"{r[-1]}/x.xplane.pb"} for r in ("worker:1", "worker:0")]
    dataset = (OpTime("IteratorGetNext", 10, 500.0),)
    slow = profile("worker:1", 100.0, ops=dataset, host=50.0, other=50.0)
    median = profile("worker:0", 40.0, host=30.0, other=10.0)
    # The capture's breakdown as kept with it (tf.data's time counted as input), xprof not asked again.
    for name in ("20261125-120000", "20261125-120100"):
        write_record(captures / name, roles, breakdown=[with_input_ops(slow), with_input_ops(median)])
    verdict = explain(slow, median, slow_facts=SLOW_FACTS, median_facts=MEDIAN_FACTS)
    assert verdict.cause == "input"
    why = captures / "20261125-120000"
    save_why(why, WhyRecord("worker:1", "worker:0", verdict))
    assert load_why(why) == WhyRecord("worker:1", "worker:0", verdict)
    assert load_why(captures / "20261125-120100") is None

    def summary(path: Path) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        code = cli_profile.cmd_profile_summary(Namespace(path=path), out, err)
        return code, out.getvalue(), err.getvalue()

    code, out, err = summary(why)
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert f"why is worker:1 slow? {verdict.sentence}" in lines
    assert lines[lines.index(f"why is worker:1 slow? {verdict.sentence}") + 1 :] == [f"  {e}" for e in verdict.evidence]
    # The table counts input as the verdict did: tf.data's time, not "other".
    input_row = next(line for line in lines if line.strip().startswith("input"))
    assert input_row.split()[1:3] == ["50.00", "-"], input_row
    # A capture without a verdict (the run's latest) still opens, with none.
    code, out, err = summary(tmp_path / "run")
    assert code == 0 and err == "" and "20261125-120100" in out.splitlines()[0]
    assert "why is" not in out and "steps captured" in out
    (why / "why.json").write_text("[]")
    code, out, err = summary(why)
    assert code == 0 and "steps captured" in out and "why is" not in out
    assert err.strip() == f"profile-summary: {why / 'why.json'} is unreadable: not a verdict"


def test_the_worker_to_explain_may_be_named_in_any_spelling_ctl_takes() -> None:
    roles = [worker(f"worker:{i}", t) for i, t in enumerate([0.01, 0.05, 0.02])]
    for name in ("worker:1", "worker/1", "/job:worker/task:1", "worker-1"):
        slow, median = straggler_and_median(roles, name)
        assert (slow.role, median.role) == ("worker:1", "worker:0"), name
    with pytest.raises(ProfileError, match=r"^no role worker/7 in this run"):
        straggler_and_median(roles, "worker/7")
