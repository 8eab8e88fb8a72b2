"""The cluster file's keys about stuck clusters, and the pure rules behind them.

- ``start_stall_after_s``: a role that should train (see :func:`core.cluster.roles.expects_steps`) and
  has printed no step this long after it started is flagged stalled, with its last output line
  (0: never). Generous by default: a classic non-chief may legitimately wait 30 s for the chief.
- ``success_policy``: ``"all"`` (the default, as before: every role of ``complete_when`` must end)
  or ``"chief"``: the chief's success (``chief:0``, else ``worker:0``) ends the run and the other
  roles are stopped, as Kubeflow's TFJob does with its default ``successPolicy``.

Kept apart from core/cluster/spec so that the spec only needs a few call sites to read and write them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from core.cluster.roles import chief_of, expects_steps

DEFAULT_START_STALL_AFTER_S = 600.0
SUCCESS_POLICIES = ("all", "chief")

KEYS = {
    "start_stall_after_s": "seconds a training role may print no step after starting before it is marked stalled (0: never)",
    "success_policy": 'when training is over: "all" (every complete_when role ends) or "chief" (the chief\'s success ends it)',
}


@dataclass(frozen=True)
class StuckOptions:
    """What the cluster file says about stuck clusters."""

    start_stall_after_s: float = DEFAULT_START_STALL_AFTER_S
    success_policy: str = "all"


class _Reader(Protocol):
    def number(
        self, value: Any, path: tuple[str | int, ...], minimum: float, *, integer: bool = False
    ) -> float | None: ...
    def string(self, value: Any, path: tuple[str | int, ...], choices: tuple[str, ...] = ()) -> str | None: ...


def parse_stuck_options(data: Mapping[str, Any], reader: _Reader) -> StuckOptions:
    """Read the keys from a cluster file's top level; problems go to ``reader`` (line, fix)."""
    after_s = reader.number(data.get("start_stall_after_s", DEFAULT_START_STALL_AFTER_S), ("start_stall_after_s",), 0.0)
    policy = reader.string(data.get("success_policy", "all"), ("success_policy",), SUCCESS_POLICIES)
    return StuckOptions(
        start_stall_after_s=after_s if after_s is not None else DEFAULT_START_STALL_AFTER_S,
        success_policy=policy or "all",
    )


def stuck_options_to_data(options: StuckOptions) -> dict[str, Any]:
    """The keys that differ from the defaults, for writing a cluster file back."""
    data: dict[str, Any] = {}
    if options.start_stall_after_s != DEFAULT_START_STALL_AFTER_S:
        data["start_stall_after_s"] = options.start_stall_after_s
    if options.success_policy != "all":
        data["success_policy"] = options.success_policy
    return data


def chief_success(options: StuckOptions, states: Mapping[str, str]) -> str | None:
    """Under ``success_policy = "chief"``: the chief when it has succeeded (the run is over), else None.

    ``states`` maps each role id to its state's value (``succeeded``...)."""
    if options.success_policy != "chief":
        return None
    chief = chief_of(states)
    return chief if chief is not None and states.get(chief) == "succeeded" else None


def start_stall_detail(
    options: StuckOptions,
    strategy: str,
    job: str,
    *,
    running_for_s: float,
    has_step: bool,
    last_lines: Iterable[str],
) -> str | None:
    """Why a running role with no step yet is stalled, or None when it is not (yet).

    ``running_for_s`` counts from the start of the attempt; ``last_lines`` is its newest output."""
    after_s = options.start_stall_after_s
    if after_s <= 0 or has_step or running_for_s < after_s or not expects_steps(strategy, job):
        return None
    last = next((line.strip() for line in reversed(list(last_lines)) if line.strip()), "")
    said = f"; last printed: {last[:300]!r}" if last else "; it printed nothing"
    return f"no step in {running_for_s:.0f} s since it started{said}"
