"""One run's Slurm allocation: submitted, watched, mapped onto the tasks' hosts, cancelled.

:class:`Allocation` runs on its own thread so the controller never waits on Slurm: it submits
the holder job, reports each change of the pending reason, the nodes once it runs, and how it
ended if Slurm ends it (scancel by someone else, the time limit, a node failure). Each report is
a dict handed to ``post`` (the controller's queue); the controller acts on it on its thread.

:func:`nodes_for_hosts` maps the tasks' hosts onto the allocation's nodes; :func:`describe_end`
says in words how Slurm ended a job ("cancelled by Slurm (job 12)").
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, NamedTuple

from core.cluster.locality import is_local_host
from core.cluster.slurm_table import SlurmConfig
from core.cluster.spec import ClusterSpec, HostConfig
from core.slurm.client import ENDED_STATES, JobEnd, SlurmClient, SlurmError

PENDING_POLL_S = 0.5  # while pending: a user waits on this, and squeue is cheap
WATCH_PERIOD_S = 2.0  # while running: only to notice Slurm ending the job
CANCEL_GRACE_S = 10.0
END_WAIT_S = 3.0
# squeue states after which the job no longer holds its nodes for us (COMPLETING: ending).
GONE_STATES = ENDED_STATES | {"COMPLETING", "SUSPENDED", "STOPPED"}

Post = Callable[[dict[str, Any]], None]


class PlacementError(Exception):
    """The tasks cannot be placed on the allocation (a host outside it, a node that cannot give
    the ports of counted tasks); the message names the task or node and the fix."""


def nodes_for_hosts(
    spec: ClusterSpec, job_id: str, nodes: Sequence[str], *, is_local: Callable[[str], bool] = is_local_host
) -> dict[str, str]:
    """Each task host's node: itself when it is one of the allocation's nodes; with a one-node
    allocation and every other host local or loopback (``127.0.0.1``), that node. Raises
    :class:`PlacementError` naming the first task that fits neither."""
    hosts: dict[str, str] = {}
    for task in spec.tasks():
        hosts.setdefault(task.host, task.role_id)
    placed = {host: host for host in hosts if host in nodes}
    rest = [host for host in hosts if host not in placed]
    if rest and len(nodes) == 1 and all(is_local(host) for host in rest):
        placed.update({host: nodes[0] for host in rest})
        rest = []
    if rest:
        # With one node the local hosts would fit: name a host that does not.
        host = next((h for h in rest if not is_local(h)), rest[0]) if len(nodes) == 1 else rest[0]
        raise PlacementError(
            f"task {hosts[host]} is on {host!r}, which is not a node of Slurm job {job_id} "
            f"(its nodes: {', '.join(nodes) or 'none'}); fix: write each task's host as one of the "
            "allocation's nodes (or [slurm] nodes = 1 with every task on 127.0.0.1), or give the job "
            "a count (tasks = N) so the allocation places it"
        )
    return placed


class JobEnded(NamedTuple):
    """How Slurm ended (or is ending) a run's job: its state as squeue says it, and in words."""

    slurm_state: str
    text: str


def placed_for_allocation(spec: ClusterSpec, host_nodes: dict[str, str]) -> ClusterSpec:
    """``spec`` as it runs in the allocation: every task host is reached through its node's step,
    never over SSH, on the filesystem the nodes share (where the run directory is)."""
    hosts = dict(spec.hosts)
    for host in host_nodes:
        config = hosts.get(host) or HostConfig(host)
        hosts[host] = replace(config, ssh=None)
    return replace(spec, hosts=hosts)


def time_limit_text(config: SlurmConfig) -> str:
    """The allocation's time limit as a person reads it: ``1 min``, ``4:00:00``."""
    if config.time is None:
        return "the partition's"
    return f"{config.time} min" if config.time.isdigit() else config.time


