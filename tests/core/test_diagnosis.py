"""core/diagnosis/rules.py and core/cluster/stuck_options.py on output recorded from real TensorFlow runs.

The fixtures are worker:1's output (placement lines left out) from tests/core/test_stuck.py's
cluster, run through ``python main.py launch`` on TensorFlow 2.21: ``stuck_worker1_create_session``
with TF_CPP_MIN_LOG_LEVEL=0, ``stuck_worker1_model_ready`` with the trainer's --tf_verbosity=info.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from core.cluster.roles import chief_of, expects_steps
from core.cluster.spec import parse_text, to_data
from core.cluster.stuck_options import StuckOptions, chief_success, start_stall_detail
from core.diagnosis.lines import (
    COORDINATION_CONNECT,
    CREATE_SESSION,
    MODEL_READY,
    RECOVERING,
    SILENT,
    WORKER_LOST,
    recognise,
)
from core.diagnosis.rules import Diagnoser
from core.diagnosis.wording import waiting_lines

FIXTURES = Path(__file__).parent / "fixtures"
CREATE_LOG = (FIXTURES / "stuck_worker1_create_session.log").read_text()
READY_LOG = (FIXTURES / "stuck_worker1_model_ready.log").read_text()
ROLES = ["ps:0", "worker:0", "worker:1"]
# MultiWorkerMirroredStrategy's coordination service (TF 2.21): worker:0, the leader, alone
# (worker:1 never started), and both connecting (worker:1 later killed); recorded by hand with
# TF_CPP_MIN_LOG_LEVEL=0, as resources/trainers/multi_worker_mirrored.py prints it.
PEER_MISSING_LOG = (FIXTURES / "mwms_worker0_peer_missing.log").read_text()
BOTH_CONNECT_LOG = (FIXTURES / "mwms_worker0_peer_killed.log").read_text()
# ParameterServerStrategy (TF 2.21): chief:0's output when its only worker was stopped mid-training
# (recorded through the Controller with TF_CPP_MIN_LOG_LEVEL=0; the chief then printed nothing for 60 s).
PS_CHIEF_LOG = (FIXTURES / "ps_chief_worker_stopped.log").read_text()
# Between-graph (classic) worker:0 when ps:0 was restarted under it (TF 2.21, --tf_verbosity=info):
# MonitoredSession recreated its session and trained on 20 s later.
RECOVER_LOG = (FIXTURES / "bg_worker0_ps_restarted.log").read_text()


def line_with(text: str, log: str) -> str:
    return next(line for line in log.splitlines() if text in line)


def started(diagnoser: Diagnoser, t: float = 0.0) -> Diagnoser:
    for role in ROLES:
        diagnoser.on_state(role, "starting", t)
        diagnoser.on_state(role, "running", t + 1)
    return diagnoser


def test_recognise_the_recorded_lines():
    create = recognise(line_with("CreateSession still waiting", CREATE_LOG))
    assert create is not None and create.kind == CREATE_SESSION and create.peer == "worker:0"
    ready = recognise(line_with("Waiting for model to be ready", READY_LOG))
    assert ready is not None and ready.kind == MODEL_READY and ready.peer is None
    others = [
        line for line in (CREATE_LOG + READY_LOG).splitlines() if "CreateSession" not in line and "Waiting" not in line
    ]
    assert others and all(recognise(line) is None for line in others)


def test_a_ps_named_by_create_session_is_that_role():
    line = line_with("CreateSession still waiting", CREATE_LOG).replace("/job:worker/", "/job:ps/")
    sign = recognise(line)
    assert sign is not None and sign.peer == "ps:0"


def test_the_issue_case_from_the_first_wait_to_the_certain_one_and_its_clearing():
    d = started(Diagnoser(ROLES))
    # The first check finds no variables while the chief runs: normal, nothing to say.
    assert d.on_output("worker:1", READY_LOG, 12.0) == []
    # The chief exits: the wait is now for a role that is gone.
    [early] = d.on_state("worker:0", "succeeded", 20.0, detail="exit code 0")
    assert early.role == "worker:1" and early.waiting_for == "worker:0" and early.cause == MODEL_READY
    assert early.certain is False and "worker:0 exited (succeeded, exit code 0) 0 s ago" in early.message
    # TensorFlow says it waits for worker:0: certain, with how long ago the chief went.
    line = line_with("CreateSession still waiting", CREATE_LOG)
    [certain] = d.on_output("worker:1", line + "\n", 52.0)
    assert certain.certain and certain.cause == CREATE_SESSION and certain.line == line.strip()
    assert certain.message == (
        "worker:1 is waiting for worker:0, which exited (succeeded, exit code 0) 32 s ago; it will wait forever."
    )
    assert certain.fix.startswith(
        "Stop worker:1, or make the chief wait for the others (device_filters / a final barrier)"
    )
    assert 'success_policy = "chief"' in certain.fix
    assert d.current("worker:1") == certain
    # The same line every 10 s says nothing new.
    assert d.on_output("worker:1", line + "\n", 62.0) == []
    assert d.tick(70.0) == []
    # Stopped: the wait is over.
    [cleared] = d.on_state("worker:1", "stopping", 75.0)
    assert cleared.waiting is False and cleared.waiting_for == "worker:0"
    assert d.current("worker:1") is None
    lines = waiting_lines("worker:1", certain.event_data())
    assert lines[0].startswith("worker:1     WAITING    worker:1 is waiting") and lines[1].strip().startswith(
        "fix: Stop"
    )


def test_a_line_split_across_chunks_is_recognised():
    d = started(Diagnoser(ROLES))
    d.on_state("worker:0", "failed", 5.0, detail="exit code 1")
    line = line_with("CreateSession still waiting", CREATE_LOG) + "\n"
    assert d.on_output("worker:1", line[:40], 6.0) == []
    [diagnosis] = d.on_output("worker:1", line[40:], 6.1)
    assert diagnosis.certain and "exited (failed, exit code 1)" in diagnosis.message
    assert diagnosis.fix.startswith("Restart worker:0")
    assert "success_policy" not in diagnosis.fix


def test_a_step_clears_the_wait_and_a_peer_that_is_alive_is_a_normal_wait_until_long():
    d = started(Diagnoser(ROLES, long_wait_s=60))
    line = line_with("CreateSession still waiting", CREATE_LOG).replace("/job:worker/", "/job:ps/") + "\n"
    assert d.on_output("worker:1", line, 10.0) == []
    assert d.tick(69.0) == []
    [long] = d.tick(70.0)
    assert long.waiting_for == "ps:0" and not long.certain and "has waited 60 s for ps:0" in long.message
    [cleared] = d.on_step("worker:1", 71.0)
    assert cleared.waiting is False


def test_silent_wait_after_grace_and_not_when_steps_came_after():
    d = started(Diagnoser(ROLES, grace_s=10))
    d.on_step("worker:1", 5.0)
    d.on_state("worker:0", "succeeded", 20.0, detail="exit code 0")
    assert d.tick(29.9) == []
    [silent] = d.tick(30.0)
    assert silent.cause == SILENT and silent.waiting_for == "worker:0" and not silent.certain
    assert silent.message.startswith(
        "worker:1 has printed no step for 25 s, and worker:0 exited (succeeded, exit code 0) 10 s ago"
    )
    assert "most likely waiting for worker:0" in silent.message
    # A worker that trained on after the chief left is not waiting.
    d2 = started(Diagnoser(ROLES, grace_s=10))
    d2.on_state("worker:0", "succeeded", 20.0, detail="exit code 0")
    for t in range(21, 41, 2):
        d2.on_step("worker:1", float(t))
        assert d2.tick(t + 1.5) == []
    # ...until it goes quiet for three of its step gaps (here longer than the 10 s grace).
    d2.on_step("worker:1", 50.0)  # a slow printer: 11 s between these steps
    assert d2.tick(82.9) == []
    [late] = d2.tick(83.0)
    assert late.cause == SILENT and "has printed no step for 33 s" in late.message
    # A ps that stopped while workers run: they wait for it.
    d3 = started(Diagnoser(ROLES, grace_s=10))
    d3.on_state("ps:0", "stopped", 20.0, detail="stopped (killed by SIGTERM)")
    waits = d3.tick(31.0)
    assert {w.role: w.waiting_for for w in waits} == {"worker:0": "ps:0", "worker:1": "ps:0"}
    assert all(w.fix.startswith("Restart ps:0") for w in waits)


def test_no_diagnosis_while_the_cluster_completes_and_none_for_other_strategies():
    d = started(Diagnoser(ROLES, grace_s=1))
    d.on_state("worker:0", "succeeded", 20.0)
    assert d.tick(30.0)
    [cleared] = d.on_phase("completing", 30.5)
    assert cleared.waiting is False
    assert d.tick(60.0) == []
    mirrored = started(Diagnoser(ROLES, strategy="multi_worker_mirrored", grace_s=1))
    mirrored.on_state("worker:0", "succeeded", 20.0)
    assert mirrored.tick(60.0) == []


def test_rules_for_chiefs_steps_and_start_stalls():
    assert chief_of(["ps:0", "worker:0", "chief:0"]) == "chief:0"
    assert chief_of(["ps:0", "worker:1"]) is None
    assert expects_steps("between_graph", "worker") and not expects_steps("between_graph", "ps")
    assert expects_steps("parameter_server", "chief") and not expects_steps("parameter_server", "worker")
    policy = StuckOptions(success_policy="chief")
    assert chief_success(policy, {"ps:0": "running", "worker:0": "succeeded"}) == "worker:0"
    assert chief_success(policy, {"chief:0": "running", "worker:0": "succeeded"}) is None
    assert chief_success(StuckOptions(), {"worker:0": "succeeded"}) is None
    options = StuckOptions(start_stall_after_s=30)
    assert (
        start_stall_detail(options, "between_graph", "worker", running_for_s=29.9, has_step=False, last_lines=["x"])
        is None
    )
    assert (
        start_stall_detail(options, "between_graph", "worker", running_for_s=31, has_step=True, last_lines=["x"])
        is None
    )
    assert (
        start_stall_detail(options, "between_graph", "ps", running_for_s=31, has_step=False, last_lines=["x"]) is None
    )
    assert (
        start_stall_detail(
            StuckOptions(start_stall_after_s=0), "custom", "worker", running_for_s=1e9, has_step=False, last_lines=[]
        )
        is None
    )
    last = line_with("Started server", CREATE_LOG)
    detail = start_stall_detail(
        options, "between_graph", "worker", running_for_s=31, has_step=False, last_lines=[last, "  "]
    )
    assert detail == f"no step in 31 s since it started; last printed: {last.strip()!r}"
    assert (
        start_stall_detail(options, "custom", "worker", running_for_s=31, has_step=False, last_lines=[])
        == "no step in 31 s since it started; it printed nothing"
    )


CLUSTER = """
name = "x"
strategy = "custom"
command = ["python", "t.py"]
{extra}
[jobs.worker]
tasks = ["127.0.0.1:2223"]
"""


def test_cluster_file_keys_parse_round_trip_and_bad_values_name_the_line():
    spec, problems = parse_text(CLUSTER.format(extra='start_stall_after_s = 90\nsuccess_policy = "chief"'))
    assert spec is not None, problems
    assert spec.stuck == StuckOptions(start_stall_after_s=90, success_policy="chief")
    data = to_data(spec)
    assert data["start_stall_after_s"] == 90 and data["success_policy"] == "chief"
    default, _ = parse_text(CLUSTER.format(extra=""))
    assert default is not None and default.stuck == StuckOptions()
    assert "success_policy" not in to_data(default)
    bad, problems = parse_text(CLUSTER.format(extra='success_policy = "AllWorkers"\nstart_stall_after_s = -1'))
    assert bad is None
    text = "\n".join(str(p) for p in problems)
    assert "success_policy" in text and "start_stall_after_s" in text
    assert any(p.line == 5 for p in problems), [(p.line, str(p)) for p in problems]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("out"), st.sampled_from([*ROLES, "nobody:3"]), st.text(max_size=300)),
            st.tuples(
                st.just("out"),
                st.sampled_from(ROLES),
                st.sampled_from(
                    [
                        line_with("CreateSession", CREATE_LOG) + "\n",
                        line_with("Waiting for model", READY_LOG) + "\n",
                        "CreateSession still waiting for response from worker: /job:chief/replica:0/task:99\n",
                        "CreateSession still waiting for response from worker: /job:worker/replica:0/task:1\n",
                        "\n".join(PEER_MISSING_LOG.splitlines()[-4:-1]) + "\n",
                        line_with("Waiting for 0/2 tasks", BOTH_CONNECT_LOG) + "\n",
                        line_with("failed with UnavailableError", PS_CHIEF_LOG) + "\n",
                        "INFO:tensorflow:Worker /job:worker/replica:0/task:0 has been recovered.\n",
                        "\n".join(RECOVER_LOG.splitlines()[12:18]) + "\n",
                    ]
                ),
            ),
            st.tuples(
                st.just("state"),
                st.sampled_from([*ROLES, ""]),
                st.sampled_from(
                    ["pending", "starting", "running", "backoff", "stopping", "succeeded", "failed", "stopped", "?"]
                ),
            ),
            st.tuples(st.just("step"), st.sampled_from(ROLES), st.just("")),
            st.tuples(st.just("phase"), st.just(""), st.sampled_from(["running", "completing", "done"])),
        ),
        max_size=40,
    ),
    st.sampled_from(["between_graph", "parameter_server", "custom"]),
)
def test_the_diagnoser_never_crashes_and_its_state_matches_what_it_said(actions, strategy):
    d = Diagnoser(ROLES, strategy=strategy, grace_s=1, long_wait_s=2)
    said: dict[str, bool] = {}
    t = 0.0
    for what, role, value in actions:
        t += 0.7
        if what == "out":
            changes = d.on_output(role, value, t)
        elif what == "state":
            changes = d.on_state(role, value, t, detail="exit code 0")
        elif what == "step":
            changes = d.on_step(role, t)
        else:
            changes = d.on_phase(value, t)
        check(d, changes, said)
        check(d, d.tick(t + 0.3), said)


def check(d: Diagnoser, changes: list, said: dict[str, bool]) -> None:
    if True:
        for change in changes:
            assert change.role in ROLES and change.waiting_for != change.role
            assert said.get(change.role, False) != change.waiting or change.waiting  # a clear follows a wait
            said[change.role] = change.waiting
            assert (d.current(change.role) is not None) == change.waiting
            if change.waiting:
                assert change.message and change.fix


MWMS = ["worker:0", "worker:1"]


def mwms_started(t: float = 0.0) -> Diagnoser:
    d = Diagnoser(MWMS, strategy="multi_worker_mirrored")
    for role in MWMS:
        d.on_state(role, "starting", t)
        d.on_state(role, "running", t + 1)
    return d


def test_the_coordination_leader_naming_a_straggler_that_exited_waits_forever():
    d = mwms_started()
    # worker:1 is still starting: the leader's wait for it is the normal start-up one.
    assert d.on_output("worker:0", PEER_MISSING_LOG, 10.0) == []
    [wait] = d.on_state("worker:1", "stopped", 14.0, detail="stopped (killed by SIGTERM)")
    assert wait.role == "worker:0" and wait.waiting_for == "worker:1" and wait.cause == COORDINATION_CONNECT
    assert wait.certain and wait.since == 10.0
    assert wait.message == (
        "worker:0 is waiting for worker:1 to connect to the coordination service, and worker:1 exited "
        "(stopped, killed by SIGTERM) 0 s ago; it will wait forever."
    )
    assert wait.fix.startswith("Restart worker:1")
    assert wait.line == (
        "I0000 00:00:1795469858.060697   20332 coordination_service.cc:502] Waiting for 1/2 tasks to connect. "
        "Example stragglers: /job:worker/replica:0/task:1"
    )
    # A new attempt of worker:1: a normal wait again, until it connects ("Waiting for 0/2 tasks").
    [cleared] = d.on_state("worker:1", "starting", 20.0)
    assert not cleared.waiting and cleared.waiting_for == "worker:1"
    assert d.tick(10.0 + d.long_wait_s)[0].message.startswith("worker:0 has waited 2 min for worker:1 to connect")
    connected = line_with("Waiting for 0/2 tasks to connect", BOTH_CONNECT_LOG)
    [done] = d.on_output("worker:0", connected + "\n", 140.0)
    assert not done.waiting and d.tick(1000.0) == [] and d.current("worker:0") is None


def test_the_coordination_wait_split_anywhere_and_a_straggler_that_connects_in_time():
    d = mwms_started()
    d.on_state("worker:1", "stopped", 2.0, detail="stopped (killed by SIGTERM)")
    text = PEER_MISSING_LOG
    said = []
    for i in range(0, len(text), 7):
        said += d.on_output("worker:0", text[i : i + 7], 10.0)
    assert [(s.waiting_for, s.cause, s.certain) for s in said] == [("worker:1", COORDINATION_CONNECT, True)]
    # Both connecting, as recorded: the straggler is named, then connects; nothing to say.
    d2 = mwms_started()
    assert d2.on_output("worker:0", BOTH_CONNECT_LOG, 10.0) == []
    assert d2.current("worker:0") is None
    # A task name line without "Example stragglers:" before it is not a wait.
    d3 = mwms_started()
    d3.on_state("worker:1", "stopped", 2.0)
    assert d3.on_output("worker:0", "/job:worker/replica:0/task:1\n", 10.0) == []


PS = ["chief:0", "ps:0", "worker:0", "worker:1"]


def ps_started(roles: list[str]) -> Diagnoser:
    d = Diagnoser(roles, strategy="parameter_server")
    for role in roles:
        d.on_state(role, "starting", 0.0)
        d.on_state(role, "running", 1.0)
    return d


def test_the_ps_chief_that_lost_its_last_worker_waits_forever():
    lost = line_with("failed with UnavailableError", PS_CHIEF_LOG)
    sign = recognise(lost)
    assert sign is not None and sign.kind == WORKER_LOST and sign.peer == "worker:0"
    assert all(
        recognise(line) is None for line in PS_CHIEF_LOG.splitlines() if "failed with UnavailableError" not in line
    )
    roles = ["chief:0", "ps:0", "worker:0"]
    d = ps_started(roles)
    # The line comes before the worker's exit is seen: nothing certain yet (a restart comes back).
    assert d.on_output("chief:0", PS_CHIEF_LOG, 20.0) == []
    [wait] = d.on_state("worker:0", "stopped", 21.0, detail="stopped (killed by SIGTERM)")
    assert wait.role == "chief:0" and wait.waiting_for == "worker:0" and wait.cause == WORKER_LOST and wait.certain
    assert wait.message == (
        "chief:0 lost worker:0, which exited (stopped, killed by SIGTERM) 0 s ago, and no worker is left: it waits "
        "for worker:0 to come back, forever (TensorFlow's ClusterCoordinator waits an hour at a time)."
    )
    assert wait.fix.startswith("Restart worker:0 (the chief takes it back")
    # A new attempt of worker:0: the coordinator takes it back ("has been recovered", an INFO line).
    [cleared] = d.on_state("worker:0", "starting", 30.0)
    assert not cleared.waiting
    d.on_output("chief:0", "INFO:tensorflow:Worker /job:worker/replica:0/task:0 has been recovered.\n", 35.0)
    assert d.tick(1000.0) == [] and d.current("chief:0") is None


def test_a_ps_chief_that_lost_one_worker_of_two_trains_on():
    d = ps_started(PS)
    d.on_output("chief:0", PS_CHIEF_LOG, 20.0)
    assert d.on_state("worker:0", "stopped", 21.0) == []
    assert d.tick(25.0 + d.long_wait_s) == []  # worker:1 still works for it
    [wait] = d.on_state("worker:1", "failed", 200.0, detail="exit code 1")
    assert wait.waiting_for == "worker:0" and wait.certain and "no worker is left" in wait.message
    # A worker lost for long that TowerDeck sees running (unreachable, say): said after long_wait_s.
    d2 = ps_started(PS)
    d2.on_output("chief:0", PS_CHIEF_LOG, 20.0)
    [long] = d2.tick(20.0 + d2.long_wait_s)
    assert (
        not long.certain
        and long.message == "chief:0 lost worker:0 2 min ago and waits for it to come back; worker:0 is running."
    )
    assert d2.on_step("chief:0", 200.0)[0].waiting is False


def test_a_session_recreated_after_a_ps_error_names_the_ps_and_is_certain_once_it_is_gone():
    sign = recognise(line_with("An error was raised", RECOVER_LOG))
    assert sign is not None and sign.kind == RECOVERING and sign.peer is None
    d = started(Diagnoser(ROLES))
    # ps:0 is coming back (restarted): the normal recovery, nothing said; a step clears it.
    d.on_state("ps:0", "starting", 10.0)
    assert d.on_output("worker:0", RECOVER_LOG, 11.0) == []
    [long] = d.tick(11.0 + d.long_wait_s)
    assert long.waiting_for == "ps:0" and long.cause == RECOVERING and not long.certain
    assert long.message.startswith("worker:0 lost ps:0 2 min ago and has not trained since")
    assert not d.on_step("worker:0", 200.0)[0].waiting
    # ps:0 gone for good: the new session can never be made.
    d2 = started(Diagnoser(ROLES))
    d2.on_output("worker:0", RECOVER_LOG, 11.0)
    [wait] = d2.on_state("ps:0", "stopped", 12.0, detail="stopped (killed by SIGTERM)")
    assert wait.role == "worker:0" and wait.waiting_for == "ps:0" and wait.certain
    assert wait.message == (
        "worker:0 lost ps:0 and recreates its session, which needs ps:0; ps:0 exited "
        "(stopped, killed by SIGTERM) 0 s ago: it will wait forever."
    )
    assert wait.fix.startswith("Restart ps:0") and wait.line.startswith("INFO:tensorflow:An error was raised.")


def test_judging_every_role_costs_the_same_per_role_at_1024_workers():
    """A tick re-judges every role ten times a second on the controller's thread: at 1,024
    (simulated) workers it must stay a small share of that thread. Each worker's check of its ps
    peers scanned every role's name (a million string tests a tick), ~0.1 s of CPU a tick here."""
    import statistics
    import time

    roles = ["ps:0"] + [f"worker:{i}" for i in range(1024)]
    d = Diagnoser(roles)
    for role in roles:
        d.on_state(role, "running", 0.0)
    d.on_step("worker:0", 1.0)
    costs = []
    for k in range(5):
        t0 = time.thread_time()  # this thread's CPU: a loaded machine's waits are not counted
        d.tick(2.0 + k)
        costs.append(time.thread_time() - t0)
    assert statistics.median(costs) < 0.02, (
        f"a tick of 1,025 roles took {statistics.median(costs) * 1000:.0f} ms of CPU"
    )
    # Still judged: a worker silent since the ps it needs ended is said to wait for it.
    d.on_state("ps:0", "failed", 10.0, detail="exit code 1")
    waiting = {x.role for x in d.tick(10.0 + d.grace_s + 1) if x.waiting}
    assert waiting == {f"worker:{i}" for i in range(1024)}
