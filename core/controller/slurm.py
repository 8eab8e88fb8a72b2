"""A run held by one Slurm allocation, as the controller drives it: a part of
:class:`core.controller.controller.Controller`, used when the spec has ``[slurm]`` and no transport factory
was given.

``launch`` submits the allocation and returns: the controller stays responsive while the job is
pending (a stop cancels it). When it runs, the tasks' hosts are mapped onto its nodes, one agent
step per host starts, and the roles launch as anywhere else. The run's ``slurm`` record (job id,
node list, nodes, each host's node and step, partition, state, pending reason) is kept in
``run.json`` and published as a ``slurm`` event, which the journal keeps. When Slurm ends the job
under the run, the run's result and the roles' ends say so. When the run is over the allocation
is cancelled (gracefully first); a detach leaves it to a later ``attach``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.cluster.locality import is_local_host
from core.cluster.spec import ClusterSpec
from core.controller.connections import HostConnections, agent_socket
from core.controller.ops import RoleOps
from core.controller.roles import RoleMachine
from core.controller.supervisor import Supervisor
from core.remote.transport import EventSink, Transport
from core.run.events import Event, SlurmChanged, warning
from core.run.publish import Publisher
from core.run.rundir import RunDir, read_run_json
from core.run.status import ALIVE, ClusterPhase
from core.slurm.allocation import Allocation, PlacementError, nodes_for_hosts, placed_for_allocation
from core.slurm.client import job_name_for, slurm_client
from core.slurm.counts import free_ports_on_slurm, place_counted
from core.slurm.transport import SlurmLink, slurm_endpoint, step_name_for


def recorded_slurm(run_path: Path) -> dict[str, Any] | None:
    """The ``slurm`` record of a run directory's run.json, if any."""
    record = (read_run_json(run_path) or {}).get("slurm")
    return record if isinstance(record, dict) else None