def describe_end(job_id: str, state: str, config: SlurmConfig, *, end: JobEnd | None = None) -> str:
    """How Slurm ended the job, in the words a run's result and its roles' ends use."""
    if state == "CANCELLED":
        return f"cancelled by Slurm (job {job_id})"
    if state == "TIMEOUT":
        return f"timed out by Slurm (time limit {time_limit_text(config)}, job {job_id})"
    if end is not None:
        return end.describe().replace(f"Slurm job {job_id}", f"ended by Slurm: job {job_id}", 1)
    return f"ended by Slurm: job {job_id} is {state}"


class Allocation:
    """Submits (or adopts) one job and watches it on a thread; every report goes to ``post``.

    Reports (``state`` then fields): ``submitted`` job_id; ``pending`` reason; ``running``
    nodelist, nodes; ``ended`` slurm_state, text; ``failed`` message (it never ran).
    """

    def __init__(self, config: SlurmConfig, client: SlurmClient, job_name: str, post: Post) -> None:
        self.config = config
        self.client = client
        self.job_name = job_name
        self.job_id: str | None = None
        self._post = post
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._ended: JobEnded | None = None
        self._lock = threading.Lock()

    def start(self, job_id: str | None = None) -> None:
        """Submit a new job, or watch ``job_id`` (a reattach); returns at once."""
        self.job_id = job_id
        self._thread = threading.Thread(target=self._watch, name="slurm-allocation", daemon=True)
        self._thread.start()

    def ended_now(self) -> JobEnded | None:
        """Slurm's state, and in words, when the job has ended or is ending, else None. Asks squeue
        now: a role that died by a signal may be Slurm's doing, which the watcher sees later."""
        with self._lock:
            if self._ended is not None:
                return self._ended
        if self.job_id is None:
            return None
        try:
            info = self.client.job(self.job_id)
        except SlurmError:
            return None
        if info is not None and info.state not in GONE_STATES:
            return None
        return self._end(info.state if info is not None else "")

    def release(self, *, cancel: bool = True, grace_s: float = CANCEL_GRACE_S) -> str | None:
        """Stop watching and, with ``cancel``, end the job gracefully (nothing left in squeue).
        Returns why the cancel failed, else None."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(grace_s + 30.0)
        if not cancel or self.job_id is None:
            return None
        try:
            self.client.cancel(self.job_id, grace_s=grace_s)
        except SlurmError as exc:
            return str(exc)
        return None

    # ------------------------------------------------------------------ the watcher thread

    def _end(self, seen_state: str = "") -> JobEnded:
        assert self.job_id is not None
        end: JobEnd | None = None
        # A job being cancelled is COMPLETING for a moment before scontrol names its end.
        deadline = time.monotonic() + END_WAIT_S
        while end is None and time.monotonic() < deadline:
            with contextlib.suppress(SlurmError):
                end = self.client.job_end(self.job_id)
            if end is None:
                time.sleep(0.1)
        state = end.state if end is not None else (seen_state if seen_state in ENDED_STATES else "ENDED")
        ended = JobEnded(slurm_state=state, text=describe_end(self.job_id, state, self.config, end=end))
        with self._lock:
            self._ended = ended
        return ended

    def _watch(self) -> None:
        try:
            self._watch_job()
        except SlurmError as exc:
            if not self._stop.is_set():
                self._post({"state": "failed", "message": str(exc)})

    def _watch_job(self) -> None:
        running = self.job_id is not None  # adopted: it ran already
        if self.job_id is None:
            self.job_id = self.client.submit(self.config, self.job_name)
            self._post({"state": "submitted", "job_id": self.job_id})
        reason: str | None = None
        while not self._stop.is_set():
            info = self.client.job(self.job_id)
            if info is None or info.state in GONE_STATES:
                state, text = self._end(info.state if info is not None else "")
                if not self._stop.is_set():
                    self._post({"state": "ended" if running else "failed", "slurm_state": state, "message": text})
                return
            if info.pending and info.reason != reason:
                reason = info.reason
                self._post({"state": "pending", "reason": reason})
            elif info.running and not running:
                running = True
                nodes = self.client.hostnames(info.nodelist)
                self._post({"state": "running", "nodelist": info.nodelist, "nodes": nodes})
            self._stop.wait(WATCH_PERIOD_S if running else PENDING_POLL_S)
