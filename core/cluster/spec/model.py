"""The cluster model: jobs, tasks, GPUs, command, launch style, restart policy, hosts.

Plain frozen data with the defaults applied; :mod:`core.cluster.spec.parse` builds it from TOML and
:mod:`core.cluster.spec.write` writes it back. Nothing here touches the disk or the network: whether a
task's host is this machine (:meth:`ClusterSpec.host_config`) is :mod:`core.cluster.locality`'s answer,
read once per process and cached.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace
from pathlib import Path

from core.cluster.locality import is_local_host
from core.cluster.notify_table import NotifyConfig
from core.cluster.recovery_table import RecoveryConfig
from core.cluster.slurm_table import SlurmConfig
from core.cluster.stuck_options import KEYS as STUCK_KEYS
from core.cluster.stuck_options import StuckOptions

# Display and launch order: servers first, so workers find them listening.
JOB_ORDER = ("ps", "chief", "worker", "evaluator")
STRATEGIES = ("between_graph", "parameter_server", "multi_worker_mirrored", "custom")
LAUNCH_STYLES = ("flags", "tf_config", "both")
# Kubeflow TFJob's restart policies.
POLICIES = ("Never", "OnFailure", "Always", "ExitCode")

TOP_KEYS = {
    "name": "the cluster's name, shown in the window and in run names",
    "strategy": "how the trainers replicate: " + ", ".join(STRATEGIES),
    "launch_style": "how roles learn the cluster: " + ", ".join(LAUNCH_STYLES),
    "command": "the training command, a string or a list of arguments",
    "workdir": "the directory roles start in, relative to the cluster file",
    "env": "environment variables for every role",
    "complete_when": "the jobs whose success ends the training",
    "stop_grace_s": "seconds between SIGTERM and SIGKILL when stopping a role",
    "start_s": "seconds a role must stay up to count as running",
    "stall_after_s": "seconds without a new training step before a running role is marked stalled (0: never)",
    "metric_patterns": "regexes with named groups (step, loss, step_time_ms, ...) for other log formats",
    "jobs": "the jobs: ps, worker, chief, evaluator",
    "hosts": 'how to reach other machines: [hosts."ADDRESS"] ssh, python, run_root, workdir',
    "ssh_config": "an ssh client config file to use instead of ~/.ssh/config (relative to the cluster file)",
    "slurm": "run on Slurm: [slurm] partition, time, nodes, account, extra_args, login",
    "notify": "run your command with each notification: [notify] command, events, timeout_s",
    "recovery": "how a failed role is recovered: [recovery] mode, max_recoveries, backoff_s, checkpoint_dir",
}
TOP_KEYS.update(STUCK_KEYS)  # when it counts as stuck: start_stall_after_s, success_policy
HOST_KEYS = {
    "ssh": "the SSH destination: user@host, host:port or an alias from your ssh config",
    "python": "the python on that machine that runs the agent (default python3)",
    "run_root": "where run directories go on that machine (default ~/.local/share/towerdeck/runs)",
    "workdir": "the directory roles start in on that machine (default: the cluster's workdir)",
    "local": "true: this address is this machine, start its roles here without SSH",
}
DEFAULT_REMOTE_PYTHON = "python3"
DEFAULT_REMOTE_RUN_ROOT = "~/.local/share/towerdeck/runs"


@dataclass(frozen=True)
class HostConfig:
    """How TowerDeck reaches the machine behind a task address.

    ``ssh`` is None for this machine. ``user``/``host``/``port`` are the parts of ``ssh``; the
    rest (keys, ProxyJump, aliases) comes from the user's ssh config.
    """

    address: str
    ssh: str | None = None
    python: str = DEFAULT_REMOTE_PYTHON
    run_root: str = DEFAULT_REMOTE_RUN_ROOT
    workdir: str | None = None

    @property
    def remote(self) -> bool:
        return self.ssh is not None


JOB_KEYS = ("tasks", "gpus", "command", "env", "restart")
TASK_KEYS = ("address", "gpus", "command", "env")
# Long enough for a slow checkpoint or evaluation pass between steps, short enough that a hung
# week-long run is noticed within the hour.
DEFAULT_STALL_AFTER_S = 300.0
RESTART_KEYS = ("policy", "max_restarts", "backoff_s", "backoff_max_s", "reset_after_s")
# A role that stayed up this long before it exited starts a fresh restart budget: on a week-long
# run, a crash a day must not add up to "gave up". Ten minutes is far beyond a crash loop.
DEFAULT_RESET_AFTER_S = 600.0


@dataclass(frozen=True)
class RestartPolicy:
    """When a role that exited is started again (Kubeflow's vocabulary).

    ``Never``: never. ``OnFailure``: on a non-zero exit or a signal. ``Always``: on any exit while
    the training goes on. ``ExitCode``: only on retryable exits (killed by a signal, or code
    128-255); codes 1-127 are permanent errors. Back-off doubles from ``backoff_s`` to
    ``backoff_max_s``; after ``max_restarts`` restarts in a row the role has failed for good. A
    role that ran at least ``reset_after_s`` before it exited starts afresh: its back-off and
    budget count from zero again (0: never, every restart counts for the whole run).
    """

    policy: str = "Never"
    max_restarts: int = 3
    backoff_s: float = 1.0
    backoff_max_s: float = 30.0
    reset_after_s: float = DEFAULT_RESET_AFTER_S
    # Written in the cluster file, not a default: an explicit ``restart = "Never"`` keeps the job
    # out of the cluster's recovery too (its failure fails the run, as the user asked).
    explicit: bool = field(default=False, compare=False)

    def wants_restart(self, returncode: int | None, signal_number: int | None) -> bool:
        failed = signal_number is not None or (returncode or 0) != 0
        if self.policy == "Always":
            return True
        if self.policy == "OnFailure":
            return failed
        if self.policy == "ExitCode":
            return signal_number is not None or (returncode is not None and returncode >= 128)
        return False

    def backoff_for(self, restart_number: int) -> float:
        """Delay before restart number ``restart_number`` (1-based)."""
        delay: float = self.backoff_s * (2 ** max(0, restart_number - 1))
        return min(delay, self.backoff_max_s)


@dataclass(frozen=True)
class Task:
    """One task of a job: a TensorFlow server at ``host:port``; run as one role."""

    job: str
    index: int
    host: str
    port: int
    gpus: tuple[int, ...] | None = None
    command: tuple[str, ...] | None = None
    env: dict[str, str] = field(default_factory=dict)

    @property
    def address(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def role_id(self) -> str:
        return role_id(self.job, self.index)

    @property
    def dir_name(self) -> str:
        return role_dir_name(self.role_id)


@dataclass(frozen=True)
class Job:
    """One job (ps, chief, worker, evaluator): its tasks, in index order, and restart policy.

    A *counted* job (``tasks = 2``, only with ``[slurm]``) has ``count`` set and no tasks yet:
    its hosts come from the Slurm allocation and its ports are chosen on the nodes, by
    :func:`core.slurm.counts.place_counted`, which returns a spec with explicit tasks. Until then
    ``gpus``/``command``/``env`` hold the job-wide settings each of its tasks will get. Use
    :attr:`size` for how many tasks a job has, never ``len(tasks)``.
    """

    name: str
    tasks: tuple[Task, ...]
    restart: RestartPolicy = RestartPolicy()
    count: int | None = None
    gpus: tuple[int, ...] | None = None
    command: tuple[str, ...] | None = None
    env: dict[str, str] = field(default_factory=dict)

    @property
    def size(self) -> int:
        """How many tasks the job has: its count, else its explicit tasks."""
        return self.count if self.count is not None else len(self.tasks)

    @property
    def counted(self) -> bool:
        """True while the job's tasks are a count still to be placed on a Slurm allocation."""
        return self.count is not None

    def role_ids(self) -> list[str]:
        """The job's roles, known from the count even before hosts are."""
        return [role_id(self.name, i) for i in range(self.size)]


class UnplacedTasksError(ValueError):
    """A counted job's tasks were asked for before they were placed on the Slurm allocation."""


@dataclass(frozen=True)
class ClusterSpec:
    """A whole cluster as the user described it, with defaults applied."""

    name: str
    command: tuple[str, ...]
    jobs: dict[str, Job]
    strategy: str = "between_graph"
    launch_style: str = "flags"
    workdir: Path = Path(".")
    env: dict[str, str] = field(default_factory=dict)
    complete_when: tuple[str, ...] = ()
    stop_grace_s: float = 5.0
    start_s: float = 1.0
    metric_patterns: tuple[str, ...] = ()
    source: Path | None = None
    hosts: dict[str, HostConfig] = field(default_factory=dict)
    ssh_config: Path | None = None
    slurm: SlurmConfig | None = None  # [slurm]: one Slurm allocation holds the run (core/slurm)

    # A role that has printed a step and then prints no new one for this long is marked stalled
    # (hung collective, SIGSTOP, deadlock). 0 turns the check off.
    stall_after_s: float = DEFAULT_STALL_AFTER_S
    # When a cluster counts as stuck (core/cluster/stuck_options.py): start_stall_after_s, success_policy.
    stuck: StuckOptions = field(default_factory=StuckOptions)
    notify: NotifyConfig | None = None  # [notify]: the user's command for notifications (core/notify)
    recovery: RecoveryConfig = field(default_factory=RecoveryConfig)  # [recovery] (core/cluster/recovery_table.py)

    def host_config(self, host: str, is_local: Callable[[str], bool] = is_local_host) -> HostConfig:
        """How to reach ``host``: its [hosts] entry, else SSH to it unless ``is_local(host)``.

        Whether an address is this machine is decided by :mod:`core.cluster.locality` (once, cached), not
        here: the model holds data; pass ``is_local`` to ask about another machine's view.
        """
        if host in self.hosts:
            return self.hosts[host]
        return HostConfig(host) if is_local(host) else HostConfig(host, ssh=host)

    def counted_jobs(self) -> list[str]:
        """The jobs whose ``tasks`` is a count not placed yet (launch order); empty when none."""
        return [name for name in JOB_ORDER if name in self.jobs and self.jobs[name].counted]

    def has_counted(self) -> bool:
        """True when some job's tasks are a count that needs a Slurm allocation to get hosts."""
        return bool(self.counted_jobs())

    def tasks(self) -> list[Task]:
        """Every task, in launch order (ps, chief, worker, evaluator).

        Raises :class:`UnplacedTasksError` while a job is counted: a task has a host and a port,
        and a counted job has neither until :func:`core.slurm.counts.place_counted` chose them.
        """
        self.require_placed()
        return self.explicit_tasks()

    def require_placed(self) -> None:
        """Raise :class:`UnplacedTasksError` while a job is counted (no hosts and ports yet)."""
        if self.has_counted():
            names = self.counted_jobs()
            counted = ", ".join(f"jobs.{name}.tasks" for name in names)
            raise UnplacedTasksError(
                f"{counted} {'is a count' if len(names) == 1 else 'are counts'} of tasks, whose hosts and ports "
                "come from the Slurm allocation when the cluster is launched (core.slurm.counts.place_counted)"
            )

    def explicit_tasks(self) -> list[Task]:
        """The tasks that have a host and port already (all of them unless a job is counted)."""
        return [t for name in JOB_ORDER if name in self.jobs for t in self.jobs[name].tasks]

    def planned_tasks(self) -> list[Task]:
        """Every task in launch order, a counted job's as placeholders (host ``""``, port 0) with
        its job-wide settings: what a controller supervises before the Slurm allocation placed
        them (:meth:`tasks` refuses a counted spec)."""
        tasks: list[Task] = []
        for name in JOB_ORDER:
            job = self.jobs.get(name)
            if job is None:
                continue
            if job.counted:
                tasks += [Task(name, i, "", 0, job.gpus, job.command, dict(job.env)) for i in range(job.size)]
            else:
                tasks += job.tasks
        return tasks

    def task(self, role: str) -> Task:
        """The task of ``role`` (any spelling :func:`parse_role_id` takes); KeyError naming the roles."""
        job, index = parse_role_id(role)
        if job in self.jobs and self.jobs[job].counted and 0 <= index < self.jobs[job].size:
            raise UnplacedTasksError(f"{role} is one of jobs.{job}.tasks = {self.jobs[job].count}: it has no host yet")
        try:
            return self.jobs[job].tasks[index]
        except (KeyError, IndexError):
            raise KeyError(f"no role {role!r}; roles are {', '.join(self.role_ids())}") from None

    def role_ids(self) -> list[str]:
        """Every role, in launch order; a counted job's from its count."""
        return [r for name in JOB_ORDER if name in self.jobs for r in self.jobs[name].role_ids()]

    def completion_jobs(self) -> tuple[str, ...]:
        """The jobs whose tasks must all succeed for the training to be over."""
        if self.complete_when:
            return self.complete_when
        if self.strategy == "parameter_server":
            return ("chief",)
        return tuple(j for j in ("chief", "worker") if j in self.jobs)

    def command_for(self, task: Task) -> tuple[str, ...]:
        """The command ``task`` runs: its own, else the cluster's."""
        return task.command or self.command

    def with_workdir(self, workdir: Path) -> ClusterSpec:
        """A copy whose roles start in ``workdir``."""
        return replace(self, workdir=workdir)


def role_id(job: str, index: int) -> str:
    """``worker``, 1 -> ``worker:1``: how a role is named everywhere (events, logs, ``ctl``)."""
    return f"{job}:{index}"


def role_dir_name(role: str) -> str:
    """``worker:1`` -> ``worker-1``: a role's folder under a run directory's ``roles/``."""
    job, _, index = role.partition(":")
    return f"{job}-{index}"


def parse_role_id(text: str) -> tuple[str, int]:
    """``worker:1``, ``worker/1``, ``/job:worker/task:1`` and ``worker-1`` all name worker task 1."""
    m = re.fullmatch(r"\s*(?:/job:)?([a-z_]+)(?::|/|-|/task:)(\d+)\s*", text)
    if not m:
        raise ValueError(f"{text!r} is not a role; write it as JOB:INDEX, e.g. worker:0")
    return m.group(1), int(m.group(2))


def find_role(text: str, roles: Collection[str]) -> str | None:
    """The role of ``roles`` that ``text`` names, in any spelling :func:`parse_role_id` takes
    (``worker/1`` for ``worker:1``), so every command that names a role accepts the same ones;
    None when it names none of them."""
    if text in roles:
        return text
    try:
        name = role_id(*parse_role_id(text))
    except ValueError:
        return None
    return name if name in roles else None


def split_command(value: str | list[str]) -> tuple[str, ...]:
    """A command as a string (split as a POSIX shell would, never run by one) or a list."""
    if isinstance(value, str):
        return tuple(shlex.split(value))
    return tuple(value)
