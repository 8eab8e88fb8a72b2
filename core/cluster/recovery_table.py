"""The cluster file's ``[recovery]`` table, and the pure rule of what a recovery restarts.

TensorFlow leaves recovery to the platform that runs it (DESIGN.md): Keras' ``BackupAndRestore`` and
``PreemptionCheckpointHandler`` save and restore, "the platform should restart it". TowerDeck is that
platform, and restarts what the training's strategy needs, from the trainers' checkpoints:

========================  =================  ====================================================
strategy                  failed role        what is restarted (``mode = "auto"``)
========================  =================  ====================================================
parameter_server          worker             that worker (the coordinator re-dispatches its work)
parameter_server          ps                 that ps and the chief (its coordinator reconnects and
                                             restores the variables from its checkpoint)
parameter_server          chief, evaluator   that role
multi_worker_mirrored     chief or worker    every chief and worker together (collectives need all)
multi_worker_mirrored     evaluator          that role
between_graph             ps                 every role (the chief restores from its checkpoint)
between_graph             any other role     that role
custom                    any                nothing: the jobs' own restart policies only
========================  =================  ====================================================

``mode = "gang"`` restarts every role but the ps with any of them, ``"cluster"`` every role, and
``"role"`` leaves restarts to each job's ``restart`` policy (TowerDeck before recovery). A job with a
``restart`` policy of its own keeps it in every mode, and an explicit ``restart = "Never"`` keeps the
job out of recovery (its failure fails the run, as written). ``max_recoveries`` in a
row without the training moving on in between end the run (a trainer's bug ends as a crash loop,
not an endless one); ``backoff_s`` is the wait between the roles' stop and their start.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from core.cluster.problems import kind
from core.cluster.roles import chief_of

RECOVERY_MODES = ("auto", "role", "gang", "cluster")
RECOVERY_KEYS = {
    "mode": "what a failed role's recovery restarts: " + ", ".join(RECOVERY_MODES) + ' (default "auto": by strategy)',
    "max_recoveries": "recoveries in a row, without training moving on in between, before the run fails (default 3)",
    "backoff_s": "seconds between the recovered roles' stop and their start (default 2)",
    "checkpoint_dir": "where the trainers write checkpoints (relative to workdir), when no flag of theirs says so",
}
DEFAULT_MAX_RECOVERIES = 3
DEFAULT_BACKOFF_S = 2.0
MAX_BACKOFF_S = 600.0


@dataclass(frozen=True)
class RecoveryConfig:
    """The ``[recovery]`` table, checked; its defaults recover out of the box."""

    mode: str = "auto"
    max_recoveries: int = DEFAULT_MAX_RECOVERIES
    backoff_s: float = DEFAULT_BACKOFF_S
    checkpoint_dir: str | None = None


class _Reader(Protocol):
    def add(self, path: tuple[str | int, ...], message: str, hint: str = "", *, severity: str = ...) -> None: ...
    def unknown_keys(self, table: dict[str, Any], allowed: Any, path: tuple[str | int, ...]) -> None: ...
    def number(
        self, value: Any, path: tuple[str | int, ...], minimum: float, *, integer: bool = False
    ) -> float | None: ...
    def string(self, value: Any, path: tuple[str | int, ...], choices: tuple[str, ...] = ()) -> str | None: ...


def parse_recovery(value: Any, r: _Reader) -> RecoveryConfig:
    """Check a ``[recovery]`` table (problems go to ``r``, naming the key and its line); what it
    cannot read keeps its default."""
    path: tuple[str | int, ...] = ("recovery",)
    if not isinstance(value, dict):
        r.add(path, f"must be a table, not {kind(value)}", '[recovery] then mode = "auto"')
        return RecoveryConfig()
    r.unknown_keys(value, RECOVERY_KEYS, path)
    mode = r.string(value.get("mode", "auto"), (*path, "mode"), RECOVERY_MODES) or "auto"
    count = r.number(value.get("max_recoveries", DEFAULT_MAX_RECOVERIES), (*path, "max_recoveries"), 0.0, integer=True)
    backoff_s = r.number(value.get("backoff_s", DEFAULT_BACKOFF_S), (*path, "backoff_s"), 0.0)
    if backoff_s is not None and backoff_s > MAX_BACKOFF_S:
        r.add(
            (*path, "backoff_s"),
            f"must be at most {MAX_BACKOFF_S:g} seconds, not {backoff_s:g}",
            f"use a value from 0 to {MAX_BACKOFF_S:g} (default {DEFAULT_BACKOFF_S:g})",
        )
        backoff_s = None
    checkpoint_dir = r.string(value["checkpoint_dir"], (*path, "checkpoint_dir")) if "checkpoint_dir" in value else None
    return RecoveryConfig(
        mode=mode,
        max_recoveries=int(count) if count is not None else DEFAULT_MAX_RECOVERIES,
        backoff_s=backoff_s if backoff_s is not None else DEFAULT_BACKOFF_S,
        checkpoint_dir=checkpoint_dir or None,
    )


def recovery_to_data(config: RecoveryConfig) -> dict[str, Any]:
    """The keys that differ from the defaults (an empty table is not written)."""
    data: dict[str, Any] = {}
    if config.mode != "auto":
        data["mode"] = config.mode
    if config.max_recoveries != DEFAULT_MAX_RECOVERIES:
        data["max_recoveries"] = config.max_recoveries
    if config.backoff_s != DEFAULT_BACKOFF_S:
        data["backoff_s"] = config.backoff_s
    if config.checkpoint_dir is not None:
        data["checkpoint_dir"] = config.checkpoint_dir
    return data


def recovery_group(*, strategy: str, mode: str, roles: Iterable[str], failed: str) -> tuple[str, ...]:
    """The roles a recovery of ``failed`` restarts (``failed`` first, then in ``roles``' order); empty
    when recovery does not handle it (``role`` mode, or ``auto`` for a custom strategy)."""
    names = list(dict.fromkeys(roles))
    job = failed.partition(":")[0]
    if mode == "role" or (mode == "auto" and strategy == "custom"):
        return ()
    if mode == "cluster":
        group = names
    elif mode == "gang":
        group = [n for n in names if n.partition(":")[0] != "ps"] if job != "ps" else names
    elif strategy == "parameter_server":
        chief = chief_of(names)
        group = [failed, *([chief] if job == "ps" and chief is not None and chief != failed else [])]
    elif strategy == "multi_worker_mirrored":
        group = (
            [n for n in names if n.partition(":")[0] in ("chief", "worker")] if job in ("chief", "worker") else [failed]
        )
    else:  # between_graph: variables live on the ps, and only the chief restores them
        group = names if job == "ps" else [failed]
    return (failed, *(n for n in group if n != failed))


def action_words(group: tuple[str, ...], every: int) -> str:
    """``restarting ps:0 and chief:0``, ``restarting the cluster`` (every role), ``restarting 3 workers``."""
    if len(group) == every and every > 2:
        return "restarting the cluster"
    if len(group) <= 3:
        return "restarting " + (" and ".join(group) if len(group) <= 2 else f"{', '.join(group[:-1])} and {group[-1]}")
    jobs = {n.partition(":")[0] for n in group}
    return f"restarting {len(group)} {'roles' if len(jobs) > 1 else next(iter(jobs)) + 's'}"
