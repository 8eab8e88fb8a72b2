"""The cluster model: jobs, tasks, GPUs, command, launch style and restart policy.

A cluster file is TOML (see the README for the schema). :func:`parse_text` turns one into a
:class:`ClusterSpec` and a list of :class:`~core.problems.Problem`; it never raises on bad input.
Checks that need this machine (does the command exist, is the port free) live in ``core.checks``.
"""

from __future__ import annotations

import difflib
import re
import shlex
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from core.problems import ERROR, WARNING, Problem
from core.stuck_options import KEYS as STUCK_KEYS
from core.stuck_options import StuckOptions, parse_stuck_options, stuck_options_to_data

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
}
TOP_KEYS.update(STUCK_KEYS)  # diagnosis (issue 13): start_stall_after_s, success_policy
HOST_KEYS = {
    "ssh": "the SSH destination: user@host, host:port or an alias from your ssh config",
    "python": "the python on that machine that runs the agent (default python3)",
    "run_root": "where run directories go on that machine (default ~/.local/share/towerdeck/runs)",
    "workdir": "the directory roles start in on that machine (default: the cluster's workdir)",
    "local": "true: this address is this machine, start its roles here without SSH",
}
DEFAULT_REMOTE_PYTHON = "python3"
DEFAULT_REMOTE_RUN_ROOT = "~/.local/share/towerdeck/runs"
# Names that reach ssh's command line or a remote shell: no leading '-' (it would be read as an
# option, e.g. -oProxyCommand=...), no shell metacharacters, no whitespace.
_HOST_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
_SSH_DESTINATION = re.compile(
    r"^(?:(?P<user>[A-Za-z0-9_][A-Za-z0-9_.-]*)@)?(?P<host>[A-Za-z0-9_][A-Za-z0-9_.-]*|\[[0-9A-Fa-f:.]+\])(?::(?P<port>\d{1,5}))?$"
)
_PROGRAM = re.compile(r"^[A-Za-z0-9_./~+][A-Za-z0-9_./~+-]*$")


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


def parse_ssh_destination(text: str) -> tuple[str | None, str, int | None]:
    """``user@host:port`` -> (user, host, port); raises ValueError naming what is wrong."""
    m = _SSH_DESTINATION.match(text)
    if not m:
        raise ValueError(
            f"{text!r} is not an SSH destination (user@host, host:port or an ssh config alias; "
            "letters, digits, '.', '_' and '-', not starting with '-')"
        )
    port = int(m.group("port")) if m.group("port") else None
    if port is not None and not 1 <= port <= 65535:
        raise ValueError(f"port {port} in {text!r} is out of range 1-65535")
    return m.group("user"), m.group("host").strip("[]"), port


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
        return f"{self.job}-{self.index}"


@dataclass(frozen=True)
class Job:
    name: str
    tasks: tuple[Task, ...]
    restart: RestartPolicy = RestartPolicy()


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

    def host_config(self, host: str) -> HostConfig:
        """How to reach ``host``: its [hosts] entry, else SSH to it when it is not this machine."""
        if host in self.hosts:
            return self.hosts[host]
        from core.checks import is_local_host

        return HostConfig(host) if is_local_host(host) else HostConfig(host, ssh=host)

    # A role that has printed a step and then prints no new one for this long is marked stalled
    # (hung collective, SIGSTOP, deadlock). 0 turns the check off.
    stall_after_s: float = DEFAULT_STALL_AFTER_S
    # Diagnosis of stuck clusters (issue 13): start_stall_after_s, success_policy.
    stuck: StuckOptions = field(default_factory=StuckOptions)

    def tasks(self) -> list[Task]:
        """Every task, in launch order (ps, chief, worker, evaluator)."""
        return [t for name in JOB_ORDER if name in self.jobs for t in self.jobs[name].tasks]

    def task(self, role: str) -> Task:
        job, index = parse_role_id(role)
        try:
            return self.jobs[job].tasks[index]
        except (KeyError, IndexError):
            raise KeyError(f"no role {role!r}; roles are {', '.join(self.role_ids())}") from None

    def role_ids(self) -> list[str]:
        return [t.role_id for t in self.tasks()]

    def completion_jobs(self) -> tuple[str, ...]:
        """The jobs whose tasks must all succeed for the training to be over."""
        if self.complete_when:
            return self.complete_when
        if self.strategy == "parameter_server":
            return ("chief",)
        return tuple(j for j in ("chief", "worker") if j in self.jobs)

    def command_for(self, task: Task) -> tuple[str, ...]:
        return task.command or self.command

    def with_workdir(self, workdir: Path) -> ClusterSpec:
        return replace(self, workdir=workdir)


