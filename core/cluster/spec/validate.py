"""The parts of a cluster file: hosts, metric patterns, jobs and their tasks, restart policies,
and the rules that tie them together (a port used twice, a strategy without its jobs)."""

from __future__ import annotations

import ipaddress
from dataclasses import replace
from typing import Any

from core.cluster.locality import is_local_host
from core.cluster.problems import WARNING
from core.cluster.spec.addresses import PROGRAM, canonical_host, is_host_name, parse_address, parse_ssh_destination
from core.cluster.spec.locate import path_text
from core.cluster.spec.model import (
    DEFAULT_REMOTE_PYTHON,
    DEFAULT_REMOTE_RUN_ROOT,
    DEFAULT_RESET_AFTER_S,
    HOST_KEYS,
    JOB_KEYS,
    POLICIES,
    RESTART_KEYS,
    TASK_KEYS,
    HostConfig,
    Job,
    RestartPolicy,
    Task,
)
from core.cluster.spec.reader import Reader, kind

MAX_COUNTED_TASKS = 10_000  # tasks = N of one job


def parse_hosts(r: Reader, value: Any) -> dict[str, HostConfig]:
    """The ``[hosts."ADDRESS"]`` tables: how each machine is reached."""
    if not isinstance(value, dict):
        r.add(("hosts",), f"must be a table, not {kind(value)}", '[hosts."10.0.0.2"] then ssh = "me@gpu-node-1"')
        return {}
    out: dict[str, HostConfig] = {}
    for address, item in value.items():
        path: tuple[str | int, ...] = ("hosts", address)
        if not is_host_name(address):
            r.add(
                path,
                f"{address!r} is not a host name or address",
                "use the host part of the task addresses, e.g. [hosts.\"10.0.0.2\"]; no spaces, no ';', no leading '-'",
            )
            continue
        if not isinstance(item, dict):
            r.add(path, f"must be a table, not {kind(item)}", f'[hosts."{address}"] then ssh = "me@{address}"')
            continue
        r.unknown_keys(item, HOST_KEYS, path)
        ssh: str | None = None
        local = item.get("local", False)
        if not isinstance(local, bool):
            r.add((*path, "local"), f"must be true or false, not {kind(local)}", "local = true")
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
        if not PROGRAM.match(python):
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


def parse_patterns(r: Reader, value: Any) -> tuple[str, ...]:
    """``metric_patterns``: each regex compiled once here, so a bad one is named before launch."""
    # Imported here: the metric parser compiles its built-in formats on import, and most cluster
    # files have no patterns of their own.
    from core.telemetry.metrics import MetricPattern
    from core.telemetry.regex_risk import FIX as REGEX_FIX

    path: tuple[str | int, ...] = ("metric_patterns",)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        r.add(
            path,
            f"must be a list of regexes, not {kind(value)}",
            "e.g. metric_patterns = ['iter (?P<step>\\d+) loss (?P<loss>[0-9.]+)']",
        )
        return ()
    for i, regex in enumerate(value):
        try:
            MetricPattern(regex)
        except ValueError as exc:
            hint = "use TOML literal strings ('...') so backslashes stay as written"
            r.add((*path, i), str(exc), REGEX_FIX if "is refused" in str(exc) else hint)
    return tuple(value)


def parse_job(r: Reader, job_name: str, value: Any, *, has_command: bool, slurm: bool = False) -> Job | None:
    """One ``[jobs.NAME]`` table (or its ``jobs.NAME = [...]`` shorthand); None when unusable.

    With ``slurm`` (the file has a ``[slurm]`` table) ``tasks`` may be a count: a counted job.
    """
    path: tuple[str | int, ...] = ("jobs", job_name)
    if isinstance(value, list):  # jobs.worker = ["h:p", ...] shorthand
        value = {"tasks": value}
    if not isinstance(value, dict):
        r.add(path, f"must be a table, not {kind(value)}", f'write [jobs.{job_name}] then tasks = ["127.0.0.1:2222"]')
        return None
    r.unknown_keys(value, JOB_KEYS, path)
    job_gpus: tuple[int, ...] | None = () if job_name == "ps" else None
    if "gpus" in value:
        job_gpus = r.gpus(value["gpus"], (*path, "gpus"))
    job_command = r.command(value["command"], (*path, "command")) if "command" in value else None
    job_env = r.env(value.get("env", {}), (*path, "env"))
    restart = parse_restart(r, value.get("restart", {}), (*path, "restart"))
    if "restart" in value:
        restart = replace(restart, explicit=True)
    tasks_value = value.get("tasks")
    if tasks_value is None:
        r.add((*path, "tasks"), "missing", f'add tasks = ["127.0.0.1:2222"] under [jobs.{job_name}]')
        return None
    if isinstance(tasks_value, int) and not isinstance(tasks_value, bool):
        return _counted_job(
            r, job_name, tasks_value, slurm=slurm, restart=restart, gpus=job_gpus, command=job_command, env=job_env
        )
    if not isinstance(tasks_value, list) or not tasks_value:
        hint = 'e.g. tasks = ["127.0.0.1:2222"]' + (", or a count of tasks, e.g. tasks = 2" if slurm else "")
        r.add((*path, "tasks"), "must be a non-empty list of host:port", hint)
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
            r.add(tpath, f'must be "host:port", not {kind(address)}', 'e.g. "127.0.0.1:2222"')
            continue
        try:
            host, port = parse_address(address)
        except ValueError as exc:
            r.add(tpath, str(exc), 'write it as "host:port" with a port from 1 to 65535, e.g. "127.0.0.1:2222"')
            continue
        tasks.append(Task(job_name, index, host, port, gpus, command, env))
    return Job(job_name, tuple(tasks), restart)


