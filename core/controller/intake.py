"""What the controller takes in besides role states: host samples, TensorBoard scalars, log-write
trouble, and the stall detection that steps feed. A mixin of :class:`core.controller.controller.Controller`."""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

from core.cluster.stuck_options import start_stall_detail
from core.controller.base import ControllerBase
from core.controller.supervised import SupervisedRole
from core.run.role_view import apply_sample
from core.run.status import RoleState
from core.telemetry.tbevents import ScalarTailer


class TelemetryIntake(ControllerBase):
    """Samples, scalars, log-write warnings and stalls, on the controller's thread."""

    def _on_sample(self, host: str, event: dict[str, Any]) -> None:
        """Keep each role's latest figures; publish the sample; keep it in the run directory.

        ``sample`` events carry ``host`` (the host name), ``t``, ``figures`` (host CPU, memory,
        load), ``roles`` (per role: alive, pids, cpu_percent, rss_bytes, threads) and ``gpus``
        (per GPU: NVML figures and the processes on it, each mapped to a role).
        """
        roles: dict[str, Any] = event["roles"] if isinstance(event.get("roles"), dict) else {}
        gpus: list[Any] = event["gpus"] if isinstance(event.get("gpus"), list) else []
        with self._lock:
            apply_sample(self._roles, {"roles": roles, "gpus": gpus})
        self._poll_tensorboard()
        record: dict[str, Any] = {
            "t": event.get("t"),
            "host": host,
            "figures": event.get("host"),
            "roles": roles,
            "gpus": gpus,
        }
        self.run.append_sample(host, record)
        self._publish("sample", **record)

    def _poll_tensorboard(self) -> None:
        """The fallback for agents that do not tail TensorBoard files (their hello lacks
        ``tensorboard: true``): read local roles' event directories here, once per sample period."""
        for role in self._roles.values():
            if self._agent_tails_tb.get(role.host_key) or role.host_key in self._remote_hosts:
                continue
            if role.tensorboard is None:
                role.tensorboard = ScalarTailer(self.run.role_dir(role.task) / "tensorboard")
            points = role.tensorboard.poll(max_points=10_000)
            if points:
                self._on_scalars(role, [dataclasses.asdict(p) for p in points])

    def _on_scalars(self, role: SupervisedRole, points: list[dict[str, Any]]) -> None:
        """TensorBoard scalars of a role: its step and loss (when its output has none), its own file,
        and a ``scalars`` event carrying ``points``: [{tag, step, wall_time, value}]."""
        with self._lock:
            role.add_scalars(points)
        self.run.append_scalars(role.task, points)
        self._publish("scalars", role=role.task.role_id, attempt=role.attempt, points=points)
        if role.stats.step is None:  # a TensorBoard-only trainer: its summaries are its progress
            self._note_progress(role, [p["step"] for p in points if isinstance(p.get("step"), int)])

    def _on_log_write(self, host: str, kind: str, event: dict[str, Any]) -> None:
        """A role's output cannot be written (disk full) or can again: a ``warning`` naming the
        file and the fix, with ``path`` and, on recovery, ``lost_bytes``. The role is not touched."""
        name = event.get("role") if isinstance(event.get("role"), str) else None
        path = str(event.get("log"))
        role = self._roles.get(name) if name is not None else None
        if role is not None and event.get("attempt") in (None, role.attempt):
            with self._lock:
                role.output_blocked = kind == "log_write_failed"
                if not role.output_blocked and role.progress_at is not None:
                    role.progress_at = max(role.progress_at, time.time())  # a fresh window to show a step
        folder = os.path.dirname(path)
        if kind == "log_write_failed":
            message = (
                f"{event.get('error')} (on {host}). {name} keeps training; its newest output waits in memory "
                f"and is counted as lost beyond 8 MiB. Fix: free space on that disk (`df -h {folder}`), "
                "or launch the next run with --run-dir on a disk with room"
            )
        else:
            lost = int(event.get("lost_bytes") or 0)
            how = "gave up on the last" if event.get("gave_up") else "writing again;"
            message = f"{name}'s output log {path}: {how} {lost} bytes lost (the log says where)"
        self._publish("warning", role=name, message=message, path=path, lost_bytes=event.get("lost_bytes"))

    def _note_progress(self, role: SupervisedRole, steps: list[int]) -> None:
        """A new step is progress; it clears a stall."""
        if not steps or steps[-1] == role.last_step:
            return
        previous = role.progress_at
        with self._lock:
            role.last_step = steps[-1]
            # This machine's clock, not the agent's: a remote host's clock may be off by minutes.
            role.progress_at = time.time()
        if role.stalled:
            self._set_stalled(role, False, f"step {role.last_step}", since=previous)
        self._publish_waits(self._diagnoser.on_step(role.task.role_id, role.progress_at))  # diagnosis

    def _set_stalled(self, role: SupervisedRole, stalled: bool, detail: str, since: float | None = None) -> None:
        """Mark or clear a stall and say so: ``role_stalled`` events carry ``stalled`` (bool),
        ``stalled_for_s`` (how long without a step, so far or in all), ``step`` (the last one
        seen), ``stall_after_s`` and ``detail``."""
        since = since if since is not None else role.progress_at
        with self._lock:
            role.stalled = stalled
            role.stalled_since = since if stalled else None
        self._publish(
            "role_stalled",
            role=role.task.role_id,
            stalled=stalled,
            stalled_for_s=round(time.time() - since, 1) if since is not None else None,
            step=role.last_step,
            stall_after_s=self.spec.stall_after_s,
            attempt=role.attempt,
            detail=detail,
        )

    def _check_stalls(self, now: float) -> None:
        """A running role that has shown a step and none since ``stall_after_s`` is stalled.

        Roles that never print a step (ps, custom servers) are never judged: silence is their
        normal state. Leaving RUNNING clears the mark.
        """
        after_s = self.spec.stall_after_s
        for role in self._roles.values():
            if role.stalled and role.state != RoleState.RUNNING:
                self._set_stalled(role, False, f"role is {role.state}")
            elif (
                after_s > 0
                and not role.stalled
                and role.state == RoleState.RUNNING
                and not role.output_blocked
                and role.progress_at is not None
                and now - role.progress_at >= after_s
            ):
                self._set_stalled(
                    role, True, f"no new step for {now - role.progress_at:.0f} s after step {role.last_step}"
                )
            elif (  # diagnosis (issue 13): no step at all since the role started
                not role.stalled
                and role.state == RoleState.RUNNING
                and role.progress_at is None
                and role.started_at is not None
                and not role.output_blocked
                and (
                    why := start_stall_detail(
                        self.spec.stuck,
                        self.spec.strategy,
                        role.task.job,
                        now - role.started_at,
                        False,
                        role.last_lines(5),
                    )
                )
            ):
                self._set_stalled(role, True, why, since=role.started_at)
