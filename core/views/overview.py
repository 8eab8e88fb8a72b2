"""The cluster at a glance: hosts as boxes, their roles inside, each with a state, its own batches/s
and its GPUs' utilisation; the run's global steps/s and examples/s (:mod:`core.views.rates`). Qt-free,
so the same model feeds the window's overview and its tests.

The model is built from whatever role statuses the source gives (:class:`RoleLike`: the
controller's ``RoleStatus`` satisfies it) and sorted the way people read role names:
``worker:2`` before ``worker:10`` (:func:`natural_key`).

A role whose attempts keep failing is ``crash-looping`` (Kubernetes' CrashLoopBackOff), whatever
its state between and during its attempts: never counted as running. A tile says so, and between
attempts when the next begins (:attr:`RoleCell.notes`).
"""

from __future__ import annotations

import functools
import re
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from core.run.status import RoleStatus
from core.views.conditions import trouble_text
from core.views.empty import seconds_to_next_attempt
from core.views.rates import StepRates

__all__ = [
    "CATEGORY_ORDER",
    "HOST_TILES_FROM",
    "HostBox",
    "HostTile",
    "Overview",
    "PlannedRole",
    "RoleCell",
    "RoleLike",
    "build_overview",
    "category",
    "host_tiles",
    "natural_key",
    "short_role",
]

_DIGITS = re.compile(r"(\d+)")

# Past this many roles a tile per role is a wall nobody reads (1,024 workers: 1,024 tiles) and a
# paint that costs frames: the overview shows a tile per host, its roles when it is picked.
HOST_TILES_FROM = 256
# Categories whose role's process is up: "running" on a host tile counts them.
ALIVE = frozenset({"running", "straggler", "waiting", "stalled", "crash-looping"})

# What a person scans for first comes first: trouble, then work, then the quiet states.
CATEGORY_ORDER = (
    "failed",
    "crash-looping",
    "stalled",
    "waiting",
    "backoff",
    "straggler",
    "starting",
    "running",
    "stopping",
    "pending",
    "succeeded",
    "stopped",
)


