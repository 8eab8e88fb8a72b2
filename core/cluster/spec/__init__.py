"""The cluster model, and cluster files: parsing with precise problems, and writing.

A cluster file is TOML (docs/guide/cluster-file.md has the schema). :func:`parse_text` turns one into a
:class:`ClusterSpec` and a list of :class:`~core.cluster.problems.Problem`; it never raises on bad input.
Checks that need this machine (does the command exist, is the port free) live in ``core.preflight.checks``;
whether an address is this machine in ``core.cluster.locality``.

The parts, each importable alone:

- ``model``: the frozen data (:class:`ClusterSpec`, :class:`Job`, :class:`Task`,
  :class:`HostConfig`, :class:`RestartPolicy`), the schema's keys and defaults;
- ``addresses``: ``host:port``, SSH destinations, host and program names;
- ``locate``: the line of a key path in a file's text;
- ``reader``: reading a table's values with a problem for each bad one;
- ``validate``: the checks across fields (roles, ports, GPUs, policies);
- ``parse``: a file's text or table -> a spec and its problems;
- ``write``: a spec or a table -> TOML that reads like a hand-written file (the one writer).
"""

from __future__ import annotations

from core.cluster.spec.addresses import parse_address, parse_ssh_destination
from core.cluster.spec.locate import locate
from core.cluster.spec.model import (
    DEFAULT_REMOTE_PYTHON,
    DEFAULT_REMOTE_RUN_ROOT,
    DEFAULT_RESET_AFTER_S,
    DEFAULT_STALL_AFTER_S,
    HOST_KEYS,
    JOB_KEYS,
    JOB_ORDER,
    LAUNCH_STYLES,
    POLICIES,
    RESTART_KEYS,
    STRATEGIES,
    TASK_KEYS,
    TOP_KEYS,
    ClusterSpec,
    HostConfig,
    Job,
    RestartPolicy,
    Task,
    UnplacedTasksError,
    find_role,
    parse_role_id,
    role_dir_name,
    role_id,
    split_command,
)
from core.cluster.spec.parse import load, parse_data, parse_text
from core.cluster.spec.write import data_to_toml, dumps, to_data, toml_text, write_atomically

__all__ = [
    "DEFAULT_REMOTE_PYTHON",
    "DEFAULT_REMOTE_RUN_ROOT",
    "DEFAULT_RESET_AFTER_S",
    "DEFAULT_STALL_AFTER_S",
    "HOST_KEYS",
    "JOB_KEYS",
    "JOB_ORDER",
    "LAUNCH_STYLES",
    "POLICIES",
    "RESTART_KEYS",
    "STRATEGIES",
    "TASK_KEYS",
    "TOP_KEYS",
    "ClusterSpec",
    "HostConfig",
    "Job",
    "RestartPolicy",
    "Task",
    "UnplacedTasksError",
    "data_to_toml",
    "dumps",
    "find_role",
    "load",
    "locate",
    "parse_address",
    "parse_data",
    "parse_role_id",
    "parse_ssh_destination",
    "parse_text",
    "role_dir_name",
    "role_id",
    "split_command",
    "to_data",
    "toml_text",
    "write_atomically",
]
