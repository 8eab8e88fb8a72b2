"""Every GPU of this machine and of other hosts, as ``python main.py gpus`` and the pre-flight show them.

Each host runs the agent's own NVML query (``core/agent/gpuquery.py``, from the same zipapp that
is launched): this machine as a child process (``agent.pyz --gpus``), a remote host over the
agent's SSH path (batch mode, host keys checked, the zipapp on stdin, nothing written there).
Hosts are queried at once, each on its own reader thread; a host that does not answer within
the time limit is reported as such and holds up no other.

    feeds = [HostFeed(t) for t in targets]       # start(); latest() -> HostGpus; close()
    results = snapshot_all(targets, timeout_s=20) # one look at every host, in order
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from core.agent import artifact_file
from core.cluster.locality import is_local_host
from core.cluster.spec import ClusterSpec, HostConfig, parse_ssh_destination
from core.remote.ssh import GPUS_BOOTSTRAP, agent_payload, explain_failure, remote_python, ssh_argv
from core.run import children
from core.slurm.client import SlurmClient, SlurmError, step_argv

GIB = 1 << 30


GPUS_STEP_NAME = "towerdeck-gpus"


@dataclass(frozen=True)
class GpuTarget:
    """A host to look at: ``config`` None is this machine; ``slurm`` (client, job id): a node of
    that allocation, reached by an ``srun`` step."""

    host: str
    config: HostConfig | None = None
    slurm: tuple[SlurmClient, str] | None = None

    @property
    def destination(self) -> str:
        if self.slurm is not None:
            return f"slurm job {self.slurm[1]}"
        return "this machine" if self.config is None or self.config.ssh is None else self.config.ssh

    @property
    def remote(self) -> bool:
        """Reached over SSH (the agent's zipapp goes on the connection's stdin)."""
        return self.slurm is None and self.config is not None and self.config.ssh is not None


@dataclass(frozen=True)
class HostGpus:
    """What one host said: its newest snapshot (see gpuquery.GpuQuery.snapshot), or why none."""

    host: str
    destination: str
    snapshot: dict[str, Any] | None
    error: str | None = None

    @property
    def gpus(self) -> list[dict[str, Any]]:
        return list(self.snapshot.get("gpus") or []) if self.snapshot else []


class TargetError(ValueError):
    """A host named on the command line that cannot be reached as written."""


def slurm_targets(client: SlurmClient, job_id: str) -> list[GpuTarget]:
    """Every node of Slurm job ``job_id`` (running); :class:`TargetError` saying why not."""
    try:
        info = client.job(job_id)
        if info is None or not info.running:
            state = "not in squeue (ended, or no such job)" if info is None else info.state.lower()
            raise TargetError(f"Slurm job {job_id} is {state}; its nodes can be looked at while it runs")
        nodes = client.hostnames(info.nodelist)
    except SlurmError as exc:
        raise TargetError(f"{exc.message}; {exc.fix}") from None
    return [GpuTarget(node, slurm=(client, job_id)) for node in nodes]


def targets_for(spec: ClusterSpec | None, hosts: Sequence[str] = (), python: str | None = None) -> list[GpuTarget]:
    """The hosts to look at: ``hosts`` when given (a cluster's host names, or SSH destinations,
    ``local`` for this machine), else the cluster's [hosts] and task hosts, else this machine.
    Every address of this machine becomes one target."""
    names: list[str] = list(hosts)
    if not names and spec is not None:
        names = [*spec.hosts, *(t.host for t in spec.explicit_tasks())]
    if not names:
        names = ["local"]
    out: dict[str, GpuTarget] = {}
    for name in dict.fromkeys(names):
        if spec is not None and name in spec.hosts:
            config = spec.hosts[name]
        elif name in ("local", "localhost") or is_local_host(name):
            config = HostConfig(name)
        else:
            try:
                parse_ssh_destination(name)
            except ValueError as exc:
                raise TargetError(str(exc)) from None
            config = HostConfig(name, ssh=name)
        if python is not None and config.ssh is not None:
            config = HostConfig(config.address, config.ssh, python, config.run_root, config.workdir)
        key = config.ssh if config.ssh is not None else "this machine"
        out.setdefault(key, GpuTarget("local" if config.ssh is None else name, config if config.ssh else None))
    return list(out.values())


class HostFeed:
    """One host's ``agent.pyz --gpus`` (a child here, or over ssh): keeps its newest snapshot."""

    def __init__(
        self,
        target: GpuTarget,
        ssh_config: Path | None = None,
        every_s: float = 0.0,
        connect_timeout_s: int = 10,
    ) -> None:
        self.target = target
        self._ssh_config = ssh_config
        self._every_s = every_s
        self._connect_timeout_s = connect_timeout_s
        self._proc: subprocess.Popen[bytes] | None = None
        self._snapshot: dict[str, Any] | None = None
        self._error: str | None = None
        self._lock = threading.Lock()
        self.answered = threading.Event()  # a snapshot came, or the query ended without one
        self.ended = threading.Event()
        self._reader: threading.Thread | None = None

    def argv(self) -> list[str]:
        args = ["--every", f"{self._every_s:g}"] if self._every_s > 0 else []
        config = self.target.config
        if self.target.slurm is not None:
            # The zipapp and python at the same paths on the nodes, as for the agent itself.
            client, job_id = self.target.slurm
            query = [sys.executable, str(artifact_file()), "--gpus", *args]
            return client.argv(step_argv(job_id, self.target.host, query, name=GPUS_STEP_NAME))
        if config is None or config.ssh is None:
            return [sys.executable, str(artifact_file()), "--gpus", *args]
        ssh = ssh_argv(config, self._ssh_config, connect_timeout_s=self._connect_timeout_s)
        return [*ssh, remote_python(config, GPUS_BOOTSTRAP, *args)]

    def start(self) -> None:
        remote = self.target.remote
        try:
            # Its own session (a Ctrl-C reaches this process, which ends the feeds itself), and
            # it dies with this process whatever ends it (core/run/children.py).
            self._proc = children.popen(
                self.argv(),
                stdin=subprocess.PIPE if remote else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self.target.slurm[0].env if self.target.slurm is not None else None,
            )
        except OSError as exc:
            self._finish(f"cannot run {self.argv()[0]}: {exc.strerror or exc}")
            return
        reader = threading.Thread(
            target=self._read, kwargs={"remote": remote}, name=f"gpus-{self.target.host}", daemon=True
        )
        reader.start()
        self._reader = reader  # only once started: a signal before that leaves close() none to join

    def _read(self, *, remote: bool) -> None:
        proc = self._proc
        assert proc is not None and proc.stdout is not None and proc.stderr is not None
        stderr: list[bytes] = []
        errors = proc.stderr
        drain = threading.Thread(
            target=lambda: stderr.append(_read_all(errors)), name=f"gpus-stderr-{self.target.host}", daemon=True
        )
        drain.start()
        if remote and proc.stdin is not None:
            try:
                proc.stdin.write(agent_payload())
                proc.stdin.flush()
            except OSError:
                pass  # ssh failed before reading it: its stderr says why
        for raw in proc.stdout:
            try:
                snapshot = json.loads(raw)
            except ValueError:
                continue
            if isinstance(snapshot, dict):
                with self._lock:
                    self._snapshot = snapshot
                self.answered.set()
        code = proc.wait()
        drain.join(5)
        why = None
        if not self.answered.is_set() and not self._closing:
            why = self._failure(b"".join(stderr).decode("utf-8", "replace"), code)
        self._finish(why)

    _closing = False

    def _failure(self, stderr: str, code: int | None) -> str:
        config = self.target.config
        if self.target.remote and config is not None:
            return str(explain_failure(config, stderr, code))
        last = (stderr.strip().splitlines() or [f"exit code {code}"])[-1]
        where = f"on {self.target.host} ({self.target.destination})" if self.target.slurm else "here"
        return f"the GPU query failed {where}: {last}"

    def _finish(self, error: str | None) -> None:
        with self._lock:
            if error is not None:
                self._error = error
        self.answered.set()
        self.ended.set()

    def latest(self, waited_s: float | None = None) -> HostGpus:
        """The newest snapshot, or why there is none (``waited_s``: how long it was waited for)."""
        with self._lock:
            snapshot, error = self._snapshot, self._error
        if snapshot is None and error is None:
            error = f"no answer within {waited_s:g} s" if waited_s is not None else "waiting for an answer"
        return HostGpus(self.target.host, self.target.destination, snapshot, error if snapshot is None else None)

    def close(self) -> None:
        """End the query (its whole process group) and its threads."""
        self._closing = True
        proc = self._proc
        if proc is not None and proc.poll() is None:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(proc.pid, sig)
                except OSError:
                    break
                try:
                    proc.wait(2)
                    break
                except subprocess.TimeoutExpired:
                    continue
        # Joined only if it runs: a signal in its start() (an Interrupted raised while start waits
        # for the thread) left one that cannot be joined, and close() ended in a traceback.
        if self._reader is not None and self._reader.is_alive():
            self._reader.join(5)
        if proc is not None:
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()