@functools.lru_cache(maxsize=8192)
def natural_key(text: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key that orders the digits in a name by value: ``worker:2`` < ``worker:10``,
    ``127.0.0.2`` < ``127.0.0.10``. Text and number parts never compare with each other.
    Cached: the same role and host names are sorted at every frame (a run's names, bounded)."""
    parts: list[tuple[int, int | str]] = []
    for i, part in enumerate(_DIGITS.split(text)):
        if i % 2:
            parts.append((0, int(part)))
        elif part:
            parts.append((1, part.lower()))
    return tuple(parts)


class RoleLike(Protocol):
    """What the overview reads of a role (``core.run.status.RoleStatus`` has all of it)."""

    @property
    def role(self) -> str: ...
    @property
    def job(self) -> str: ...
    @property
    def host(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def stalled(self) -> bool: ...
    @property
    def gpus(self) -> tuple[int, ...]: ...
    @property
    def gpu_utilization_percent(self) -> float | None: ...


def category(role: RoleLike) -> str:
    """The state a person cares about: a role whose attempts keep failing is ``crash-looping``
    (running, starting or between attempts), a running role that made no step for a while is
    ``stalled``, one that waits on a peer (when the source knows it) is ``waiting``, one the
    straggler judge flagged is a ``straggler``."""
    state = str(role.state)
    if getattr(role, "crash_looping", False) and state in ("starting", "running", "backoff", "stopping"):
        return "crash-looping"
    if state == "running":
        if getattr(role, "waiting_for", None):
            return "waiting"
        if role.stalled:
            return "stalled"
        if getattr(role, "straggler", False):
            return "straggler"
    return state if state in CATEGORY_ORDER else "pending"


def short_role(role: str) -> str:
    """``worker:12`` -> ``w12``, ``ps:0`` -> ``ps0``, ``chief:0`` -> ``c0``, ``evaluator:0`` -> ``e0``."""
    job, _, index = role.partition(":")
    prefix = {"worker": "w", "chief": "c", "evaluator": "e", "ps": "ps", "master": "m"}.get(job, job[:3])
    return f"{prefix}{index}"


@dataclass(frozen=True)
class PlannedRole:
    """A role of the cluster file before a launch: pending, on its host."""

    role: str
    job: str
    host: str
    state: str = "pending"
    stalled: bool = False
    gpus: tuple[int, ...] = ()
    gpu_utilization_percent: float | None = None


@dataclass(frozen=True)
class RoleCell:
    """One role as the overview draws it."""

    role: str
    short: str
    category: str
    batches_per_s: float | None  # its own updates (core.views.rates)
    gpus: tuple[int, ...]
    gpu_utilization_percent: float | None
    notes: tuple[str, ...] = ()  # lines under its name: "crash-looping", "next in 4 s", "waits for ps0"
    trouble: str = ""  # what is wrong, in a sentence (its tooltip): core.views.conditions.trouble_text
    straggler: str = ""  # a straggler's figures, for its tooltip (core.telemetry.stragglers)


def _notes(role: RoleLike, category: str, now: float) -> tuple[str, ...]:
    """What a tile says under its name when its state needs words: a crash loop and, between
    attempts, when the next begins; a role between attempts; a role waiting on a peer; a straggler."""
    notes: list[str] = []
    if category == "crash-looping":
        notes.append("crash-looping")
    elif category == "backoff":
        notes.append("restarting")
    elif category == "waiting":
        notes.append(f"waits for {short_role(str(getattr(role, 'waiting_for', '')))}")
    elif category == "straggler":
        notes.append("straggler")
    if isinstance(role, RoleStatus):
        left = seconds_to_next_attempt(role, now)
        if left is not None:
            notes.append(f"next in {left:.0f} s" if left >= 1 else "next now")
    return tuple(notes)


def _trouble(role: RoleLike, now: float) -> str:
    return trouble_text(role, now) if isinstance(role, RoleStatus) else ""


def _straggler(role: RoleLike) -> str:
    return f"straggler: {role.straggler_detail}" if isinstance(role, RoleStatus) and role.straggler else ""


@dataclass(frozen=True)
class HostBox:
    """One host and its roles, in natural order by job then task."""

    host: str
    cells: tuple[RoleCell, ...]
    counts: tuple[tuple[str, int], ...]  # category -> roles, in CATEGORY_ORDER, non-zero only

    @property
    def worst(self) -> str:
        return self.counts[0][0] if self.counts else "pending"


@dataclass(frozen=True)
class HostTile:
    """One host in a line or two: how many of its roles run, the spread of its workers' batches/s,
    and its worst state first (the tile's colour; counts in CATEGORY_ORDER)."""

    host: str
    roles: int
    running: int
    counts: tuple[tuple[str, int], ...]  # category -> roles, in CATEGORY_ORDER, non-zero only
    rate_min: float | None  # its roles' own batches/s: lowest, median, highest
    rate_median: float | None
    rate_max: float | None
    categories: tuple[str, ...]  # each role's, in the host's order (the tile's strip)
    roles_named: tuple[str, ...]  # the roles, in that order

    @property
    def worst(self) -> str:
        return self.counts[0][0] if self.counts else "pending"

    @property
    def trouble(self) -> tuple[tuple[str, int], ...]:
        """The counts worse than running (failed, crash-looping, stalled, waiting, backoff, straggler)."""
        cut = CATEGORY_ORDER.index("starting")
        return tuple((c, n) for c, n in self.counts if CATEGORY_ORDER.index(c) < cut)


def host_tiles(model: Overview) -> tuple[HostTile, ...]:
    """A tile per host of ``model``: the hosts with the worst states first, then in natural order."""
    tiles = []
    for box in model.hosts:
        rates = sorted(c.batches_per_s for c in box.cells if c.batches_per_s is not None)
        tiles.append(
            HostTile(
                host=box.host,
                roles=len(box.cells),
                running=sum(c.category in ALIVE for c in box.cells),
                counts=box.counts,
                rate_min=rates[0] if rates else None,
                rate_median=rates[len(rates) // 2] if rates else None,
                rate_max=rates[-1] if rates else None,
                categories=tuple(c.category for c in box.cells),
                roles_named=tuple(c.role for c in box.cells),
            )
        )
    rank = {c: i for i, c in enumerate(CATEGORY_ORDER)}
    # sorted() is stable: hosts of the same worst state stay in natural order.
    return tuple(sorted(tiles, key=lambda t: rank.get(t.worst, len(rank))))


@dataclass(frozen=True)
class Overview:
    hosts: tuple[HostBox, ...]
    counts: tuple[tuple[str, int], ...]  # over the whole cluster, in CATEGORY_ORDER
    rates: StepRates  # the run's global steps/s, examples/s and each worker's batches/s

    @property
    def role_count(self) -> int:
        return sum(len(h.cells) for h in self.hosts)

    def cell(self, role: str) -> RoleCell | None:
        return next((c for h in self.hosts for c in h.cells if c.role == role), None)


def _ordered_counts(categories: Iterable[str]) -> tuple[tuple[str, int], ...]:
    counts = Counter(categories)
    return tuple((c, counts[c]) for c in CATEGORY_ORDER if counts[c])


def build_overview(roles: Sequence[RoleLike], now: float | None = None, *, rates: StepRates | None = None) -> Overview:
    """Group roles by host (hosts in natural order), roles by job (ps, chief, worker, evaluator,
    then others) and task index. ``now`` (default: the clock) dates a countdown to a next attempt;
    ``rates``: the run's (:func:`core.views.rates.status_rates`)."""
    now = time.time() if now is None else now
    rates = rates if rates is not None else StepRates()
    job_rank = {"ps": 0, "chief": 1, "master": 1, "worker": 2, "evaluator": 3}
    by_host: dict[str, list[RoleLike]] = {}
    for r in roles:
        by_host.setdefault(r.host, []).append(r)
    hosts = []
    for host in sorted(by_host, key=natural_key):
        members = sorted(by_host[host], key=lambda r: (job_rank.get(r.job, 9), natural_key(r.role)))
        cells = tuple(
            RoleCell(
                role=r.role,
                short=short_role(r.role),
                category=(cat := category(r)),
                batches_per_s=rates.of(r.role),
                gpus=tuple(r.gpus),
                gpu_utilization_percent=r.gpu_utilization_percent,
                notes=_notes(r, cat, now),
                trouble=_trouble(r, now),
                straggler=_straggler(r),
            )
            for r in members
        )
        hosts.append(HostBox(host=host, cells=cells, counts=_ordered_counts(c.category for c in cells)))
    return Overview(
        hosts=tuple(hosts),
        counts=_ordered_counts(c.category for h in hosts for c in h.cells),
        rates=rates,
    )
