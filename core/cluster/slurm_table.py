"""The ``[slurm]`` table of a cluster file: one Slurm allocation for the whole run.

```toml
[slurm]
partition = "gpu"             # optional: the cluster's default partition otherwise
time = "2-00:00:00"           # optional: Slurm's time formats, or minutes as a number
nodes = 2                     # optional: the number of nodes to allocate
account = "ml-team"           # optional
extra_args = ["--gres=gpu:4", "--qos", "high"]   # passed to sbatch as given
login = "me@login-1"          # optional: run Slurm's commands there over SSH
```

:func:`parse_slurm` checks the table and reports each problem with the key's path, what is
wrong and how to fix it, through the same ``add(path, message, hint)`` callback the rest of the
cluster file's reader uses; it never raises on bad input.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.cluster.problems import kind

SLURM_KEYS = {
    "partition": "the Slurm partition to allocate in (default: the cluster's default partition)",
    "time": 'the allocation\'s time limit, e.g. "90", "4:00:00" or "2-00:00:00"',
    "nodes": "how many nodes to allocate (default: as many as the tasks' hosts, else 1)",
    "account": "the Slurm account to charge",
    "extra_args": 'more sbatch options, as a list, e.g. ["--gres=gpu:4", "--qos", "high"]',
    "login": "an SSH destination of a login node that runs Slurm's commands (default: this machine)",
}
AddProblem = Callable[[tuple[str | int, ...], str, str], None]

# Slurm names (partitions, accounts) reach sbatch's argv and, through a login node, a shell: no
# leading '-' (it would read as an option), no whitespace or shell metacharacters.
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]*$")
# sbatch --time: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S, or UNLIMITED/INFINITE.
_TIME = re.compile(r"^(?:\d+|\d+:\d{1,2}|\d+:\d{1,2}:\d{1,2}|\d+-\d+|\d+-\d+:\d{1,2}|\d+-\d+:\d{1,2}:\d{1,2})$")
_SSH_DESTINATION = re.compile(
    r"^(?:[A-Za-z0-9_][A-Za-z0-9_.-]*@)?(?:[A-Za-z0-9_][A-Za-z0-9_.-]*|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$"
)
# Options TowerDeck sets itself to hold the allocation and read its id: a user's copy would break
# that (a second script, output written into the working directory, no job id printed).
RESERVED_OPTIONS = ("--wrap", "--parsable", "--output", "-o", "--error", "-e", "--array", "-a", "--wait", "-W")


@dataclass(frozen=True)
class SlurmConfig:
    """The ``[slurm]`` table, checked. ``None`` fields leave the choice to Slurm."""

    partition: str | None = None
    time: str | None = None
    nodes: int | None = None
    account: str | None = None
    extra_args: tuple[str, ...] = ()
    login: str | None = None


def _string(value: Any, path: tuple[str | int, ...], *, add: AddProblem, example: str) -> str | None:
    if not isinstance(value, str):
        add(path, f"must be a string, not {kind(value)}", f"write it in quotes, e.g. {path[-1]} = {example}")
        return None
    return value


def _reserved(arg: str) -> str | None:
    for option in RESERVED_OPTIONS:
        if arg == option or (option.startswith("--") and arg.startswith(option + "=")):
            return option
        if len(option) == 2 and arg.startswith(option) and not arg.startswith("--"):
            return option
    return None


def parse_slurm(value: Any, add: AddProblem, path: tuple[str | int, ...] = ("slurm",)) -> SlurmConfig | None:
    """Check a ``[slurm]`` table; every problem goes to ``add(path, message, hint)``.

    Returns the config, or None when the table is not a table at all.
    """
    if not isinstance(value, dict):
        add(path, f"must be a table, not {kind(value)}", '[slurm] then partition = "gpu", time = "4:00:00"')
        return None
    for key in value:
        if key not in SLURM_KEYS:
            close = difflib.get_close_matches(key, list(SLURM_KEYS), n=1)
            add(
                (*path, key),
                f"unknown key {key!r}",
                f"did you mean {close[0]!r}?" if close else "allowed keys: " + ", ".join(SLURM_KEYS),
            )
    names: dict[str, str | None] = {}
    for key, example in (("partition", '"gpu"'), ("account", '"ml-team"')):
        text = _string(value[key], (*path, key), add=add, example=example) if key in value else None
        if text is not None and not _NAME.match(text):
            add(
                (*path, key),
                f"{text!r} is not a Slurm {key} name",
                f"use the name `sinfo` (partition) or `sacctmgr show assoc` (account) prints: letters, digits, "
                f"'_', '.', '-', not starting with '-'; e.g. {key} = {example}",
            )
            text = None
        names[key] = text
    time: str | None = None
    if "time" in value:
        raw = value["time"]
        if isinstance(raw, int) and not isinstance(raw, bool) and raw > 0:
            time = str(raw)
        elif isinstance(raw, str) and (_TIME.match(raw) or raw.upper() in ("UNLIMITED", "INFINITE")):
            time = raw
        else:
            add(
                (*path, "time"),
                f"{raw!r} is not a Slurm time limit",
                'minutes as a number (time = 90), or "H:MM:SS", "D-HH:MM:SS" (time = "2-00:00:00"), or "UNLIMITED"',
            )
    nodes: int | None = None
    if "nodes" in value:
        raw = value["nodes"]
        if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
            add((*path, "nodes"), f"must be a whole number of nodes >= 1, not {raw!r}", "e.g. nodes = 2")
        else:
            nodes = raw
    extra: tuple[str, ...] = ()
    if "extra_args" in value:
        extra = _parse_extra_args(value["extra_args"], (*path, "extra_args"), add)
    login: str | None = None
    if "login" in value:
        login = _string(value["login"], (*path, "login"), add=add, example='"me@login-1"')
        if login is not None and not _SSH_DESTINATION.match(login):
            add(
                (*path, "login"),
                f"{login!r} is not an SSH destination",
                'e.g. login = "me@login-1", "login-1:2200" or an alias from your ssh config; not starting with \'-\'',
            )
            login = None
    return SlurmConfig(names["partition"], time, nodes, names["account"], extra, login)


def _parse_extra_args(raw: Any, path: tuple[str | int, ...], add: AddProblem) -> tuple[str, ...]:
    example = 'extra_args = ["--gres=gpu:4", "--qos", "high"]'
    if not isinstance(raw, list) or not all(isinstance(a, str) for a in raw):
        add(path, f"must be a list of strings, not {kind(raw)}", f"one sbatch argument per string: {example}")
        return ()
    ok = True
    for i, arg in enumerate(raw):
        if not arg or any(c in arg for c in "\0\n\r"):
            add((*path, i), f"{arg!r} is empty or holds a newline or NUL", f"one sbatch argument per string: {example}")
            ok = False
        elif (option := _reserved(arg)) is not None:
            add(
                (*path, i),
                f"{option} is set by TowerDeck itself",
                f"remove {arg!r}; TowerDeck holds the allocation and keeps its output",
            )
            ok = False
    if raw and ok and not raw[0].startswith("-"):
        add((*path, 0), f"{raw[0]!r} is not an sbatch option", f"start with the option, then its value: {example}")
        ok = False
    return tuple(raw) if ok else ()


def slurm_to_data(config: SlurmConfig) -> dict[str, Any]:
    """The ``[slurm]`` table that parses back to ``config`` (for saving a cluster file)."""
    data: dict[str, Any] = {}
    for key in ("partition", "time", "nodes", "account", "login"):
        if getattr(config, key) is not None:
            data[key] = getattr(config, key)
    if config.extra_args:
        data["extra_args"] = list(config.extra_args)
    return data
