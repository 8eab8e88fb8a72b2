"""A run held by one Slurm allocation, as the controller drives it. A mixin of
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
from pathlib import Path
from typing import Any

from core.cluster.locality import is_local_host
from core.controller.base import ControllerBase
from core.controller.connections import agent_socket
from core.remote.transport import EventSink, Transport
from core.run.rundir import read_run_json
from core.run.status import ALIVE, ClusterPhase
from core.slurm.allocation import Allocation, PlacementError, nodes_for_hosts, placed_for_allocation
from core.slurm.client import job_name_for, slurm_client
from core.slurm.counts import free_ports_on_slurm, place_counted
from core.slurm.transport import SlurmLink, slurm_endpoint, step_name_for


def recorded_slurm(run_path: Path) -> dict[str, Any] | None:
    """The ``slurm`` record of a run directory's run.json, if any."""
    record = (read_run_json(run_path) or {}).get("slurm")
    return record if isinstance(record, dict) else None


class SlurmHosting(ControllerBase):
    """The controller's side of a Slurm run (see the module docstring)."""

    # The allocation and its record (set by _slurm_setup); what the other parts share is in ControllerBase.
    _slurm: Allocation | None = None
    _slurm_record: dict[str, Any]
    _slurm_nodes: dict[str, str]

    def _slurm_setup(self) -> None:
        """Called by the controller when the run is held by a Slurm allocation."""
        assert self.spec.slurm is not None
        self._slurm_nodes = {}
        self._slurm_record = {"state": "submitting", "partition": self.spec.slurm.partition}
        self._slurm = Allocation(
            self.spec.slurm,
            slurm_client(self.spec),
            job_name_for(self.spec.name),
            lambda report: self._queue.put(("slurm", report, None)),
        )
        if self._attaching:
            record = recorded_slurm(self.run.path) or {}
            self._slurm_record = {**self._slurm_record, **record}
            self._slurm_nodes = {str(h): str(n) for h, n in (record.get("hosts") or {}).items()}
            self.spec = placed_for_allocation(self.spec, self._slurm_nodes)
            self._remote_hosts = set()

    def _slurm_hosts(self) -> set[str]:
        """The task hosts placed on the allocation's nodes, each reached through its node's agent
        step (empty before the allocation runs, and for a run not on Slurm). Any thread."""
        return set(self._slurm_nodes) if self._slurm is not None else set()

    def slurm_state(self) -> dict[str, Any] | None:
        """The run's ``slurm`` record (job_id, state, reason, nodelist, nodes, hosts, steps,
        partition); None for a run not on Slurm. Any thread."""
        if self._slurm is None:
            return None
        return json.loads(json.dumps(self._slurm_record))

    # ------------------------------------------------------------------ on the controller thread

    def _slurm_launch(self) -> str:
        assert self._slurm is not None
        self._slurm.start()
        return "submitting the Slurm allocation"

    def _slurm_attach(self) -> None:
        """Watch the recorded job again (a reattach): Slurm may end it under this run too."""
        if self._slurm is not None and self._slurm_record.get("job_id"):
            self._slurm.start(str(self._slurm_record["job_id"]))

    def _slurm_update(self, **fields: Any) -> None:
        self._slurm_record.update(fields)
        self.run.update(slurm=self._slurm_record)
        self._publish("slurm", **self._slurm_record)

    def _on_slurm(self, report: dict[str, Any]) -> None:
        state = report.get("state")
        if state == "submitted":
            self._slurm_update(state="pending", job_id=report["job_id"], reason="")
        elif state == "pending":
            self._slurm_update(state="pending", reason=report.get("reason", ""))
        elif state == "running" and self._phase == ClusterPhase.IDLE:
            self._slurm_running(list(report.get("nodes") or []), str(report.get("nodelist", "")))
        elif state == "ended":
            self._slurm_ended(str(report.get("slurm_state")), str(report.get("message")))
        elif state == "failed":
            self._slurm_update(state="failed", reason=report.get("message", ""))
            if self._phase not in (ClusterPhase.DONE, ClusterPhase.DETACHED):
                self._set_phase(ClusterPhase.FAILING, "failed", str(report.get("message")))
                self._stop_rest()

    def _slurm_running(self, nodes: list[str], nodelist: str) -> None:
        assert self._slurm is not None and self._slurm.job_id is not None
        job_id = self._slurm.job_id
        try:
            # Where the tasks go in the allocation, before any agent starts: counted tasks
            # (tasks = N) get their nodes and ports (each node chooses its own, in a one-shot step),
            # then every task host is mapped onto its node.
            if self.spec.has_counted():
                self._place_counted(job_id, nodes)
            self._slurm_nodes = nodes_for_hosts(self.spec, job_id, nodes)
        except PlacementError as exc:
            self._slurm_update(state="failed", nodelist=nodelist, nodes=nodes, reason=str(exc))
            self._set_phase(ClusterPhase.FAILING, "failed", str(exc))
            self._stop_rest()
            return
        self.spec = placed_for_allocation(self.spec, self._slurm_nodes)
        self._remote_hosts = set()
        self._slurm_update(state="running", reason="", nodelist=nodelist, nodes=nodes, hosts=self._slurm_nodes)
        self._set_phase(ClusterPhase.RUNNING)
        self._connect_all()
        self._slurm_update(steps=self._slurm_steps(job_id))
        for role in self._roles.values():
            self._launch_role(role)

    def _place_counted(self, job_id: str, nodes: list[str]) -> None:
        """Give the counted jobs' roles their node:port tasks, and keep the placed cluster in the
        run directory (what ``attach`` and a replay read)."""
        assert self._slurm is not None
        self.spec = place_counted(self.spec, nodes, free_ports_on_slurm(self._slurm.client, job_id))
        for task in self.spec.tasks():
            role = self._roles[task.role_id]
            role.task = task
            role.host_key = task.host
        self.run.write_spec(self.spec)

    def _slurm_steps(self, job_id: str) -> dict[str, str]:
        """Each host's agent step id, found by the step's name."""
        assert self._slurm is not None
        named = self._slurm.client.named_steps(job_id)
        return {host: named[step_name_for(host)] for host in self._slurm_nodes if step_name_for(host) in named}

    def _slurm_factory(self, host: str, sink: EventSink, log_path: Path) -> Transport:
        assert self._slurm is not None and self._slurm_record.get("job_id")
        node = self._slurm_nodes[host]
        endpoint = slurm_endpoint(
            self._slurm.client,
            str(self._slurm_record["job_id"]),
            node,
            host,
            agent_socket(self.run, host),
            log_path,
            self._on_disconnect,
        )
        return SlurmLink(
            endpoint,
            sink,
            self.run.path,
            log_path,
            attach=self._attaching,
            node_is_here=is_local_host(node),
            gone=self._slurm_gone,
        )

    def _slurm_gone(self) -> str | None:
        """Any thread (a link's, before it reconnects): the job's end in words once Slurm ended it,
        taking every agent step with it; else None."""
        if self._slurm_end is not None:
            return self._slurm_end
        ended = self._slurm.ended_now() if self._slurm is not None else None
        return ended[1] if ended is not None else None

    def _slurm_check_end(self) -> str | None:
        """When a role ended unasked or an agent was lost: if Slurm ended the job, stop the run
        as Slurm's doing and return the words for it; else None (the role's own end)."""
        if self._slurm is None or self._slurm_end is not None:
            return self._slurm_end
        ended = self._slurm.ended_now()
        if ended is None:
            return None
        self._slurm_ended(*ended)
        return self._slurm_end

    def _slurm_ended(self, slurm_state: str, text: str) -> None:
        """Slurm ended the job: every role still alive is being ended by it; say so."""
        if self._slurm_end is not None or self._phase in (ClusterPhase.DONE, ClusterPhase.DETACHED):
            return
        self._slurm_end = text
        self._slurm_update(state="ended", reason=text)
        for role in self._roles.values():
            if role.state in ALIVE:
                role.stop_requested = True
        self._set_phase(ClusterPhase.STOPPING, "stopped" if slurm_state == "CANCELLED" else "failed", text)
        self._stop_rest()

    def _slurm_release(self) -> None:
        """The controller is done: cancel the allocation, unless the run was left running."""
        if self._slurm is None:
            return
        cancel = not self._detached
        failed = self._slurm.release(cancel=cancel)
        if failed:
            self._publish("warning", message=f"cancelling the Slurm allocation failed: {failed}")
        elif cancel and self._slurm.job_id is not None and self._slurm_end is None:
            self._slurm_update(state="cancelled", reason="the run is over")
