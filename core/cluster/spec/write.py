"""Writing a cluster file: TOML a person can read, that parses back to an equal cluster.

One writer for everything TowerDeck saves (the editor's Save, ``import``, a run directory's
``cluster.toml``): short arrays on one line, tasks one a line, small tables inline, settings
first, then ``[env]``, then one section per job in launch order, then ``[hosts."ADDRESS"]``; so a
saved file reads like resources/demo_cluster.toml, which people write by hand. A general TOML
writer (``tomli_w``) puts every array item on its own line: ``gpus = [0, 1]`` takes four lines and
a task with GPUs becomes a broken-up inline table. Only the types TOML has for plain data are
written (str, int, float, bool, list, dict); keys the model does not know (an editor's table with
a typo in it) are written as they are, so nothing the user typed is lost.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.atomic import replace_file
from core.cluster.notify_table import notify_to_data
from core.cluster.recovery_table import recovery_to_data
from core.cluster.slurm_table import slurm_to_data
from core.cluster.spec.model import DEFAULT_RESET_AFTER_S, DEFAULT_STALL_AFTER_S, JOB_ORDER, ClusterSpec, RestartPolicy
from core.cluster.stuck_options import stuck_options_to_data


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
    data.update(stuck_options_to_data(spec.stuck))  # when the cluster counts as stuck, where not the default
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
        if job.count is not None:  # counted (with [slurm]): the settings its tasks will get are the job's
            job_data = {"tasks": job.count}
            if job.gpus != (() if name == "ps" else None) and job.gpus is not None:
                job_data["gpus"] = list(job.gpus)
            if job.command and job.command != spec.command:
                job_data["command"] = list(job.command)
            if job.env:
                job_data["env"] = dict(job.env)
        if job.restart != RestartPolicy() or job.restart.explicit:
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
    if spec.slurm is not None:
        data["slurm"] = slurm_to_data(spec.slurm)
    if spec.notify is not None:
        data["notify"] = notify_to_data(spec.notify)
    if recovery := recovery_to_data(spec.recovery):
        data["recovery"] = recovery
    return data


def dumps(spec: ClusterSpec, relative_to: Path | None = None) -> str:
    """``spec`` as a cluster file's text; ``workdir`` relative to ``relative_to`` when inside it."""
    return toml_text(to_data(spec, relative_to))


def toml_text(data: dict[str, Any]) -> str:
    """A cluster file's table (known keys or not) as TOML laid out like the bundled cluster files:
    settings first, then ``[env]``, then one section per job in launch order (unknown jobs stay,
    last), then the other tables (``[hosts."ADDRESS"]``, unknown ones) as they came."""
    ordered = {k: v for k, v in data.items() if k not in ("env", "jobs") and not isinstance(v, dict)}
    if "env" in data:
        ordered["env"] = data["env"]
    if "jobs" in data:
        jobs = data["jobs"]
        if isinstance(jobs, dict):
            jobs = {
                **{j: jobs[j] for j in JOB_ORDER if j in jobs},
                **{j: v for j, v in jobs.items() if j not in JOB_ORDER},
            }
        ordered["jobs"] = jobs
    ordered.update((k, v) for k, v in data.items() if k not in ordered)  # [hosts...] and unknown tables
    return data_to_toml(ordered)


def starter_data() -> dict[str, Any]:
    """A small starting point for a new cluster file: 1 ps + 2 workers on this machine."""
    return {
        "name": "cluster",
        "strategy": "between_graph",
        "launch_style": "flags",
        "command": ["python", "-u", "train.py"],
        "workdir": ".",
        "jobs": {
            "ps": {"tasks": ["127.0.0.1:2222"]},
            "worker": {"tasks": ["127.0.0.1:2223", "127.0.0.1:2224"]},
        },
    }


