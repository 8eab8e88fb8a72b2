"""Counted tasks (``tasks = 2``) placed on a Slurm allocation: hosts from it, ports from its nodes.

A counted job has no hosts and ports in the cluster file: they exist only once the allocation
is running. :func:`place_counted` turns such a spec into one with explicit ``node:port`` tasks,
which is what everything after it needs (``TF_CONFIG``, the classic flags, the controller):

- **Hosts**: the counted tasks are dealt over the allocation's nodes in turn, in launch order:
  every ps task, then the chief, the workers, the evaluator, one after another on the next node
  (ps 0 on node 0, ps 1 on node 1, ...; the chief then goes on the node after the last ps). So
  parameter servers are spread across nodes first, and every node gets as many tasks as any
  other, give or take one. The same spec and node list always give the same placement.
- **Ports**: chosen free on the node itself, by the agent (``agent.pyz --free-ports N`` as a
  one-shot step, :func:`free_ports_on_slurm`): one call per node for all the ports it needs.

Tasks written as ``host:port`` are left as they are. Pure apart from ``free_ports_on``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from core.cluster.spec.addresses import canonical_host
from core.cluster.spec.model import JOB_ORDER, ClusterSpec, Job, Task
from core.slurm.allocation import PlacementError
from core.slurm.client import SlurmClient, SlurmError, step_argv

FreePortsOn = Callable[[str, int], list[int]]
# The one-shot step's name in squeue, so a look at the job shows what it is.
FREE_PORTS_STEP_NAME = "towerdeck-free-ports"


def deal(spec: ClusterSpec, nodes: Sequence[str]) -> dict[str, list[str]]:
    """Which node each counted task goes to: ``{job: [node of task 0, node of task 1, ...]}``.

    The counted tasks of every job, in launch order (ps, chief, worker, evaluator), are dealt
    over ``nodes`` in turn, one after another.
    """
    if not nodes:
        raise PlacementError("the Slurm allocation has no nodes to place the counted tasks on")
    out: dict[str, list[str]] = {}
    turn = 0
    for name in JOB_ORDER:
        job = spec.jobs.get(name)
        if job is None or job.count is None:
            continue
        out[name] = [nodes[(turn + i) % len(nodes)] for i in range(job.count)]
        turn += job.count
    return out


def place_counted(spec: ClusterSpec, nodes: Sequence[str], free_ports_on: FreePortsOn) -> ClusterSpec:
    """``spec`` with every counted job's tasks placed on ``nodes`` (see the module's rules).

    ``free_ports_on(node, n)`` returns ``n`` distinct free ports on ``node``; it is called once
    per node that gets counted tasks. A spec without counted jobs comes back unchanged. Raises
    :class:`PlacementError` when a node cannot give the ports it needs.
    """
    if not spec.has_counted():
        return spec
    dealt = deal(spec, nodes)
    needed: dict[str, int] = {}
    for job_nodes in dealt.values():
        for node in job_nodes:
            needed[node] = needed.get(node, 0) + 1
    # Ports written in the file are taken on their host: a chosen port must not be one of them.
    taken = {(canonical_host(t.host), t.port): t.role_id for t in spec.explicit_tasks()}
    ports_of: dict[str, list[int]] = {}
    for node in dict.fromkeys(n for job_nodes in dealt.values() for n in job_nodes):  # first-use order
        ports_of[node] = _ports_for(node, needed[node], free_ports_on=free_ports_on, taken=taken)
    jobs = dict(spec.jobs)
    next_port = {node: iter(ports) for node, ports in ports_of.items()}
    for name, job_nodes in dealt.items():
        job = spec.jobs[name]
        tasks = tuple(
            Task(name, index, node, next(next_port[node]), job.gpus, job.command, dict(job.env))
            for index, node in enumerate(job_nodes)
        )
        jobs[name] = Job(name, tasks, job.restart)
    return replace(spec, jobs=jobs)


def _ports_for(node: str, count: int, *, free_ports_on: FreePortsOn, taken: dict[tuple[str, int], str]) -> list[int]:
    try:
        ports = list(free_ports_on(node, count))
    except (OSError, SlurmError, ValueError) as exc:
        raise PlacementError(
            f"cannot get {count} free port(s) on node {node}: {exc}",
        ) from exc
    if len(ports) != count or len(set(ports)) != count:
        raise PlacementError(f"node {node} gave {len(set(ports))} distinct port(s) where {count} were asked for")
    for port in ports:
        if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
            raise PlacementError(f"node {node} gave {port!r}, which is not a TCP port")
        holder = taken.get((canonical_host(node), port))
        if holder is not None:
            raise PlacementError(
                f"node {node} chose port {port}, which the cluster file gives to {holder}; "
                f"launch again, or give {holder} a port outside the node's ephemeral range"
            )
    return ports


def parse_free_ports_answer(node: str, text: str) -> list[int]:
    """The ports in ``agent.pyz --free-ports`` output (its last JSON line); ValueError naming why not."""
    lines = [line for line in text.splitlines() if line.strip()]
    try:
        answer = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        answer = None
    if not isinstance(answer, dict):
        raise ValueError(f"the agent on {node} printed no answer (got {text[-200:]!r})")
    if "error" in answer:
        raise ValueError(str(answer["error"]))
    ports = answer.get("ports")
    if not isinstance(ports, list) or not all(isinstance(p, int) for p in ports):
        raise ValueError(f"the agent on {node} answered {answer!r}, not a list of ports")
    return list(ports)


def free_ports_argv(job_id: str, node: str, count: int, *, python: str, agent_path: Path) -> list[str]:
    """``srun --jobid=J --nodes=1 --ntasks=1 --nodelist=NODE --overlap ... agent.pyz --free-ports N``."""
    return step_argv(job_id, node, [python, str(agent_path), "--free-ports", str(count)], name=FREE_PORTS_STEP_NAME)


def free_ports_on_slurm(
    client: SlurmClient, job_id: str, *, python: str = sys.executable, agent_path: Path | None = None
) -> FreePortsOn:
    """A ``free_ports_on`` for :func:`place_counted` that asks each node of job ``job_id``.

    Each call is one ``srun`` step (through the ``[slurm] login`` node if the client has one:
    argv, quoted for its shell by the client) that runs the agent's zipapp with ``--free-ports``.
    The zipapp and ``python`` must be at the same path on the nodes, as for the agent itself.
    """
    if agent_path is None:
        from core.agent import artifact_file

        agent_path = artifact_file()
    agent = agent_path

    def free_ports_on(node: str, count: int) -> list[int]:
        try:
            out = client.run(free_ports_argv(job_id, node, count, python=python, agent_path=agent))
        except SlurmError as exc:
            raise ValueError(f"{exc.message}; {exc.fix}") from exc
        return parse_free_ports_answer(node, out)

    return free_ports_on