def _read_all(stream: IO[bytes]) -> bytes:
    try:
        return stream.read()
    except (OSError, ValueError):
        return b""


def new_feeds(
    targets: Sequence[GpuTarget], ssh_config: Path | None, *, every_s: float, timeout_s: float
) -> list[HostFeed]:
    """One feed per target, not started: the caller starts them inside the ``try`` whose
    ``finally`` closes them, so a signal that arrives while one starts ends those started."""
    # ssh's own connect timeout, when shorter than ours, says why (refused, no banner ...).
    connect_s = min(10, int(timeout_s) + 2)
    return [HostFeed(t, ssh_config, every_s, connect_timeout_s=connect_s) for t in targets]


def snapshot_all(
    targets: Sequence[GpuTarget],
    timeout_s: float = 20.0,
    ssh_config: Path | None = None,
    *,
    stop: threading.Event | None = None,
) -> list[HostGpus]:
    """One look at every target, queried at once; a host that has not answered within
    ``timeout_s`` is reported as such (the others are not held up beyond it). In target order.
    ``stop`` set (a cancelled pre-flight) ends the wait, and the queries, at once."""
    feeds = new_feeds(targets, ssh_config, every_s=0.0, timeout_s=timeout_s)
    try:
        for feed in feeds:
            feed.start()
        deadline = time.monotonic() + timeout_s
        for feed in feeds:
            while not (stop is not None and stop.is_set()) and time.monotonic() < deadline:
                if feed.answered.wait(min(0.1, max(0.0, deadline - time.monotonic()))):
                    break
        return [feed.latest(waited_s=timeout_s) for feed in feeds]
    finally:
        for feed in feeds:
            feed.close()


