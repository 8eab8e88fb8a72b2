"""A run's hyperparameters: the flags its command passes (``--learning_rate=0.3``,
``--batch_size 64``, a boolean ``--shuffle``) and its ``[env]`` values, each one a column of the runs
list and a row of compare, as W&B shows a run's config. Two runs that differ by one flag then
differ in exactly that column, instead of in one long command line cut before the flag.

Only ``--name`` flags count: a single dash (``-u``, ``-c CODE``) is the interpreter's. A flag whose
value holds a TowerDeck placeholder (``--logdir={tb_dir}``) is wiring, the same in every run, and is
left out. ``--name value`` and a boolean ``--name`` followed by a positional argument cannot be told
apart from the command alone: the next argument is taken as the value, as argparse would for a flag
that takes one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from core.cluster.render import PLACEHOLDERS
from core.cluster.spec import ClusterSpec

__all__ = ["ENV_PREFIX", "command_flags", "hyperparameters", "program"]

ENV_PREFIX = "[env] "
_NUMBER = re.compile(r"^-\d|^-\.\d")  # "-0.5" is a value, not a flag


def _is_flag(arg: str) -> bool:
    return arg.startswith("-") and not _NUMBER.match(arg)


def _wiring(value: str) -> bool:
    return any(p in value for p in PLACEHOLDERS)


def command_flags(command: Sequence[str]) -> dict[str, str]:
    """``--name`` -> value for each flag of ``command``, in order; the last one given wins (as
    argparse does); ``true`` for a flag with no value. Arguments after ``--`` are positional."""
    flags: dict[str, str] = {}
    args = list(command)
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            break
        if not arg.startswith("--") or len(arg) == 2:
            i += 1
            continue
        name, eq, value = arg.partition("=")
        if not eq:
            if i + 1 < len(args) and not _is_flag(args[i + 1]):
                value = args[i + 1]
                i += 1
            else:
                value = "true"
        if not _wiring(value):
            flags[name] = value
        i += 1
    return flags


def program(command: Sequence[str]) -> str:
    """``command`` without its flags and their values: the interpreter and the script."""
    kept: list[str] = []
    args = list(command)
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            kept += args[i:]
            break
        if arg.startswith("--") and len(arg) > 2:
            if "=" not in arg and i + 1 < len(args) and not _is_flag(args[i + 1]):
                i += 1  # its value
        else:
            kept.append(arg)
        i += 1
    return " ".join(kept)


def hyperparameters(spec: ClusterSpec) -> dict[str, str]:
    """The run's hyperparameters as labelled columns: the cluster command's flags (``--lr``), its
    env (``[env] SEED``), then a job's or task's own command and env, labelled with it
    (``worker: --lr``, ``worker:1: [env] SEED``)."""
    found: dict[str, str] = dict(command_flags(spec.command))
    found.update({f"{ENV_PREFIX}{k}": v for k, v in sorted(spec.env.items())})
    for job in spec.jobs.values():
        # A job's command and env are copied into each task it lists: what every task shares is
        # the job's, what one task alone has is that task's.
        commands = {t.role_id: t.command or job.command for t in job.tasks} or {job.name: job.command}
        envs = {t.role_id: t.env for t in job.tasks} or {job.name: job.env}
        shared_command = len(set(commands.values())) == 1
        for owner, command in commands.items():
            if command is not None and command != spec.command:
                label = job.name if shared_command else owner
                found.update({f"{label}: {k}": v for k, v in command_flags(command).items()})
        for owner, env in envs.items():
            for k, v in sorted(env.items()):
                shared = all(other.get(k) == v for other in envs.values())
                found[f"{job.name if shared else owner}: {ENV_PREFIX}{k}"] = v
    return found