def _counted_job(
    r: Reader,
    job_name: str,
    count: int,
    *,
    slurm: bool,
    restart: RestartPolicy,
    gpus: tuple[int, ...] | None,
    command: tuple[str, ...] | None,
    env: dict[str, str],
) -> Job | None:
    """``tasks = N``: the hosts come from a Slurm allocation, so only with ``[slurm]``."""
    path: tuple[str | int, ...] = ("jobs", job_name, "tasks")
    if not slurm:
        r.add(
            path,
            f"a count of tasks ({count}) needs a [slurm] table: without Slurm there is no allocation to take hosts from",
            'list the tasks, e.g. tasks = ["127.0.0.1:2222"], or add [slurm] (e.g. partition = "debug") to run on Slurm',
        )
        return None
    if count < 1:
        r.add(path, f"must be at least 1, not {count}", f"e.g. tasks = 2, or remove [jobs.{job_name}]")
        return None
    if count > MAX_COUNTED_TASKS:
        # Every task becomes a process, a port, a service name and a line of the cluster's address
        # lists: a count past this is a typo (or 2**63 - 1), and building it would never end.
        r.add(path, f"{count} tasks is more than the {MAX_COUNTED_TASKS} a job may count", "e.g. tasks = 64")
        return None
    return Job(job_name, (), restart, count=count, gpus=gpus, command=command, env=env)


def parse_restart(r: Reader, value: Any, path: tuple[str | int, ...]) -> RestartPolicy:
    """A job's ``restart`` table, or just its policy name."""
    if isinstance(value, str):
        value = {"policy": value}
    if not isinstance(value, dict):
        r.add(path, f"must be a table, not {kind(value)}", 'e.g. restart = { policy = "OnFailure", max_restarts = 3 }')
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


THIS_MACHINE = "<this machine>"


def on_this_machine(host: str) -> bool:
    """Whether ``host`` is this machine: a loopback address (127.x, ::1), the unspecified address
    (0.0.0.0, ::), localhost, this machine's names and interface addresses."""
    name = host.strip("[]").lower()
    try:
        if ipaddress.ip_address(name).is_unspecified:
            return True
    except ValueError:
        pass
    return is_local_host(name)


def check_semantics(
    r: Reader, jobs: dict[str, Job], *, strategy: str, style: str, command: tuple[str, ...] | None
) -> None:
    """Rules between parts: each address once (each port once on this machine), the jobs a
    strategy needs, GPUs given twice."""
    seen: dict[tuple[str, int], tuple[tuple[str | int, ...], Task]] = {}
    for job in jobs.values():
        for task in job.tasks:
            # TensorFlow's server listens on every address (0.0.0.0:PORT): two tasks of this
            # machine share a port whichever local addresses they are written with.
            here = on_this_machine(task.host)
            key = (THIS_MACHINE if here else canonical_host(task.host), task.port)
            path: tuple[str | int, ...] = ("jobs", job.name, "tasks", task.index)
            if key not in seen:
                seen[key] = (path, task)
                continue
            other_path, other = seen[key]
            if canonical_host(other.host) == canonical_host(task.host):
                r.add(
                    path, f"{task.address} is used twice (also {path_text(other_path)})", "give every task its own port"
                )
            else:
                r.add(
                    path,
                    f"{task.role_id} ({task.address}) and {other.role_id} ({other.address}, {path_text(other_path)}) "
                    f"are both port {task.port} of this machine: TensorFlow listens on every address "
                    f"(0.0.0.0:{task.port}), so the second could not start its server",
                    "give every task on this machine its own port",
                )
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
                severity=WARNING,
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
            severity=WARNING,
        )
    by_host: dict[tuple[str, int], str] = {}
    for job in jobs.values():
        for task in job.tasks:
            for gpu in task.gpus or ():
                key = (canonical_host(task.host), gpu)
                if key in by_host:
                    r.add(
                        ("jobs", job.name, "tasks", task.index),
                        f"GPU {gpu} on {task.host} is also given to {by_host[key]}",
                        "give each task its own GPUs unless they are meant to share",
                        severity=WARNING,
                    )
                else:
                    by_host[key] = task.role_id
