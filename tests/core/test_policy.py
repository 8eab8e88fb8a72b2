"""Restart and completion policy, without a process: every rule of core.controller.policy."""

from __future__ import annotations

import signal

from core.cluster.spec import RestartPolicy
from core.controller.policy import ExitFacts, RoleFact, decide_exit, evaluate
from core.run.status import ClusterPhase, RoleState

ON_FAILURE = RestartPolicy("OnFailure", max_restarts=2, backoff_s=1.0, backoff_max_s=3.0, reset_after_s=600.0)


def test_a_failure_backs_off_doubling_then_gives_up() -> None:
    first = decide_exit(
        ON_FAILURE,
        ExitFacts(returncode=1, signal=None, ran_s=5.0, policy_restarts=0, training_on=True, is_completion=True),
    )
    assert first.state == RoleState.BACKOFF and first.backoff_s == 1.0
    assert "restart 1 of 2 in 1 s (OnFailure)" in first.detail
    second = decide_exit(
        ON_FAILURE,
        ExitFacts(returncode=1, signal=None, ran_s=5.0, policy_restarts=1, training_on=True, is_completion=True),
    )
    assert second.state == RoleState.BACKOFF and second.backoff_s == 2.0
    last = decide_exit(
        ON_FAILURE,
        ExitFacts(returncode=1, signal=None, ran_s=5.0, policy_restarts=2, training_on=True, is_completion=True),
    )
    assert last.state == RoleState.FAILED and last.detail == "exit code 1; gave up after 2 restarts"


def test_a_long_healthy_run_starts_a_fresh_budget() -> None:
    decision = decide_exit(
        ON_FAILURE,
        ExitFacts(
            returncode=None,
            signal=int(signal.SIGKILL),
            ran_s=601.0,
            policy_restarts=2,
            training_on=True,
            is_completion=False,
        ),
    )
    assert decision.reset_budget and decision.state == RoleState.BACKOFF and decision.backoff_s == 1.0
    assert decision.detail.startswith("killed by SIGKILL; restart 1 of 2")


def test_a_completion_role_that_exits_zero_is_done_even_under_always() -> None:
    always = RestartPolicy("Always", max_restarts=5)
    assert (
        decide_exit(
            always,
            ExitFacts(returncode=0, signal=None, ran_s=1.0, policy_restarts=0, training_on=True, is_completion=True),
        ).state
        == RoleState.SUCCEEDED
    )
    assert (
        decide_exit(
            always,
            ExitFacts(returncode=0, signal=None, ran_s=1.0, policy_restarts=0, training_on=True, is_completion=False),
        ).state
        == RoleState.BACKOFF
    )  # a ps is restarted


def test_no_restart_once_training_is_over_and_exit_code_policy() -> None:
    assert decide_exit(
        ON_FAILURE,
        ExitFacts(returncode=1, signal=None, ran_s=1.0, policy_restarts=0, training_on=False, is_completion=False),
    ) == decide_exit(
        RestartPolicy("Never"),
        ExitFacts(returncode=1, signal=None, ran_s=1.0, policy_restarts=0, training_on=True, is_completion=False),
    )
    exit_code = RestartPolicy("ExitCode", max_restarts=1)
    assert (
        decide_exit(
            exit_code,
            ExitFacts(returncode=2, signal=None, ran_s=1.0, policy_restarts=0, training_on=True, is_completion=True),
        ).state
        == RoleState.FAILED
    )  # permanent
    assert (
        decide_exit(
            exit_code,
            ExitFacts(returncode=137, signal=None, ran_s=1.0, policy_restarts=0, training_on=True, is_completion=True),
        ).state
        == RoleState.BACKOFF
    )  # retryable


def roles(*states: tuple[str, RoleState]) -> list[RoleFact]:
    return [RoleFact(name, name.split(":")[0], state, f"{state} detail") for name, state in states]


def test_completion_and_failure_of_the_cluster() -> None:
    running = roles(("ps:0", RoleState.RUNNING), ("worker:0", RoleState.SUCCEEDED), ("worker:1", RoleState.RUNNING))
    assert evaluate(ClusterPhase.RUNNING, running, completion_jobs={"worker"}) is None
    done = roles(("ps:0", RoleState.RUNNING), ("worker:0", RoleState.SUCCEEDED), ("worker:1", RoleState.STOPPED))
    decision = evaluate(ClusterPhase.RUNNING, done, completion_jobs={"worker"})
    assert decision is not None and decision.phase == ClusterPhase.COMPLETING and decision.result == "succeeded"
    assert decision.stop_rest and decision.reason == "training finished: worker succeeded"
    stopped = roles(("ps:0", RoleState.RUNNING), ("worker:0", RoleState.STOPPED))
    decision = evaluate(ClusterPhase.RUNNING, stopped, completion_jobs={"worker"})
    assert decision is not None and decision.result == "stopped"
    failed = roles(("ps:0", RoleState.FAILED), ("worker:0", RoleState.RUNNING))
    decision = evaluate(ClusterPhase.RUNNING, failed, completion_jobs={"worker"})
    assert decision is not None and decision.phase == ClusterPhase.FAILING
    assert decision.reason == "ps:0 failed: failed detail"
    assert evaluate(ClusterPhase.COMPLETING, roles(("ps:0", RoleState.STOPPING)), completion_jobs={"worker"}) is None
    over = evaluate(ClusterPhase.COMPLETING, roles(("ps:0", RoleState.STOPPED)), completion_jobs={"worker"})
    assert over is not None and over.phase == ClusterPhase.DONE


def test_success_policy_chief_ends_the_run_when_the_chief_succeeds() -> None:
    roles = [
        RoleFact("ps:0", "ps", RoleState.RUNNING, ""),
        RoleFact("worker:0", "worker", RoleState.SUCCEEDED, "exit code 0"),
    ]
    roles.append(RoleFact("worker:1", "worker", RoleState.RUNNING, ""))
    assert evaluate(ClusterPhase.RUNNING, roles, completion_jobs={"worker"}) is None  # default: every worker must end
    decision = evaluate(ClusterPhase.RUNNING, roles, completion_jobs={"worker"}, success_policy="chief")
    assert decision is not None and decision.phase == ClusterPhase.COMPLETING and decision.stop_rest
    assert decision.result == "succeeded" and "worker:0 succeeded" in decision.reason
    failed = [*roles[:2], RoleFact("worker:1", "worker", RoleState.FAILED, "exit code 1")]
    assert (
        evaluate(ClusterPhase.RUNNING, failed, completion_jobs={"worker"}, success_policy="chief").phase
        == ClusterPhase.FAILING
    )
