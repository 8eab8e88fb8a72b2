"""What the controller takes in besides role states and output: host samples, TensorBoard scalars,
and log-write trouble. Steps among the scalars are progress for the stall watch."""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

from core.controller.connections import HostConnections
from core.controller.roles import RoleMachine
from core.controller.stalls import StallWatch
from core.controller.supervised import SupervisedRole
from core.run.events import Event, Sample, Scalars, WarningMessage
from core.run.publish import Publisher
from core.run.role_view import apply_sample
from core.run.rundir import RunDir
from core.telemetry.tbevents import ScalarTailer


class TelemetryIntake:
    """Samples, scalars and log-write warnings, on the controller's thread."""

    def __init__(
        self,
        run: RunDir,
        roles: RoleMachine,
        hosts: HostConnections,
        stalls: StallWatch,
        publisher: Publisher,
    ) -> None:
        self._run = run
        self._roles = roles
        self._hosts = hosts
        self._stalls = stalls
        self._publisher = publisher

    def on_sample(self, host: str, event: dict[str, Any]) -> None:
        """Keep each role's latest figures; publish the sample; keep it in the run directory.

        ``sample`` events carry ``host`` (the host name), ``t``, ``figures`` (host CPU, memory,
        load), ``roles`` (per role: alive, pids, cpu_percent, rss_bytes, threads) and ``gpus``
        (per GPU: NVML figures and the processes on it, each mapped to a role).
        """
        roles: dict[str, Any] = event["roles"] if isinstance(event.get("roles"), dict) else {}
        gpus: list[Any] = event["gpus"] if isinstance(event.get("gpus"), list) else []
        with self._roles.lock:
            apply_sample(self._roles.by_name(), {"roles": roles, "gpus": gpus})
        self.poll_tensorboard(host)
        record: dict[str, Any] = {
            "t": event.get("t"),
            "host": host,
            "figures": event.get("host"),
            "roles": roles,
            "gpus": gpus,
        }
        self._run.append_sample(host, record)
        t = event.get("t")
        at = float(t) if isinstance(t, (int, float)) and not isinstance(t, bool) else round(time.time(), 3)
        self._publisher.publish(Event(at, None, Sample.from_record(record)))

    def poll_tensorboard(self, host: str | None = None) -> None:
        """The fallback for agents that do not tail TensorBoard files (their hello lacks
        ``tensorboard: true``): read local roles' event directories here, once per sample period:
        ``host``'s roles with each of its samples (None: every host's, as a run ends). Every
        host's sample looked at every role: hosts x roles checks a period, ~131,000 a second at
        1,024 workers on 128 hosts, where a host whose agent tails its own files costs one."""
        hosts = self._hosts
        if host is not None and (hosts.tails_tensorboard(host) or host in hosts.remote_hosts):
            return
        for role in self._roles if host is None else self._roles.on_host(host):
            if hosts.tails_tensorboard(role.host_key) or role.host_key in hosts.remote_hosts:
                continue
            if role.tensorboard is None:
                role.tensorboard = ScalarTailer(self._run.role_dir(role.task) / "tensorboard")
            points = role.tensorboard.poll(max_points=10_000)
            if points:
                self.on_scalars(role, [dataclasses.asdict(p) for p in points])

    def on_scalars(self, role: SupervisedRole, points: list[dict[str, Any]]) -> None:
        """TensorBoard scalars of a role: its step and loss (when its output has none), its own file,
        and a ``scalars`` event carrying ``points``: [{tag, step, wall_time, value}]."""
        with self._roles.lock:
            role.add_scalars(points)
        self._run.append_scalars(role.task, points)
        self._publisher.publish(Event(round(time.time(), 3), role.task.role_id, Scalars(points, attempt=role.attempt)))
        if role.stats.step is None:  # a TensorBoard-only trainer: its summaries are its progress
            self._stalls.progress(role, [p["step"] for p in points if isinstance(p.get("step"), int)])

    def on_log_write(self, host: str, event: dict[str, Any], *, failed: bool) -> None:
        """A role's output cannot be written (disk full) or can again: a ``warning`` naming the
        file and the fix, with ``path`` and, on recovery, ``lost_bytes``. The role is not touched."""
        name = event.get("role") if isinstance(event.get("role"), str) else None
        path = str(event.get("log"))
        role = self._roles.get(name)
        if role is not None and event.get("attempt") in (None, role.attempt):
            with self._roles.lock:
                role.output_blocked = failed
                if not role.output_blocked and role.progress_at is not None:
                    role.progress_at = max(role.progress_at, time.time())  # a fresh window to show a step
        folder = os.path.dirname(path)
        if failed:
            message = (
                f"{event.get('error')} (on {host}). {name} keeps training; its newest output waits in memory "
                f"and is counted as lost beyond 8 MiB. Fix: free space on that disk (`df -h {folder}`), "
                "or launch the next run with --run-dir on a disk with room"
            )
        else:
            lost = int(event.get("lost_bytes") or 0)
            how = "gave up on the last" if event.get("gave_up") else "writing again;"
            message = f"{name}'s output log {path}: {how} {lost} bytes lost (the log says where)"
        lost_bytes = event.get("lost_bytes")
        payload = WarningMessage(message, path=path, lost_bytes=lost_bytes if isinstance(lost_bytes, int) else None)
        self._publisher.publish(Event(round(time.time(), 3), name, payload))