def wanted_gpus(spec: ClusterSpec) -> dict[str, dict[int, list[str]]]:
    """host -> GPU index -> the roles that ask for it (``gpus = [...]``), for the pre-flight."""
    out: dict[str, dict[int, list[str]]] = {}
    for task in spec.tasks():
        for index in task.gpus or ():
            out.setdefault(task.host, {}).setdefault(index, []).append(task.role_id)
    return out


def busy_gpu_warnings(wanted: dict[int, list[str]], result: HostGpus) -> list[str]:
    """What the pre-flight warns about on one host: a GPU the tasks ask for that already has
    processes on it (another user's training, a previous run left over) or that the host lacks.
    Warnings, not failures: sharing a GPU can be what the user wants."""
    if result.snapshot is None or not result.snapshot.get("nvml"):
        return []  # the probe's own NVML row says why
    gpus = {g.get("index"): g for g in result.gpus}
    warnings = []
    for index, roles in sorted(wanted.items()):
        gpu = gpus.get(index)
        for_roles = ", ".join(roles)
        if gpu is None:
            warnings.append(f"GPU {index} (for {for_roles}) does not exist there: it has {len(gpus)}")
            continue
        procs = gpu.get("processes") or []
        if procs:
            who = "; ".join(
                f"pid {p.get('pid')} {p.get('user') or '?'}"
                + (f" {p['used_memory_bytes'] / GIB:.1f} GiB" if isinstance(p.get("used_memory_bytes"), int) else "")
                + (f" (run {p.get('run')} {p['role']})" if p.get("role") else "")
                for p in procs[:4]
            )
            more = f" and {len(procs) - 4} more" if len(procs) > 4 else ""
            warnings.append(f"GPU {index} (for {for_roles}) is busy: {who}{more}")
    return warnings
