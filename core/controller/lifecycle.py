"""The role state machine, as the controller drives it: every state change (:meth:`RoleLifecycle._set_state`,
checked against :data:`core.run.status.ALLOWED`, journalled and published), the cluster's phase, a
role's launch, its exit (what the restart policy makes of it), a lost agent, and the tick that
ends start grace and back-off. A mixin of :class:`core.controller.controller.Controller`."""

from __future__ import annotations

import time
from pathlib import Path

from core.cluster.render import render, role_dir
from core.controller import policy
from core.controller.base import ControllerBase
from core.controller.supervised import SupervisedRole
from core.diagnosis.rules import Diagnosis
from core.run import pids
from core.run.status import ALIVE, ALLOWED, ClusterPhase, RoleState, exit_text


class RoleLifecycle(ControllerBase):
    """Role states and the cluster's phase, on the controller's thread."""

    def _set_state(self, role: SupervisedRole, state: RoleState, detail: str = "") -> None:
        if state not in ALLOWED[role.state] and state != role.state:
            self._publish("warning", role=role.task.role_id, message=f"ignored transition {role.state} -> {state}")
            return
        old = role.state
        now = time.time()
        with self._lock:
            role.enter_state(state, now, detail)
            role.history.append((role.state_since, state, detail))
        self._publish(
            "role_state",
            at=role.state_since,
            role=role.task.role_id,
            old=str(old),
            state=str(state),
            detail=detail,
            pid=role.pid,
            attempt=role.attempt,
            restarts=role.restarts,
            returncode=role.returncode,
            signal=role.signal,
        )
        self._evaluate()
        # Diagnosis (issue 13), after _evaluate: a state that ends the run clears waits, never shows one.
        self._publish_waits(self._diagnoser.on_state(role.task.role_id, str(state), now, detail))

    def _set_phase(self, phase: ClusterPhase, result: str | None = None, reason: str = "") -> None:
        with self._lock:
            self._phase = phase
            if result is not None and self._result is None:
                self._result = result
                self._reason = reason
        self.run.update(
            state=str(phase),
            result=self._result,
            reason=self._reason,
            ended=time.time() if phase == ClusterPhase.DONE else None,
        )
        self._publish("cluster_state", phase=str(phase), result=self._result, reason=self._reason)
        self._publish_waits(self._diagnoser.on_phase(str(phase), time.time()))  # diagnosis (issue 13)

    def _publish_waits(self, diagnoses: list[Diagnosis]) -> None:
        """Diagnosis (issue 13): ``role_waiting`` events carry ``waiting`` (False: it cleared),
        ``waiting_for`` (a role), ``cause``, ``certain``, ``message``, ``fix``, ``line``, ``since``.
        The role's view takes the same record, as the replay does from the journal."""
        for diagnosis in diagnoses:
            data = diagnosis.event_data()
            with self._lock:
                self._roles[diagnosis.role].apply_record({"kind": "role_waiting", **data})
            self._publish("role_waiting", role=diagnosis.role, **data)

    def _launch_role(self, role: SupervisedRole) -> None:
        with self._lock:
            role.telemetry.new_attempt()
            role.attempt += 1
            role.pid = None
            role.returncode = None
            role.signal = None
            role.stop_requested = False
            role.running_at = time.time() + self.spec.start_s
            role.log_path = self.run.log_path(role.task, role.attempt)
            role.last_step = None
            role.progress_at = None
            role.output_blocked = False
        if role.stalled:
            self._set_stalled(role, False, "restarted")
        transport = self._transport(role.host_key)
        host = self.spec.host_config(role.host_key)
        host_run_dir = transport.run_dir if host.remote else None
        launch = render(self.spec, role.task, Path(host_run_dir) if host_run_dir else self.run.path)
        cwd = host.workdir if host.remote and host.workdir else str(launch.cwd)
        log = str(role.log_path)
        if host_run_dir:  # the role writes on its own machine; the transport mirrors it here
            log = str(role_dir(Path(host_run_dir), role.task) / f"attempt-{role.attempt}.log")
        self._set_state(role, RoleState.STARTING, f"attempt {role.attempt}")
        start = {
            "op": "start",
            "role": role.task.role_id,
            "attempt": role.attempt,
            "argv": list(launch.argv),
            "env": launch.env,
            "cwd": cwd,
            "log": log,
            "tb_dir": launch.env.get("TOWERDECK_TB_DIR", ""),
            # Its log is on this machine (or shared): a stop may skip the unsent backlog.
            "skip_backlog": not host.remote,
        }
        try:
            sent = (host_run_dir is not None or not host.remote) and transport.send(start)
            why = transport.lost_reason or "it is gone"
        except RuntimeError as exc:  # too many commands wait for that host to reconnect
            sent, why = False, str(exc)
        if not sent:
            self._set_state(role, RoleState.FAILED, f"no agent on {role.host_key}: {why}")

    def _on_exit(self, role: SupervisedRole, returncode: int | None, signal: int | None) -> None:
        self._poll_tensorboard()  # what the role wrote last, before it is forgotten
        now = time.time()
        with self._lock:
            role.pid = None
            role.returncode = returncode
            role.signal = signal
            role.ended_at = now
            role.running_at = None
        how = exit_text(returncode, signal)
        if not role.stop_requested and (returncode != 0 or signal is not None):
            self._slurm_check_end()  # Slurm ending the job (scancel, time limit) stops the roles
        if role.stop_requested:
            if role.restart_after_stop and self._phase == ClusterPhase.RUNNING:
                role.restart_after_stop = False
                self._launch_role(role)
            else:
                self._set_state(role, RoleState.STOPPED, f"{self._slurm_end or 'stopped'} ({how})")
            return
        decision = policy.decide_exit(
            self.spec.jobs[role.task.job].restart,
            returncode,
            signal,
            now - role.started_at if role.started_at is not None else 0.0,
            role.policy_restarts,
            self._phase == ClusterPhase.RUNNING,
            role.task.job in self._completion,
        )
        if decision.reset_budget:
            role.policy_restarts = 0  # a long healthy stretch: this failure starts a fresh budget
        if decision.backoff_s is not None:
            role.backoff_until = now + decision.backoff_s
        self._set_state(role, decision.state, decision.detail)

    def _on_agent_lost(self, host: str, returncode: int | None, reason: str | None = None, busy: bool = False) -> None:
        transport = self._transports.pop(host, None)
        local = transport.is_local if transport is not None else True
        lost = [r for r in self._roles.values() if r.host_key == host and r.state in ALIVE]
        if not lost and self._phase == ClusterPhase.DONE:
            return
        why = reason or f"exited (code {returncode})"
        self._slurm_check_end()
        self._publish("warning", message=f"the agent on {host} is lost: {why}")
        for role in lost:
            # Last resort for local roles (no orphans if the agent died; a pid of another machine
            # means nothing here; a busy agent runs them), unless that pid is another process by
            # now: the link may have been lost for minutes.
            if local and not busy and role.pid is not None and not pids.kill_group_if_same(role.pid, role.pid_started):
                self._publish(
                    "warning", message=f"{role.task.role_id}: pid {role.pid} is another process now; not killed"
                )
            with self._lock:
                role.ended_at = time.time()
                role.pid = None
            state = RoleState.STOPPED if role.stop_requested else RoleState.FAILED
            self._set_state(role, state, self._slurm_end or f"the agent on {host} was lost")

    def _tick(self) -> None:
        now = time.time()
        self._check_stalls(now)
        self._publish_waits(self._diagnoser.tick(now))  # diagnosis (issue 13)
        for role in self._roles.values():
            if (
                role.state == RoleState.STARTING
                and role.running_at is not None
                and now >= role.running_at
                and role.pid is not None
            ):
                role.running_at = None
                self._set_state(role, RoleState.RUNNING, f"pid {role.pid}")
            elif role.state == RoleState.BACKOFF and role.backoff_until is not None and now >= role.backoff_until:
                role.backoff_until = None
                with self._lock:
                    role.policy_restarts += 1
                    role.restarts += 1
                self._launch_role(role)

    def _evaluate(self) -> None:
        """Decide what the cluster does after a role changed state (see :func:`core.controller.policy.evaluate`)."""
        decision = policy.evaluate(self._phase, self._role_facts(), self._completion, self._success_policy)
        if decision is not None and decision.phase != ClusterPhase.DONE:
            self._set_phase(decision.phase, decision.result, decision.reason)
            if decision.stop_rest:
                self._stop_rest()
            decision = policy.evaluate(self._phase, self._role_facts(), self._completion, self._success_policy)
        if decision is not None and decision.phase == ClusterPhase.DONE and self._phase != ClusterPhase.DONE:
            self._set_phase(ClusterPhase.DONE)
            self._done.set()

    def _role_facts(self) -> list[tuple[str, str, RoleState, str]]:
        return [(r.task.role_id, r.task.job, r.state, r.detail) for r in self._roles.values()]
