"""What the kernel lets a program be given: each argument and each ``NAME=value`` of its
environment at most 128 KiB, and all of them together at most ``ARG_MAX``. Past either, ``exec``
fails with "Argument list too long" and names nothing; checked at ``validate`` instead, naming the
variable (or argument) and its line.

Linux counts each string with its terminating NUL (``MAX_ARG_STRLEN``, 32 pages: 128 KiB on the
4 KiB pages of x86-64, the smallest anyone runs) and, towards the total, each string plus a
pointer to it. A role's environment is the agent's own (inherited) plus what TowerDeck adds
(TF_CONFIG, CUDA_VISIBLE_DEVICES, TOWERDECK_*); the run directory's path is not known yet, so a
margin stands for it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from core.cluster.problems import ERROR, Problem
from core.cluster.render import RoleLaunch, render
from core.cluster.spec import ClusterSpec, Task, UnplacedTasksError, locate
from core.cluster.spec.locate import path_text
from core.cluster.spec.reader import size_text, string_bytes

POINTER_BYTES = 8
# The run directory's real path where "<run-dir>" stands now (TOWERDECK_RUN_DIR, TB_DIR, {run_dir}
# in arguments), and the role token the agent adds.
MARGIN_BYTES = 16 * 1024
_DEFAULT_ARG_MAX = 2 * 1024 * 1024


def arg_max() -> int:
    """The total a program may be given on this machine (``getconf ARG_MAX``)."""
    try:
        value = os.sysconf("SC_ARG_MAX")
    except (ValueError, OSError):
        return _DEFAULT_ARG_MAX
    return value if value > 0 else _DEFAULT_ARG_MAX


def launch_bytes(launch: RoleLaunch, inherited: Mapping[str, str]) -> dict[str, int]:
    """Each argument (``argv[N]``) and variable (``env.NAME``) of ``launch`` with its cost."""
    costs = {f"argv[{i}]": string_bytes(arg) + POINTER_BYTES for i, arg in enumerate(launch.argv)}
    for key, value in {**inherited, **launch.env}.items():
        costs[f"env.{key}"] = string_bytes(f"{key}={value}") + POINTER_BYTES
    return costs


def _where(spec: ClusterSpec, task: Task, item: str, *, text: str) -> tuple[str, int | None]:
    """The field and line of ``item`` (``env.NAME``, ``argv[N]``) in the cluster file, if it is
    written there (an inherited variable is not)."""
    candidates: list[tuple[str | int, ...]]
    if item.startswith("env."):
        key = item[4:]
        if key in task.env:  # the job's or the task's own [env]
            candidates = [("jobs", task.job, "env", key), ("jobs", task.job, "tasks", task.index, "env", key)]
        elif key in spec.env:
            candidates = [("env", key)]
        else:  # TowerDeck's own (TF_CONFIG) or inherited: in no file
            return item, None
    else:
        candidates = [("jobs", task.job, "tasks", task.index, "command"), ("jobs", task.job, "command"), ("command",)]
    for path in candidates:
        line = locate(text, path)
        if line is not None:
            return path_text(path), line
    return item, None


def launch_size_problems(
    spec: ClusterSpec, text: str, *, inherited: Mapping[str, str], limit: int | None = None
) -> list[Problem]:
    """One problem when a role's command line and environment together pass ``limit`` (default:
    :func:`arg_max`), naming the role, the total and the largest part; none otherwise."""
    limit = arg_max() if limit is None else limit
    over: list[tuple[Task, int, str, int]] = []
    try:
        tasks = spec.tasks()
    except UnplacedTasksError:
        tasks = spec.explicit_tasks()  # counted tasks are checked when Slurm places them
    for task in tasks:
        try:
            costs = launch_bytes(render(spec, task), inherited if not spec.host_config(task.host).remote else {})
        except UnplacedTasksError:
            return []
        total = sum(costs.values()) + MARGIN_BYTES
        if total > limit:
            largest = max(costs, key=lambda k: costs[k])
            over.append((task, total, largest, costs[largest]))
    if not over:
        return []
    task, total, largest, largest_bytes = over[0]
    field, line = _where(spec, task, largest, text=text)
    if largest.startswith("env.") and largest[4:] not in task.env and largest[4:] not in spec.env:
        largest += " (from the environment TowerDeck runs in)"
    more = f" (and {len(over) - 1} more role{'s' if len(over) > 2 else ''})" if len(over) > 1 else ""
    return [
        Problem(
            field,
            f"{task.role_id}{more}: its command line and environment come to {size_text(total)}, more than the "
            f"{size_text(limit)} a program can be given (ARG_MAX); the largest part is {largest} "
            f"({size_text(largest_bytes)}), and the launch would fail with 'Argument list too long'",
            "make it smaller, or put the data in a file and pass the file's path",
            ERROR,
            line,
        )
    ]