class SlurmHosting:
    """The controller's side of a Slurm run (see the module docstring), on the controller's thread
    but for the few methods that say "any thread"."""

    def __init__(
        self,
        spec: Callable[[], ClusterSpec],
        run: RunDir,
        roles: RoleMachine,
        hosts: HostConnections,
        publisher: Publisher,
        *,
        report: Callable[[dict[str, Any]], None],
        attaching: bool,
        on_disconnect: str,
        place: Callable[[ClusterSpec], None],
    ) -> None:
        """``report``: where the allocation's reports go (the controller's queue, to come back to
        :meth:`on_report` on its thread); ``place``: the controller takes the cluster as placed on
        the allocation's nodes."""
        cluster = spec()
        assert cluster.slurm is not None
        self._spec = spec
        self._run = run
        self._roles = roles
        self._hosts = hosts
        self._publisher = publisher
        self._attaching = attaching
        self._on_disconnect = on_disconnect
        self._place = place
        self._nodes: dict[str, str] = {}
        self._record: dict[str, Any] = {"state": "submitting", "partition": cluster.slurm.partition}
        self.ended_by: str | None = None  # how Slurm ended the job under the run, once it did
        self.allocation = Allocation(cluster.slurm, slurm_client(cluster), job_name_for(cluster.name), report)
        # Wired by the controller once the supervisor exists (it needs this part first).
        self.supervisor: Supervisor | None = None
        self.ops: RoleOps | None = None
        if attaching:
            record = recorded_slurm(run.path) or {}
            self._record = {**self._record, **record}
            self._nodes = {str(h): str(n) for h, n in (record.get("hosts") or {}).items()}
            self._place(placed_for_allocation(cluster, self._nodes))
            self._hosts.remote_hosts = frozenset()

    def _parts(self) -> tuple[Supervisor, RoleOps]:
        assert self.supervisor is not None and self.ops is not None, "wired by the controller"
        return self.supervisor, self.ops

    def hosts(self) -> set[str]:
        """The task hosts placed on the allocation's nodes, each reached through its node's agent
        step (empty before the allocation runs). Any thread."""
        return set(self._nodes)

    def state(self) -> dict[str, Any]:
        """The run's ``slurm`` record (job_id, state, reason, nodelist, nodes, hosts, steps,
        partition). Any thread."""
        return json.loads(json.dumps(self._record))

    # ------------------------------------------------------------------ on the controller thread

    def launch(self) -> str:
        self.allocation.start()
        return "submitting the Slurm allocation"

    def attach(self) -> None:
        """Watch the recorded job again (a reattach): Slurm may end it under this run too."""
        if self._record.get("job_id"):
            self.allocation.start(str(self._record["job_id"]))

    def _update(self, **fields: Any) -> None:
        self._record.update(fields)
        self._run.update(slurm=self._record)
        self._publisher.publish(Event(round(time.time(), 3), None, SlurmChanged.from_record(self._record)))

    def on_report(self, report: dict[str, Any]) -> None:
        supervisor, ops = self._parts()
        state = report.get("state")
        if state == "submitted":
            self._update(state="pending", job_id=report["job_id"], reason="")
        elif state == "pending":
            self._update(state="pending", reason=report.get("reason", ""))
        elif state == "running" and supervisor.phase == ClusterPhase.IDLE:
            self._running(list(report.get("nodes") or []), str(report.get("nodelist", "")))
        elif state == "ended":
            self._ended(str(report.get("slurm_state")), str(report.get("message")))
        elif state == "failed":
            self._update(state="failed", reason=report.get("message", ""))
            if supervisor.phase not in (ClusterPhase.DONE, ClusterPhase.DETACHED):
                supervisor.set_phase(ClusterPhase.FAILING, "failed", str(report.get("message")))
                ops.stop_rest()

    def _running(self, nodes: list[str], nodelist: str) -> None:
        supervisor, ops = self._parts()
        job_id = self.allocation.job_id
        assert job_id is not None
        try:
            # Where the tasks go in the allocation, before any agent starts: counted tasks
            # (tasks = N) get their nodes and ports (each node chooses its own, in a one-shot step),
            # then every task host is mapped onto its node.
            if self._spec().has_counted():
                self._place_counted(job_id, nodes)
            self._nodes = nodes_for_hosts(self._spec(), job_id, nodes)
        except PlacementError as exc:
            self._update(state="failed", nodelist=nodelist, nodes=nodes, reason=str(exc))
            supervisor.set_phase(ClusterPhase.FAILING, "failed", str(exc))
            ops.stop_rest()
            return
        self._place(placed_for_allocation(self._spec(), self._nodes))
        self._hosts.remote_hosts = frozenset()
        self._update(state="running", reason="", nodelist=nodelist, nodes=nodes, hosts=self._nodes)
        supervisor.set_phase(ClusterPhase.RUNNING)
        self._hosts.connect_all([r.host_key for r in self._roles], attaching=self._attaching)
        self._update(steps=self._steps(job_id))
        for role in self._roles:
            ops.launch(role)

    def _place_counted(self, job_id: str, nodes: list[str]) -> None:
        """Give the counted jobs' roles their node:port tasks, and keep the placed cluster in the
        run directory (what ``attach`` and a replay read)."""
        placed = place_counted(self._spec(), nodes, free_ports_on_slurm(self.allocation.client, job_id))
        self._place(placed)
        for task in placed.tasks():
            role = self._roles.get(task.role_id)
            if role is not None:
                role.task = task
                role.host_key = task.host
        self._run.write_spec(placed)

    def _steps(self, job_id: str) -> dict[str, str]:
        """Each host's agent step id, found by the step's name."""
        named = self.allocation.client.named_steps(job_id)
        return {host: named[step_name_for(host)] for host in self._nodes if step_name_for(host) in named}

    def factory(self, host: str, sink: EventSink, log_path: Path) -> Transport:
        """The transport to ``host``'s agent: a step of the allocation on its node."""
        assert self._record.get("job_id")
        node = self._nodes[host]
        endpoint = slurm_endpoint(
            self.allocation.client,
            str(self._record["job_id"]),
            node,
            host=host,
            sock=agent_socket(self._run, host),
            log=log_path,
            on_disconnect=self._on_disconnect,
        )
        return SlurmLink(
            endpoint,
            sink,
            self._run.path,
            log_path,
            attach=self._attaching,
            node_is_here=is_local_host(node),
            gone=self._gone,
        )

    def _gone(self) -> str | None:
        """Any thread (a link's, before it reconnects): the job's end in words once Slurm ended it,
        taking every agent step with it; else None."""
        if self.ended_by is not None:
            return self.ended_by
        ended = self.allocation.ended_now()
        return ended.text if ended is not None else None

    def check_end(self) -> str | None:
        """When a role ended unasked or an agent was lost: if Slurm ended the job, stop the run
        as Slurm's doing and return the words for it; else None (the role's own end)."""
        if self.ended_by is not None:
            return self.ended_by
        ended = self.allocation.ended_now()
        if ended is None:
            return None
        self._ended(ended.slurm_state, ended.text)
        return self.ended_by

    def _ended(self, slurm_state: str, text: str) -> None:
        """Slurm ended the job: every role still alive is being ended by it; say so."""
        supervisor, ops = self._parts()
        if self.ended_by is not None or supervisor.phase in (ClusterPhase.DONE, ClusterPhase.DETACHED):
            return
        self.ended_by = text
        self._update(state="ended", reason=text)
        for role in self._roles:
            if role.state in ALIVE:
                role.stop_requested = True
        supervisor.set_phase(ClusterPhase.STOPPING, "stopped" if slurm_state == "CANCELLED" else "failed", text)
        ops.stop_rest()

    def release(self, *, detached: bool) -> None:
        """The controller is done: cancel the allocation, unless the run was left running."""
        cancel = not detached
        failed = self.allocation.release(cancel=cancel)
        if failed:
            message = f"cancelling the Slurm allocation failed: {failed}"
            self._publisher.publish(warning(message, round(time.time(), 3)))
        elif cancel and self.allocation.job_id is not None and self.ended_by is None:
            self._update(state="cancelled", reason="the run is over")
