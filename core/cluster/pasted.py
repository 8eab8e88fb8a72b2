"""Turn a pasted command line (classic flags) or a TF_CONFIG into a cluster.

``python main.py import`` and the editor's *Paste command line / TF_CONFIG* both come here, so
they accept the same text and print the same problems.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

from core.cluster.problems import ERROR, Problem, SpecError
from core.cluster.spec import ClusterSpec, parse_data

_HOSTS_FLAG = re.compile(r"^--?(ps|worker|chief|evaluator)_hosts(?:=(.*))?$")
_TF_CONFIG_PREFIX = re.compile(r"^\s*(?:export\s+)?TF_CONFIG\s*=\s*", re.IGNORECASE)
_ROLE_FLAG = re.compile(r"^--?(job_name|task_index)(?:=(.*))?$")
DEFAULT_COMMAND = ["python", "-u", "train.py"]


def from_flags(command_line: str, base: Path | None = None) -> ClusterSpec:
    """A cluster from ``python train.py --ps_hosts=a:1,b:2 --worker_hosts=c:3 --job_name=ps ...``.

    The hosts flags become jobs; ``--job_name``/``--task_index`` are dropped (TowerDeck sets them
    per role); every other argument stays in the command. Raises SpecError with every problem.
    """
    try:
        args = shlex.split(command_line)
    except ValueError as exc:
        raise SpecError([Problem("--flags", f"cannot split the command line: {exc}", "check its quotes")]) from None
    jobs: dict[str, Any] = {}
    command: list[str] = []
    problems: list[Problem] = []
    i = 0
    while i < len(args):
        arg = args[i]
        m = _HOSTS_FLAG.match(arg)
        r = _ROLE_FLAG.match(arg)
        if m or r:
            value = (m or r).group(2)  # type: ignore[union-attr]
            if value is None:  # --ps_hosts a:1,b:2
                if i + 1 >= len(args):
                    problems.append(Problem("--flags", f"{arg} has no value", f"write {arg}=host:port,..."))
                    break
                value = args[i + 1]
                i += 1
            if m:
                hosts = [h for h in value.split(",") if h.strip()]
                jobs[m.group(1)] = {"tasks": [h.strip() for h in hosts]}
        else:
            command.append(arg)
        i += 1
    if "worker" not in jobs:
        problems.append(
            Problem(
                "--flags",
                "the command line has no --worker_hosts",
                "paste a full command, e.g. python train.py --ps_hosts=h:2222 --worker_hosts=h:2223",
            )
        )
    if problems:
        raise SpecError(problems)
    data: dict[str, Any] = {
        "name": "imported",
        "strategy": "between_graph" if "ps" in jobs else "custom",
        "launch_style": "flags",
        "command": command or DEFAULT_COMMAND,
        "jobs": jobs,
    }
    return _finish(data, base, "--flags")


def from_tf_config(text: str, command: str | None = None, base: Path | None = None) -> ClusterSpec:
    """A cluster from a TF_CONFIG JSON; its ``task`` part is ignored (TowerDeck sets it per role)."""
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpecError(
            [
                Problem(
                    "--tf-config",
                    f"not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}",
                    "paste the TF_CONFIG value exactly, in single quotes in a shell",
                )
            ]
        ) from None
    except RecursionError:
        raise SpecError(
            [Problem("--tf-config", "not a TF_CONFIG: nested too deep", 'e.g. {"cluster": {"worker": ["h:2222"]}}')]
        ) from None
    cluster = config.get("cluster") if isinstance(config, dict) else None
    if not isinstance(cluster, dict):
        raise SpecError(
            [
                Problem(
                    "--tf-config",
                    'has no "cluster" object',
                    'a TF_CONFIG looks like {"cluster": {"worker": ["h:2223"]}, "task": {...}}',
                )
            ]
        )
    problems: list[Problem] = []
    jobs: dict[str, Any] = {}
    for name, tasks in cluster.items():
        if name not in ("ps", "worker", "chief", "evaluator"):
            problems.append(
                Problem(f"cluster.{name}", f"unknown job {name!r}", "TowerDeck knows ps, worker, chief and evaluator")
            )
            continue
        if isinstance(tasks, dict):  # TF allows {"0": "h:p", ...}
            try:
                tasks = [tasks[k] for k in sorted(tasks, key=int)]
            except (ValueError, TypeError):
                problems.append(
                    Problem(
                        f"cluster.{name}", "task indices must be numbers", 'use a list: "worker": ["h:2223", "h:2224"]'
                    )
                )
                continue
        if not isinstance(tasks, list) or not all(isinstance(t, str) for t in tasks):
            problems.append(
                Problem(f"cluster.{name}", 'must be a list of "host:port"', '"worker": ["h:2223", "h:2224"]')
            )
            continue
        jobs[name] = {"tasks": tasks}
    if problems:
        raise SpecError(problems)
    if "chief" in jobs and "ps" in jobs:
        strategy = "parameter_server"
    elif "ps" not in jobs:
        strategy = "multi_worker_mirrored"
    else:
        strategy = "between_graph"
    data: dict[str, Any] = {
        "name": "imported",
        "strategy": strategy,
        "launch_style": "tf_config",
        "command": command or " ".join(DEFAULT_COMMAND),
        "jobs": jobs,
    }
    return _finish(data, base, "--tf-config")


def _finish(data: dict[str, Any], base: Path | None, source: str) -> ClusterSpec:
    spec, problems = parse_data(data, "", base=base or Path.cwd())
    errors = [p for p in problems if p.severity == ERROR]
    if spec is None or errors:
        raise SpecError([Problem(source, p.field + ": " + p.message, p.hint) for p in errors])
    return spec


def import_pasted(text: str, command: str | None, base: Path | None) -> tuple[ClusterSpec | None, list[Problem]]:
    """A cluster from what a user pasted: a TF_CONFIG (JSON, optionally as ``TF_CONFIG='...'``) or a
    command line with ``--ps_hosts/--worker_hosts``. Problems are the importers' own, as
    ``python main.py import`` prints them; never raises on bad input."""
    stripped = _TF_CONFIG_PREFIX.sub("", text.strip())
    if stripped[:1] in ("'", '"') and stripped[-1:] == stripped[:1]:
        stripped = stripped[1:-1]
    try:
        if stripped.startswith("{"):
            return from_tf_config(stripped, command or None, base), []
        if not text.strip():
            return None, [Problem("", "nothing was pasted", "paste a command line with --worker_hosts, or a TF_CONFIG")]
        return from_flags(text.strip(), base), []
    except SpecError as exc:
        return None, list(exc.problems)


def looks_like_tf_config(text: str) -> bool:
    """Whether pasted text is a TF_CONFIG (a JSON object), which needs a training command too."""
    stripped = _TF_CONFIG_PREFIX.sub("", text.strip()).strip("'\"")
    try:
        return isinstance(json.loads(stripped), dict)
    except (ValueError, RecursionError):
        return False
