"""A cluster file's text or table -> :class:`~core.cluster.spec.model.ClusterSpec` plus every problem.

:func:`parse_text` never raises on bad input: the problems say what is wrong, on which line, and
how to fix it. Checks that need this machine (does the command exist, is the port free) live in
:mod:`core.preflight.checks`.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any

from core.cluster.notify_table import parse_notify
from core.cluster.problems import ERROR, Problem
from core.cluster.recovery_table import RecoveryConfig, parse_recovery
from core.cluster.slurm_table import parse_slurm
from core.cluster.spec.addresses import is_host_name
from core.cluster.spec.model import (
    DEFAULT_STALL_AFTER_S,
    JOB_ORDER,
    LAUNCH_STYLES,
    STRATEGIES,
    TOP_KEYS,
    ClusterSpec,
    HostConfig,
    Job,
)
from core.cluster.spec.reader import Reader, kind
from core.cluster.spec.validate import check_semantics, parse_hosts, parse_job, parse_patterns
from core.cluster.stuck_options import parse_stuck_options
from core.textsafe import terminal

_TOML_POS = re.compile(r"\(at line (\d+), column (\d+)\)")
_CONTROL_CHAR = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def parse_text(
    text: str, source: Path | None = None, *, partial: bool = False
) -> tuple[ClusterSpec | None, list[Problem]]:
    """Parse a cluster file's text; returns the spec (None when errors) and every problem found.

    ``partial``: see :func:`parse_data`."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        m = _TOML_POS.search(message)
        line = int(m.group(1)) if m else None
        message = _TOML_POS.sub("", message).strip()
        return None, [Problem("", f"not valid TOML: {message}", _toml_hint(text, line), ERROR, line)]
    except RecursionError:  # tomllib recurses per nesting level: 500 levels of [[[...]]] is not a cluster
        return None, [Problem("", "arrays or tables nested too deep", "a cluster file nests a few levels; flatten it")]
    base = source.parent if source is not None else Path.cwd()
    return parse_data(data, text, base=base, source=source, partial=partial)


def _toml_hint(text: str, line: int | None) -> str:
    hint = "check quotes, brackets and '=' on that line; strings need quotes, e.g. tasks = [\"127.0.0.1:2222\"]"
    if line is not None:
        lines = text.splitlines()
        if 0 < line <= len(lines):
            hint = f"the line reads {lines[line - 1].strip()!r}; " + hint
    return hint


def parse_data(
    data: dict[str, Any],
    text: str = "",
    *,
    base: Path | None = None,
    source: Path | None = None,
    partial: bool = False,
) -> tuple[ClusterSpec | None, list[Problem]]:
    """A cluster file's table -> the spec (None when errors) and every problem.

    ``text`` is the file it came from, for line numbers (empty: none); relative paths are resolved
    against ``base``. The editor validates its form through here, so it says what ``validate`` says.

    ``partial``: the spec is built even when there are errors, from every value that could be read
    (a bad value takes its default, a task with an error is left out), so that the checks against
    this machine (command, script, workdir, ports) run in the same pass and a user reads every
    problem at once. Such a spec is for checking only: never launch it.
    """
    r = Reader(text)
    r.unknown_keys(data, TOP_KEYS, ())
    name = r.string(data.get("name", "cluster"), ("name",)) or "cluster"
    if control := _CONTROL_CHAR.search(name):
        # The name is a label: terminals, window titles, Slurm job names and notifications show it.
        what = (
            "a NUL character (\\u0000)"
            if control.group() == "\0"
            else f"a control character ({terminal(control.group())})"
        )
        r.add(("name",), f"contains {what}", "a cluster's name is one line of printable text: remove it")
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
    stuck = parse_stuck_options(data, r)  # when the cluster counts as stuck: start_stall_after_s, success_policy

    jobs_data = data.get("jobs")
    jobs: dict[str, Job] = {}
    if jobs_data is None:
        r.add(("jobs",), "no jobs", 'add at least [jobs.worker] with tasks = ["127.0.0.1:2223"]')
    elif not isinstance(jobs_data, dict):
        r.add(("jobs",), f"must be a table of jobs, not {kind(jobs_data)}", "write [jobs.worker] sections")
    else:
        r.unknown_keys(jobs_data, JOB_ORDER, ("jobs",))
        for job_name in JOB_ORDER:
            if job_name in jobs_data:
                job = parse_job(
                    r, job_name, jobs_data[job_name], has_command=command is not None, slurm="slurm" in data
                )
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
        metric_patterns = parse_patterns(r, data["metric_patterns"])
    hosts: dict[str, HostConfig] = {}
    if "hosts" in data:
        hosts = parse_hosts(r, data["hosts"])
    ssh_config: Path | None = None
    if "ssh_config" in data:
        ssh_text = r.string(data["ssh_config"], ("ssh_config",))
        if ssh_text:
            ssh_config = Path(ssh_text).expanduser()
            if not ssh_config.is_absolute():
                ssh_config = (base or Path.cwd()) / ssh_config
    for job in jobs.values():
        for task in job.tasks:
            if not is_host_name(task.host):
                r.add(
                    ("jobs", job.name, "tasks", task.index),
                    f"host {task.host!r} cannot start with '-'",
                    "write the machine's name or address, e.g. 10.0.0.2 or gpu-node-1",
                )
    # [slurm] is checked by core.cluster.slurm_table, which reports through the same reader.
    slurm = parse_slurm(data["slurm"], r.add) if "slurm" in data else None
    notify = parse_notify(data["notify"], r) if "notify" in data else None
    recovery = parse_recovery(data["recovery"], r) if "recovery" in data else RecoveryConfig()
    check_semantics(r, jobs, strategy=strategy, style=style, command=command)
    every_task_has_one = all(t.command for j in jobs.values() for t in j.tasks) and all(
        j.command for j in jobs.values() if j.counted
    )
    if command is None and "command" not in data and not every_task_has_one:
        r.add(("command",), "no training command", 'add command = ["python", "-u", "train.py"] at the top')
    has_errors = any(p.severity == ERROR for p in r.problems)
    if has_errors and not partial:
        return None, r.problems
    if has_errors:
        jobs = _without_bad_tasks(jobs, r.problems)
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
        slurm=slurm,
        stuck=stuck,
        notify=notify,
        recovery=recovery,
    )
    return spec, r.problems


def _without_bad_tasks(jobs: dict[str, Job], problems: list[Problem]) -> dict[str, Job]:
    """The jobs less each task that an error names (its host or port may be what is wrong, and a
    check of it would only repeat the error in other words)."""
    bad = {p.field for p in problems if p.severity == ERROR}
    out: dict[str, Job] = {}
    for name, job in jobs.items():
        prefix = f"jobs.{name}.tasks"
        keep = tuple(
            t
            for t in job.tasks
            if not any(f == f"{prefix}[{t.index}]" or f.startswith(f"{prefix}[{t.index}].") for f in bad)
        )
        out[name] = replace(job, tasks=keep)
    return out


def load(path: Path, *, partial: bool = False) -> tuple[ClusterSpec | None, list[Problem]]:
    """Read and parse a cluster file; an unreadable file is a problem, not an exception.

    ``partial``: see :func:`parse_data`."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, [Problem("", f"no such file: {path}", "check the path")]
    except (OSError, UnicodeDecodeError) as exc:
        return None, [Problem("", f"cannot read {path}: {exc}", "check that it is a readable UTF-8 text file")]
    return parse_text(text, path.resolve(), partial=partial)