def rebase_workdir(data: dict[str, Any], base: Path, directory: Path) -> dict[str, Any]:
    """A copy of a cluster file's table whose ``workdir`` (relative to the file, from ``base``)
    points to the same place from a file in ``directory``: Save As elsewhere keeps the trainers."""
    data = dict(data)
    workdir = Path(str(data.get("workdir", "."))).expanduser()
    if workdir.is_absolute():
        return data  # the user chose an absolute path: it means the same from anywhere
    workdir = base / workdir
    relative = os.path.relpath(workdir, directory)
    data["workdir"] = str(workdir) if relative.startswith("..") else relative
    return data


def write_atomically(target: Path, text: str) -> None:
    """Replace ``target`` with ``text`` in one step: a crash or a full disk never leaves half a
    cluster file; the file keeps its permissions. It touches the disk: never on a GUI thread."""
    replace_file(target, text.encode("utf-8"))


# --------------------------------------------------------------------------------------------
# Plain data -> TOML text. ``tomllib`` reads it back to an equal dict (tests/core/test_tomlfmt.py).

LINE_WIDTH = 120  # as the project's own code; the demo's command line is 111
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def cluster_sections(path: tuple[str, ...]) -> bool:
    """Cluster files: top-level tables (env, jobs, hosts), each job and each host are sections;
    the rest is inline."""
    return len(path) == 1 or (len(path) == 2 and path[0] in ("jobs", "hosts"))


def data_to_toml(data: dict[str, Any], sections: Callable[[tuple[str, ...]], bool] = cluster_sections) -> str:
    """``data`` as TOML; ``sections(path)`` says which tables get a ``[header]`` (others are inline)."""
    out: list[str] = []
    _section(data, (), sections=sections, out=out)
    return "\n".join(out).strip("\n") + "\n"


def _section(
    table: dict[str, Any], path: tuple[str, ...], *, sections: Callable[[tuple[str, ...]], bool], out: list[str]
) -> None:
    inline = {k: v for k, v in table.items() if not (isinstance(v, dict) and sections((*path, k)))}
    nested = {k: v for k, v in table.items() if k not in inline}
    if path and (inline or not nested):
        out.append("")
        out.append("[" + ".".join(_key(p) for p in path) + "]")
    for key, value in inline.items():
        out.append(f"{_key(key)} = {_value(value, len(_key(key)) + 3)}")
    for key, value in nested.items():
        _section(value, (*path, key), sections=sections, out=out)


def _value(value: Any, indent_used: int = 0, *, single_line: bool = False) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return repr(value) if math.isfinite(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, dict):
        if not value:
            return "{}"
        # An inline table is one line, as people write them: everything inside stays on it.
        return "{ " + ", ".join(f"{_key(k)} = {_value(v, single_line=True)}" for k, v in value.items()) + " }"
    if isinstance(value, (list, tuple)):
        items = [_value(v, single_line=True) for v in value]
        one_line = "[" + ", ".join(items) + "]"
        # Tables in an array (tasks with GPUs or env) read best one a line, as do long arrays.
        fits = not any(isinstance(v, dict) for v in value) and indent_used + len(one_line) <= LINE_WIDTH
        if single_line or fits:
            return one_line
        return "[\n" + "".join(f"    {item},\n" for item in items) + "]"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def _string(text: str) -> str:
    # Literal strings keep regexes and Windows paths as typed (the cluster file guide asks for them).
    if "\\" in text and "'" not in text and text.isprintable():
        return f"'{text}'"
    return _quoted(text)


def _quoted(text: str) -> str:
    """A basic string. JSON escapes C0 only; TOML forbids DEL bare, and a file that is printed
    (``import``) or shown must hold no C1 control or bidi override raw either: every character
    that is not printable is written as ``\\uXXXX`` (or ``\\UXXXXXXXX``), which TOML reads back."""
    quoted = json.dumps(text, ensure_ascii=False)
    if quoted.isprintable():
        return quoted
    return "".join(
        c if c.isprintable() else (f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}") for c in quoted
    )


def _key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else _quoted(key)