def role_id(job: str, index: int) -> str:
    return f"{job}:{index}"


def parse_role_id(text: str) -> tuple[str, int]:
    """``worker:1``, ``worker/1``, ``/job:worker/task:1`` and ``worker-1`` all name worker task 1."""
    m = re.fullmatch(r"\s*(?:/job:)?([a-z_]+)(?::|/|-|/task:)(\d+)\s*", text)
    if not m:
        raise ValueError(f"{text!r} is not a role; write it as JOB:INDEX, e.g. worker:0")
    return m.group(1), int(m.group(2))


_ADDRESS = re.compile(r"^(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<host>[A-Za-z0-9_.-]+)):(?P<port>[^:]+)$")


def parse_address(text: str) -> tuple[str, int]:
    """Split ``host:port``; raises ValueError with a message a user can act on."""
    m = _ADDRESS.match(text.strip())
    if not m:
        raise ValueError(f"{text!r} is not host:port")
    host = m.group("v6") or m.group("host")
    port_text = m.group("port")
    if not port_text.isdigit():
        raise ValueError(f"port {port_text!r} in {text!r} is not a number")
    port = int(port_text)
    if not 1 <= port <= 65535:
        raise ValueError(f"port {port} in {text!r} is out of range 1-65535")
    return host, port


def split_command(value: str | list[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(shlex.split(value))
    return tuple(value)


# --------------------------------------------------------------------------------------------
# Locating a key path in the TOML text, so problems can name a line.


def _header_of(line: str) -> tuple[str, ...] | None:
    m = re.match(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$", line)
    if not m:
        return None
    # Quoted keys may hold dots ([hosts."10.0.0.2"]): split on the dots between keys only.
    parts = re.findall(r"\"[^\"]*\"|'[^']*'|[^.\s]+", m.group(1))
    return tuple(part.strip().strip("\"'") for part in parts)


def locate(text: str, path: tuple[str | int, ...]) -> int | None:
    """Best-effort 1-based line of ``path`` (e.g. ``("jobs", "worker", "tasks", 1)``) in ``text``."""
    keys = [p for p in path if isinstance(p, str)]
    index = next((p for p in path if isinstance(p, int)), None)
    lines = text.splitlines()
    sections: list[tuple[tuple[str, ...], int, int]] = []  # header, first line, end line
    current: tuple[str, ...] = ()
    start = 0
    for i, line in enumerate(lines):
        header = _header_of(line)
        if header is not None:
            sections.append((current, start, i))
            current, start = header, i
    sections.append((current, start, len(lines)))
    for split in range(len(keys), -1, -1):
        head, rest = tuple(keys[:split]), keys[split:]
        for header, first, end in sections:
            if header != head:
                continue
            if not rest:
                return first + 1 if head else None
            pattern = re.compile(r"^\s*[\"']?" + re.escape(rest[0]) + r"[\"']?\s*(=|\.)")
            for j in range(first, end):
                if pattern.match(lines[j]):
                    return _element_line(lines, j, index) if index is not None else j + 1
    return None


def _element_line(lines: list[str], key_line: int, index: int) -> int:
    """The line of element ``index`` of a multi-line array starting at ``key_line``."""
    count = -1
    for j in range(key_line, min(len(lines), key_line + 200)):
        body = lines[j] if j > key_line else lines[j].split("=", 1)[-1]
        body = body.split("#", 1)[0].strip().lstrip("[").strip()
        if j > key_line and (body.startswith("]") or _header_of(lines[j])):
            break
        if body and not body.startswith("]"):
            count += 1 if j > key_line else 0
            if j > key_line and count == index:
                return j + 1
    return key_line + 1


# --------------------------------------------------------------------------------------------
# Parsing


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.problems: list[Problem] = []

    def add(self, path: tuple[str | int, ...], message: str, hint: str = "", severity: str = ERROR) -> None:
        self.problems.append(Problem(_path_text(path), message, hint, severity, locate(self.text, path)))

    def unknown_keys(self, table: dict[str, Any], allowed: Any, path: tuple[str | int, ...]) -> None:
        for key in table:
            if key not in allowed:
                close = difflib.get_close_matches(key, list(allowed), n=1)
                hint = f"did you mean {close[0]!r}?" if close else "allowed keys: " + ", ".join(allowed)
                self.add((*path, key), f"unknown key {key!r}", hint)

    def string(self, value: Any, path: tuple[str | int, ...], choices: tuple[str, ...] = ()) -> str | None:
        if not isinstance(value, str):
            self.add(
                path,
                f"must be a string, not {_kind(value)}",
                f'write it in quotes, e.g. "{choices[0] if choices else "..."}"',
            )
            return None
        if choices and value not in choices:
            close = difflib.get_close_matches(value, choices, n=1) or [c for c in choices if c.lower() == value.lower()]
            hint = f"did you mean {close[0]!r}? " if close else ""
            self.add(
                path, f"{value!r} is not one of {', '.join(choices)}", hint + "choose one of " + ", ".join(choices)
            )
            return None
        return value

    def number(self, value: Any, path: tuple[str | int, ...], minimum: float, integer: bool = False) -> float | None:
        ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
        if isinstance(value, bool) or not ok_type:
            self.add(
                path,
                f"must be {'an integer' if integer else 'a number'}, not {_kind(value)}",
                f"e.g. {path[-1]} = {int(minimum) if integer else minimum}",
            )
            return None
        if value < minimum:
            self.add(path, f"must be at least {minimum}, not {value}", f"use a value >= {minimum}")
            return None
        return float(value)

    def env(self, value: Any, path: tuple[str | int, ...]) -> dict[str, str]:
        if not isinstance(value, dict):
            self.add(
                path,
                f'must be a table of NAME = "value", not {_kind(value)}',
                'e.g. env = { TF_CPP_MIN_LOG_LEVEL = "1" }',
            )
            return {}
        out: dict[str, str] = {}
        for key, item in value.items():
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
                self.add(
                    (*path, key),
                    f"{key!r} is not a valid environment variable name",
                    "use letters, digits and _; not starting with a digit",
                )
            elif isinstance(item, bool) or not isinstance(item, (str, int, float)):
                self.add((*path, key), f"must be a string, not {_kind(item)}", f'e.g. {key} = "1"')
            else:
                out[key] = str(item)
        return out

    def command(self, value: Any, path: tuple[str | int, ...]) -> tuple[str, ...] | None:
        if isinstance(value, str):
            try:
                parts = split_command(value)
            except ValueError as exc:
                self.add(path, f"cannot split the command: {exc}", "check the quotes, or give a list of arguments")
                return None
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            parts = tuple(value)
        else:
            self.add(
                path,
                f"must be a string or a list of strings, not {_kind(value)}",
                'e.g. command = ["python", "-u", "train.py"]',
            )
            return None
        if not parts or not parts[0]:
            self.add(path, "is empty", 'e.g. command = ["python", "-u", "train.py"]')
            return None
        return parts

    def gpus(self, value: Any, path: tuple[str | int, ...]) -> tuple[int, ...] | None:
        if (
            isinstance(value, bool)
            or not isinstance(value, list)
            or not all(isinstance(g, int) and not isinstance(g, bool) for g in value)
        ):
            self.add(
                path, f"must be a list of GPU indices, not {_kind(value)}", "e.g. gpus = [0, 1], or gpus = [] for none"
            )
            return None
        if any(g < 0 for g in value):
            self.add(path, "GPU indices cannot be negative", "use indices as nvidia-smi shows them: 0, 1, ...")
            return None
        if len(set(value)) != len(value):
            self.add(path, "lists a GPU twice", "list each GPU once")
            return None
        return tuple(value)


def _kind(value: Any) -> str:
    return {
        bool: "true/false",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "a table",
    }.get(type(value), type(value).__name__)


def _path_text(path: tuple[str | int, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


_TOML_POS = re.compile(r"\(at line (\d+), column (\d+)\)")


def parse_text(text: str, source: Path | None = None) -> tuple[ClusterSpec | None, list[Problem]]:
    """Parse a cluster file's text; returns the spec (None when errors) and every problem found."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        m = _TOML_POS.search(message)
        line = int(m.group(1)) if m else None
        message = _TOML_POS.sub("", message).strip()
        return None, [Problem("", f"not valid TOML: {message}", _toml_hint(text, line), ERROR, line)]
    base = source.parent if source is not None else Path.cwd()
    return parse_data(data, text, base, source)


def _toml_hint(text: str, line: int | None) -> str:
    hint = "check quotes, brackets and '=' on that line; strings need quotes, e.g. tasks = [\"127.0.0.1:2222\"]"
    if line is not None:
        lines = text.splitlines()
        if 0 < line <= len(lines):
            hint = f"the line reads {lines[line - 1].strip()!r}; " + hint
    return hint


def parse_data(
    data: dict[str, Any], text: str = "", base: Path | None = None, source: Path | None = None
) -> tuple[ClusterSpec | None, list[Problem]]:
    r = _Reader(text)
    r.unknown_keys(data, TOP_KEYS, ())
    name = r.string(data.get("name", "cluster"), ("name",)) or "cluster"
    strategy = r.string(data.get("strategy", "between_graph"), ("strategy",), STRATEGIES) or "between_graph"
    style = r.string(data.get("launch_style", "flags"), ("launch_style",), LAUNCH_STYLES) or "flags"
    command: tuple[str, ...] | None = None
    if "command" in data:
        command = r.command(data["command"], ("command",))
    env = r.env(data.get("env", {}), ("env",))
    workdir_text = r.string(data.get("workdir", "."), ("workdir",)) or "."
    workdir = Path(workdir_text).expanduser()
    if not workdir.is_absolute():
        workdir = (base or Path.cwd()) / workdir
    grace = r.number(data.get("stop_grace_s", 5.0), ("stop_grace_s",), 0.0)
    start_s = r.number(data.get("start_s", 1.0), ("start_s",), 0.0)
    stall_after_s = r.number(data.get("stall_after_s", DEFAULT_STALL_AFTER_S), ("stall_after_s",), 0.0)
    stuck = parse_stuck_options(data, r)  # diagnosis (issue 13)

    jobs_data = data.get("jobs")
    jobs: dict[str, Job] = {}
    if jobs_data is None:
        r.add(("jobs",), "no jobs", 'add at least [jobs.worker] with tasks = ["127.0.0.1:2223"]')
    elif not isinstance(jobs_data, dict):
        r.add(("jobs",), f"must be a table of jobs, not {_kind(jobs_data)}", "write [jobs.worker] sections")
    else:
        r.unknown_keys(jobs_data, JOB_ORDER, ("jobs",))
        for job_name in JOB_ORDER:
            if job_name in jobs_data:
                job = _parse_job(r, job_name, jobs_data[job_name], command is not None)
                if job is not None:
                    jobs[job_name] = job
        if "worker" not in jobs_data:
            r.add(("jobs",), "there is no worker job", 'add [jobs.worker] with tasks = ["127.0.0.1:2223"]')

    complete_when: tuple[str, ...] = ()
    if "complete_when" in data:
        value = data["complete_when"]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value) or not value:
            r.add(("complete_when",), "must be a non-empty list of job names", 'e.g. complete_when = ["chief"]')
        else:
            for i, job_name in enumerate(value):
                if job_name not in JOB_ORDER:
                    r.add(("complete_when", i), f"{job_name!r} is not a job", "use ps, chief, worker or evaluator")
                elif isinstance(jobs_data, dict) and job_name not in jobs_data:
                    r.add(
                        ("complete_when", i),
                        f"there is no {job_name} job to wait for",
                        f"add [jobs.{job_name}] or remove it here",
                    )
            complete_when = tuple(value)

    metric_patterns: tuple[str, ...] = ()
    if "metric_patterns" in data:
        metric_patterns = _parse_patterns(r, data["metric_patterns"])
    hosts: dict[str, HostConfig] = {}
    if "hosts" in data:
        hosts = _parse_hosts(r, data["hosts"])
    ssh_config: Path | None = None
    if "ssh_config" in data:
        ssh_text = r.string(data["ssh_config"], ("ssh_config",))
        if ssh_text:
            ssh_config = Path(ssh_text).expanduser()
            if not ssh_config.is_absolute():
                ssh_config = (base or Path.cwd()) / ssh_config
    for job in jobs.values():
        for task in job.tasks:
            if not _HOST_NAME.match(task.host) and not re.fullmatch(r"[0-9A-Fa-f:.]+", task.host):
                r.add(
                    ("jobs", job.name, "tasks", task.index),
                    f"host {task.host!r} cannot start with '-'",
                    "write the machine's name or address, e.g. 10.0.0.2 or gpu-node-1",
                )
    _check_semantics(r, jobs, strategy, style, command)
    if command is None and "command" not in data and not all(t.command for j in jobs.values() for t in j.tasks):
        r.add(("command",), "no training command", 'add command = ["python", "-u", "train.py"] at the top')
    if any(p.severity == ERROR for p in r.problems):
        return None, r.problems
    spec = ClusterSpec(
        name=name,
        command=command or (),
        jobs=jobs,
        strategy=strategy,
        launch_style=style,
        workdir=workdir,
        env=env,
        complete_when=complete_when,
        stop_grace_s=grace if grace is not None else 5.0,
        start_s=start_s if start_s is not None else 1.0,
        metric_patterns=metric_patterns,
        source=source,
        hosts=hosts,
        ssh_config=ssh_config,
        stall_after_s=stall_after_s if stall_after_s is not None else DEFAULT_STALL_AFTER_S,
        stuck=stuck,
    )
    return spec, r.problems


def _parse_hosts(r: _Reader, value: Any) -> dict[str, HostConfig]:
    if not isinstance(value, dict):
        r.add(("hosts",), f"must be a table, not {_kind(value)}", '[hosts."10.0.0.2"] then ssh = "me@gpu-node-1"')
        return {}
    out: dict[str, HostConfig] = {}
    for address, item in value.items():
        path: tuple[str | int, ...] = ("hosts", address)
        if not _HOST_NAME.match(address) and not re.fullmatch(r"[0-9A-Fa-f:.]+", address):
            r.add(
                path,
                f"{address!r} is not a host name or address",
                "use the host part of the task addresses, e.g. [hosts.\"10.0.0.2\"]; no spaces, no ';', no leading '-'",
            )
            continue
        if not isinstance(item, dict):
            r.add(path, f"must be a table, not {_kind(item)}", f'[hosts."{address}"] then ssh = "me@{address}"')
            continue
        r.unknown_keys(item, HOST_KEYS, path)
        ssh: str | None = None
        local = item.get("local", False)
        if not isinstance(local, bool):
            r.add((*path, "local"), f"must be true or false, not {_kind(local)}", "local = true")
            local = False
        if "ssh" in item:
            ssh = r.string(item["ssh"], (*path, "ssh"))
            if ssh is not None:
                try:
                    parse_ssh_destination(ssh)
                except ValueError as exc:
                    r.add((*path, "ssh"), str(exc), 'e.g. ssh = "me@gpu-node-1", "gpu-node-1:2200" or an alias')
                    ssh = None
        elif not local:
            ssh = address
        if local and "ssh" in item:
            r.add((*path, "local"), "a host is either local or reached by ssh, not both", "remove one of the two")
        python = r.string(item.get("python", DEFAULT_REMOTE_PYTHON), (*path, "python")) or DEFAULT_REMOTE_PYTHON
        if not _PROGRAM.match(python):
            r.add(
                (*path, "python"),
                f"{python!r} is not a program name or path",
                'e.g. python = "python3" or "/opt/conda/bin/python"',
            )
        run_root = r.string(item.get("run_root", DEFAULT_REMOTE_RUN_ROOT), (*path, "run_root"))
        workdir = r.string(item["workdir"], (*path, "workdir")) if "workdir" in item else None
        for key, text_value in (("run_root", run_root), ("workdir", workdir)):
            if text_value is not None and any(c in text_value for c in "\0\n\r"):
                r.add((*path, key), "contains a newline or NUL", "write the path on one line")
        out[address] = HostConfig(address, None if local else ssh, python, run_root or DEFAULT_REMOTE_RUN_ROOT, workdir)
    return out


def _parse_patterns(r: _Reader, value: Any) -> tuple[str, ...]:
    from core.telemetry.metrics import MetricPattern

    path: tuple[str | int, ...] = ("metric_patterns",)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        r.add(
            path,
            f"must be a list of regexes, not {_kind(value)}",
            "e.g. metric_patterns = ['iter (?P<step>\\d+) loss (?P<loss>[0-9.]+)']",
        )
        return ()
    for i, regex in enumerate(value):
        try:
            MetricPattern(regex)
        except ValueError as exc:
            r.add((*path, i), str(exc), "use TOML literal strings ('...') so backslashes stay as written")
    return tuple(value)


def _parse_job(r: _Reader, job_name: str, value: Any, has_command: bool) -> Job | None:
    path: tuple[str | int, ...] = ("jobs", job_name)
    if isinstance(value, list):  # jobs.worker = ["h:p", ...] shorthand
        value = {"tasks": value}
    if not isinstance(value, dict):
        r.add(path, f"must be a table, not {_kind(value)}", f'write [jobs.{job_name}] then tasks = ["127.0.0.1:2222"]')
        return None
    r.unknown_keys(value, JOB_KEYS, path)
    job_gpus: tuple[int, ...] | None = () if job_name == "ps" else None
    if "gpus" in value:
        job_gpus = r.gpus(value["gpus"], (*path, "gpus"))
    job_command = r.command(value["command"], (*path, "command")) if "command" in value else None
    job_env = r.env(value.get("env", {}), (*path, "env"))
    restart = _parse_restart(r, value.get("restart", {}), (*path, "restart"))
    tasks_value = value.get("tasks")
    if tasks_value is None:
        r.add((*path, "tasks"), "missing", f'add tasks = ["127.0.0.1:2222"] under [jobs.{job_name}]')
        return None
    if not isinstance(tasks_value, list) or not tasks_value:
        r.add((*path, "tasks"), "must be a non-empty list of host:port", 'e.g. tasks = ["127.0.0.1:2222"]')
        return None
    tasks: list[Task] = []
    for index, item in enumerate(tasks_value):
        tpath = (*path, "tasks", index)
        gpus, command, env = job_gpus, job_command, dict(job_env)
        if isinstance(item, dict):
            r.unknown_keys(item, TASK_KEYS, tpath)
            address = item.get("address")
            if address is None:
                r.add(tpath, "has no address", 'e.g. { address = "127.0.0.1:2223", gpus = [0] }')
                continue
            if "gpus" in item:
                gpus = r.gpus(item["gpus"], (*tpath, "gpus"))
            if "command" in item:
                command = r.command(item["command"], (*tpath, "command"))
            env.update(r.env(item.get("env", {}), (*tpath, "env")))
        else:
            address = item
        if not isinstance(address, str):
            r.add(tpath, f'must be "host:port", not {_kind(address)}', 'e.g. "127.0.0.1:2222"')
            continue
        try:
            host, port = parse_address(address)
        except ValueError as exc:
            r.add(tpath, str(exc), 'write it as "host:port" with a port from 1 to 65535, e.g. "127.0.0.1:2222"')
            continue
        tasks.append(Task(job_name, index, host, port, gpus, command, env))
    return Job(job_name, tuple(tasks), restart)


def _parse_restart(r: _Reader, value: Any, path: tuple[str | int, ...]) -> RestartPolicy:
    if isinstance(value, str):
        value = {"policy": value}
    if not isinstance(value, dict):
        r.add(path, f"must be a table, not {_kind(value)}", 'e.g. restart = { policy = "OnFailure", max_restarts = 3 }')
        return RestartPolicy()
    r.unknown_keys(value, RESTART_KEYS, path)
    policy = r.string(value.get("policy", "Never"), (*path, "policy"), POLICIES) or "Never"
    max_restarts = r.number(value.get("max_restarts", 3), (*path, "max_restarts"), 0, integer=True)
    backoff = r.number(value.get("backoff_s", 1.0), (*path, "backoff_s"), 0.0)
    backoff_max = r.number(value.get("backoff_max_s", 30.0), (*path, "backoff_max_s"), 0.0)
    reset_after = r.number(value.get("reset_after_s", DEFAULT_RESET_AFTER_S), (*path, "reset_after_s"), 0.0)
    return RestartPolicy(
        policy,
        int(max_restarts) if max_restarts is not None else 3,
        backoff if backoff is not None else 1.0,
        max(backoff_max if backoff_max is not None else 30.0, backoff or 0.0),
        reset_after if reset_after is not None else DEFAULT_RESET_AFTER_S,
    )


def _check_semantics(
    r: _Reader, jobs: dict[str, Job], strategy: str, style: str, command: tuple[str, ...] | None
) -> None:
    seen: dict[tuple[str, int], tuple[str | int, ...]] = {}
    for job in jobs.values():
        for task in job.tasks:
            key = (_canonical_host(task.host), task.port)
            path: tuple[str | int, ...] = ("jobs", job.name, "tasks", task.index)
            if key in seen:
                r.add(
                    path, f"{task.address} is used twice (also {_path_text(seen[key])})", "give every task its own port"
                )
            else:
                seen[key] = path
    if strategy == "parameter_server":
        if "chief" not in jobs:
            r.add(
                ("jobs",),
                "strategy parameter_server needs a chief job (it runs the ClusterCoordinator)",
                'add [jobs.chief] with tasks = ["127.0.0.1:2221"]',
            )
        if "ps" not in jobs:
            r.add(
                ("jobs",), "strategy parameter_server needs a ps job", 'add [jobs.ps] with tasks = ["127.0.0.1:2222"]'
            )
        if style == "flags":
            r.add(
                ("launch_style",),
                "ParameterServerStrategy reads the cluster from TF_CONFIG, which launch_style 'flags' does not set",
                'use launch_style = "tf_config" (or "both")',
                WARNING,
            )
    if strategy == "between_graph" and "ps" not in jobs and jobs:
        r.add(
            ("jobs",),
            "between-graph replication keeps its variables on ps tasks, and there is no ps job",
            'add [jobs.ps] with tasks = ["127.0.0.1:2222"]',
        )
    if strategy == "multi_worker_mirrored" and "ps" in jobs:
        r.add(
            ("jobs", "ps"),
            "MultiWorkerMirroredStrategy uses all-reduce and no parameter servers",
            'remove [jobs.ps], or use strategy = "parameter_server"',
            WARNING,
        )
    by_host: dict[tuple[str, int], str] = {}
    for job in jobs.values():
        for task in job.tasks:
            for gpu in task.gpus or ():
                key = (_canonical_host(task.host), gpu)
                if key in by_host:
                    r.add(
                        ("jobs", job.name, "tasks", task.index),
                        f"GPU {gpu} on {task.host} is also given to {by_host[key]}",
                        "give each task its own GPUs unless they are meant to share",
                        WARNING,
                    )
                else:
                    by_host[key] = task.role_id


def _canonical_host(host: str) -> str:
    host = host.lower()
    return "127.0.0.1" if host in ("localhost", "localhost.localdomain") else host


def load(path: Path) -> tuple[ClusterSpec | None, list[Problem]]:
    """Read and parse a cluster file; an unreadable file is a problem, not an exception."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, [Problem("", f"no such file: {path}", "check the path")]
    except (OSError, UnicodeDecodeError) as exc:
        return None, [Problem("", f"cannot read {path}: {exc}", "check that it is a readable UTF-8 text file")]
    return parse_text(text, path.resolve())


# --------------------------------------------------------------------------------------------
# Writing


def to_data(spec: ClusterSpec, relative_to: Path | None = None) -> dict[str, Any]:
    """A TOML-ready dict that parses back to an equal spec."""
    workdir: str = str(spec.workdir)
    if relative_to is not None:
        try:
            workdir = str(spec.workdir.resolve().relative_to(relative_to.resolve())) or "."
        except ValueError:
            workdir = str(spec.workdir.resolve())
    data: dict[str, Any] = {
        "name": spec.name,
        "strategy": spec.strategy,
        "launch_style": spec.launch_style,
    }
    if spec.command:
        data["command"] = list(spec.command)
    data["workdir"] = workdir
    if spec.complete_when:
        data["complete_when"] = list(spec.complete_when)
    data["stop_grace_s"] = spec.stop_grace_s
    data["start_s"] = spec.start_s
    if spec.stall_after_s != DEFAULT_STALL_AFTER_S:
        data["stall_after_s"] = spec.stall_after_s
    data.update(stuck_options_to_data(spec.stuck))  # diagnosis (issue 13)
    if spec.metric_patterns:
        data["metric_patterns"] = list(spec.metric_patterns)
    if spec.env:
        data["env"] = dict(spec.env)
    jobs: dict[str, Any] = {}
    for name in JOB_ORDER:
        if name not in spec.jobs:
            continue
        job = spec.jobs[name]
        tasks: list[Any] = []
        for task in job.tasks:
            default_gpus = () if name == "ps" else None
            extra: dict[str, Any] = {}
            if task.gpus != default_gpus:
                extra["gpus"] = list(task.gpus) if task.gpus is not None else None
            if task.command and task.command != spec.command:
                extra["command"] = list(task.command)
            if task.env:
                extra["env"] = dict(task.env)
            extra = {k: v for k, v in extra.items() if v is not None}
            tasks.append({"address": task.address, **extra} if extra else task.address)
        job_data: dict[str, Any] = {"tasks": tasks}
        if job.restart != RestartPolicy():
            job_data["restart"] = {
                "policy": job.restart.policy,
                "max_restarts": job.restart.max_restarts,
                "backoff_s": job.restart.backoff_s,
                "backoff_max_s": job.restart.backoff_max_s,
            }
            if job.restart.reset_after_s != DEFAULT_RESET_AFTER_S:
                job_data["restart"]["reset_after_s"] = job.restart.reset_after_s
        jobs[name] = job_data
    data["jobs"] = jobs
    if spec.ssh_config is not None:
        data["ssh_config"] = str(spec.ssh_config)
    if spec.hosts:
        hosts: dict[str, Any] = {}
        for address, host in spec.hosts.items():
            entry: dict[str, Any] = {"ssh": host.ssh} if host.ssh else {"local": True}
            entry["python"] = host.python
            entry["run_root"] = host.run_root
            if host.workdir is not None:
                entry["workdir"] = host.workdir
            hosts[address] = entry
        data["hosts"] = hosts
    return data


def dumps(spec: ClusterSpec, relative_to: Path | None = None) -> str:
    import tomli_w

    return tomli_w.dumps(to_data(spec, relative_to), multiline_strings=False)
