"""What a captured profile says, per role and side by side.

xprof (in the profiler environment) turns each role's ``.xplane.pb`` into Google Charts data tables;
this module reads two of them: ``overview_page`` (the step table: each step's time and where it
went, and xprof's bottleneck statement) and ``framework_op_stats`` (TensorFlow ops by self time).
Step times exist only where the trainer marks its steps
(``tf.profiler.experimental.Trace('train', step_num=s, _r=1)``).

A role's breakdown is where the mean step's time went, with one adjustment (:func:`with_input_ops`):
on a CPU-only host xprof's step table counts no input time, and a step waiting for its tf.data
pipeline counts as "other"; there the self time of tf.data's op types is counted as input. Every
view of a capture shows this one breakdown (:mod:`core.profiling.breakdown` computes it once and
keeps it in the capture's ``profile.json``). xprof's own sentence on the bottleneck is shown as
xprof's, and only where it agrees with the breakdown (:func:`xprof_advice`).
"""

from __future__ import annotations

import html
import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from core.profiling.env import ProfileError, run_worker

TOP_OPS = 8
OTHER_PART = "other: Python, I/O, waiting"
# Where a step's time went: our name, and the step table's columns summed into it.
BREAKDOWN: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("input", ("infeedTimeMs",)),
    ("host compute", ("hostComputeTimeMs",)),
    ("device compute", ("deviceComputeTimeMs",)),
    ("communication", ("deviceToDeviceTimeMs", "deviceCollectivesTimeMs")),
    ("kernel launch", ("kernelLaunchTimeMs",)),
    ("compile", ("compileTimeMs",)),
    ("output", ("outfeedTimeMs",)),
    (OTHER_PART, ("otherTimeMs",)),
)
ALWAYS_SHOWN = ("input", "host compute", "device compute", "communication")
# tf.data's op types: their self time is the step's wait for input where the step table counts none.
INPUT_OP_TYPES = ("Dataset", "IteratorGetNext", "IteratorGetNextSync", "IteratorGetNextAsOptional")
# Op self times are summed over every thread of the process: tf.data's parallel map and prefetch
# threads, the inter-op pool. A user reading "Dataset 93 ms/step" beside a 51 ms step needs this.
OPS_HEADING = "top op types by self time"
OPS_NOTE = "summed over threads: can exceed the step"
# A step is input-bound from this share in input: xprof's own "HIGHLY input-bound" threshold (its
# "moderately", 5%, would call a healthy worker whose tf.data takes 1 ms of 19 input-bound).
INPUT_BOUND_SHARE = 0.2
DIFFERENCE_RATIO = 2.0  # "the same op taking 2x on one worker"
DIFFERENCE_FLOOR_MS = 0.05  # below this, a ratio is noise


@dataclass(frozen=True)
class OpTime:
    """One TensorFlow op type's self time over the capture, all ops of that type together."""

    op_type: str
    occurrences: int
    self_time_ms: float


@dataclass(frozen=True)
class RoleProfile:
    """One role's profile: its steps, where their time went, the bottleneck, the top ops."""

    role: str
    step_times_ms: tuple[float, ...] = ()
    breakdown_ms: Mapping[str, float] = field(default_factory=dict)  # mean per step
    bottleneck: str = ""  # xprof's sentence (TowerDeck's note when no step was marked)
    top_ops: tuple[OpTime, ...] = ()
    errors: tuple[str, ...] = ()
    input_from_ops_ms: float = 0.0  # tf.data's time per step moved from "other" to "input"

    @property
    def steps(self) -> int:
        return len(self.step_times_ms)

    @property
    def mean_step_ms(self) -> float | None:
        return statistics.fmean(self.step_times_ms) if self.step_times_ms else None

    @property
    def median_step_ms(self) -> float | None:
        return statistics.median(self.step_times_ms) if self.step_times_ms else None

    def op_ms(self, op_type: str) -> float:
        """An op type's self time per step (per capture without step markers), summed over threads."""
        total = sum(o.self_time_ms for o in self.top_ops if o.op_type == op_type)
        return total / self.steps if self.steps else total

    def share(self, part: str) -> float | None:
        """``part``'s share of the mean step (0..1), None without steps."""
        step = self.mean_step_ms
        return self.breakdown_ms.get(part, 0.0) / step if step else None

    def to_json(self) -> dict[str, Any]:
        """This profile as stored with its capture (:func:`from_json` reads it back)."""
        return {
            "role": self.role,
            "step_times_ms": list(self.step_times_ms),
            "breakdown_ms": dict(self.breakdown_ms),
            "bottleneck": self.bottleneck,
            "top_ops": [[o.op_type, o.occurrences, o.self_time_ms] for o in self.top_ops],
            "errors": list(self.errors),
            "input_from_ops_ms": self.input_from_ops_ms,
        }

    @classmethod
    def from_json(cls, data: Any) -> RoleProfile:
        """A stored profile; ValueError (what is wrong) when ``data`` is not one."""
        if not isinstance(data, dict) or not isinstance(data.get("role"), str):
            raise ValueError("a role's profile has no role name")
        try:
            return cls(
                role=data["role"],
                step_times_ms=tuple(_finite(t) for t in data["step_times_ms"]),
                breakdown_ms={str(k): _finite(v) for k, v in dict(data["breakdown_ms"]).items()},
                bottleneck=str(data["bottleneck"]),
                top_ops=tuple(OpTime(str(t), int(n), _finite(ms)) for t, n, ms in data["top_ops"]),
                errors=tuple(str(e) for e in data["errors"]),
                input_from_ops_ms=_finite(data["input_from_ops_ms"]),
            )
        except KeyError as exc:
            raise ValueError(f"{data['role']}'s profile has no {exc} field") from None
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{data['role']}'s profile is damaged ({exc})") from None


def _finite(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{value!r} is not a number")
    return float(value)


def with_input_ops(profile: RoleProfile) -> RoleProfile:
    """``profile`` with its tf.data time counted as input where the step table counted none: on a
    CPU-only host xprof counts a step's wait for its tf.data pipeline as "other". The self time of
    tf.data's op types per step, up to the step's "other" time, is moved from "other" to "input"
    (and noted in ``input_from_ops_ms``). A profile adjusted already, or with input of its own, is
    returned as it is."""
    breakdown = dict(profile.breakdown_ms)
    if not profile.steps or breakdown.get("input", 0.0) > 0:
        return profile
    waited = min(sum(profile.op_ms(t) for t in INPUT_OP_TYPES), breakdown.get(OTHER_PART, 0.0))
    if waited <= 0:
        return profile
    breakdown["input"] = waited
    breakdown[OTHER_PART] = breakdown.get(OTHER_PART, 0.0) - waited
    return replace(profile, breakdown_ms=breakdown, input_from_ops_ms=waited)


def xprof_advice(profile: RoleProfile) -> str | None:
    """xprof's sentence on the bottleneck when the breakdown agrees with it, else None. xprof judges
    input from its step table alone: on a CPU-only host it calls every worker "POTENTIALLY
    input-bound" (the wait for tf.data counted as "All Others"), the healthy one too. Only its
    verdict on input can be checked against the breakdown; a sentence on anything else is not shown."""
    statement = profile.bottleneck
    share = profile.share("input")
    if share is None or "input-bound" not in statement:
        return None
    says_input_bound = "NOT input-bound" not in statement
    return statement if says_input_bound == (share >= INPUT_BOUND_SHARE) else None


def largest_part(profile: RoleProfile) -> tuple[str, float] | None:
    """The part of a step that took the most time, with its ms per step; None without steps."""
    if not profile.steps or not profile.breakdown_ms:
        return None
    name = max(profile.breakdown_ms, key=lambda n: profile.breakdown_ms[n])
    return name, profile.breakdown_ms[name]


def role_notes(profile: RoleProfile) -> list[str]:
    """What is said of one role under the table, in the CLI and the Profile tab alike: where most
    of its step went (the breakdown's own words), then xprof's advice, as xprof's, where the
    breakdown agrees with it; a capture without step markers says so."""
    if not profile.steps:
        lines = [f"{profile.role}: {profile.bottleneck or 'no steps in this capture'}"]
    else:
        lines = []
        found = largest_part(profile)
        if found is not None:
            name, ms = found
            share = 100 * (profile.share(name) or 0.0)
            lines.append(f"{profile.role}: {share:.0f}% of a step is {name} ({ms:.2f} ms)")
        if (advice := xprof_advice(profile)) is not None:
            lines.append(f"{profile.role}: xprof says: {advice}")
    lines.extend(f"{profile.role}: could not read {e}" for e in profile.errors)
    return lines


def _cell(row: Any, i: int) -> Any:
    cells = row.get("c") if isinstance(row, dict) else None
    if not isinstance(cells, list) or i >= len(cells) or not isinstance(cells[i], dict):
        return None
    return cells[i].get("v")


def _columns(table: Any) -> list[str]:
    return [str(c.get("id")) for c in table.get("cols", []) if isinstance(c, dict)] if isinstance(table, dict) else []


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) else 0.0


def _plain(text: str) -> str:
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", "", text))).strip()


def parse(role: str, tables: Mapping[str, Any]) -> RoleProfile:
    """One role's profile from xprof's ``overview_page`` and ``framework_op_stats`` tables."""
    overview = tables.get("overview_page") or []
    steps: list[float] = []
    sums = {name: 0.0 for name, _ in BREAKDOWN}
    bottleneck = ""
    for table in overview if isinstance(overview, list) else []:
        cols = _columns(table)
        props = table.get("p") if isinstance(table, dict) else None
        if isinstance(props, dict) and props.get("statement") and not bottleneck:
            bottleneck = _plain(str(props["statement"]))
        if "stepTimeMs" not in cols or steps:
            continue
        index = {c: i for i, c in enumerate(cols)}
        for row in table.get("rows", []):
            steps.append(_number(_cell(row, index["stepTimeMs"])))
            for name, parts in BREAKDOWN:
                sums[name] += sum(_number(_cell(row, index[p])) for p in parts if p in index)
        if not bottleneck and isinstance(props, dict):
            bottleneck = _plain(str(props.get("input_conclusion") or ""))
    breakdown = {name: total / len(steps) for name, total in sums.items()} if steps else {}
    return RoleProfile(
        role=role,
        step_times_ms=tuple(steps),
        breakdown_ms=breakdown,
        bottleneck=bottleneck
        if steps
        else "no steps were marked in this capture (docs/guide/profiling.md: step markers)",
        top_ops=_top_ops(tables.get("framework_op_stats")),
        errors=tuple(str(e) for e in tables.get("errors") or ()),
    )


def _top_ops(stats: Any) -> tuple[OpTime, ...]:
    """The op types with the most self time: by type, since one graph's op names differ between
    roles and a type (MatMul, the dataset iterator) is what a user compares."""
    by_type: dict[str, list[float]] = {}
    for table in stats if isinstance(stats, list) else []:
        index = {c: i for i, c in enumerate(_columns(table))}
        if not {"total_self_time", "type"} <= index.keys():
            continue
        for row in table.get("rows", []):
            op_type = str(_cell(row, index["type"]) or "")
            if op_type in ("IDLE", ""):
                continue
            seen = by_type.setdefault(op_type, [0.0, 0.0])
            seen[0] += _number(_cell(row, index["occurrences"])) if "occurrences" in index else 0.0
            seen[1] += _number(_cell(row, index["total_self_time"])) / 1000.0  # µs in the table
        break  # the first table is the whole capture; a second repeats it without IDLE
    ops = [OpTime(op_type, int(n), ms) for op_type, (n, ms) in by_type.items()]
    ops.sort(key=lambda o: o.self_time_ms, reverse=True)
    return tuple(ops[:TOP_OPS])


def summarize(xplanes: Mapping[str, Path], timeout_s: float = 120.0) -> list[RoleProfile]:
    """Each role's profile, computed in the profiler environment; raises ProfileError, naming each
    role whose file is missing, unreadable or not a capture (xprof itself reads such a file as an
    empty profile: "0 steps")."""
    if not xplanes:
        return []
    damaged = [problem for role, path in xplanes.items() if (problem := _file_problem(role, path))]
    if damaged:
        raise ProfileError("; ".join(damaged))
    done = run_worker("tables", *(str(p.absolute()) for p in xplanes.values()), timeout_s=timeout_s)
    if done.returncode is None:
        raise ProfileError(f"summarising the profile took longer than {timeout_s:g} s; it was stopped")
    if not isinstance(done.reply, dict):
        last = next((line for line in reversed(done.stderr.splitlines()) if line.strip()), "no output")
        raise ProfileError(f"the profiler environment failed to read the profile (exit {done.returncode}): {last}")
    tables = {role: done.reply.get(str(path.absolute())) or {} for role, path in xplanes.items()}
    damaged = [
        f"{role}'s capture {xplanes[role]} {t['unreadable']}" for role, t in tables.items() if t.get("unreadable")
    ]
    if damaged:
        raise ProfileError("; ".join(damaged))
    return [parse(role, t) for role, t in tables.items()]


def _file_problem(role: str, path: Path) -> str | None:
    """Why ``role``'s xplane cannot be read here (missing, not a file, no permission), or None."""
    try:
        with open(path, "rb"):
            return None
    except FileNotFoundError:
        return f"{role}'s capture {path} is missing"
    except IsADirectoryError:
        return f"{role}'s capture {path} is a folder, not a capture file"
    except OSError as exc:
        return f"{role}'s capture {path} is unreadable: {exc.strerror or exc}"


# ------------------------------------------------------------------------------------------ text


def _fmt(ms: float | None) -> str:
    return "-" if ms is None else f"{ms:.2f}"


@dataclass(frozen=True)
class Row:
    """One row of the side-by-side table: a figure per role (``values`` None: a section heading),
    and the role that stands out on it (``DIFFERENCE_RATIO`` times another's) with the words."""

    label: str
    values: tuple[float | None, ...] | None = None
    stands_out: str | None = None  # the role
    mark: str = ""  # "2.4x on worker:1", "mainly on worker:1"


def difference(values: Sequence[float | None], roles: Sequence[str]) -> tuple[str, str] | None:
    """(role, "2.4x on worker:1") when one role's value is DIFFERENCE_RATIO times another's. Roles are
    compared within their job where a job has two or more here (a ps differs from a worker by
    design), across all roles otherwise."""
    known = [(v, r) for v, r in zip(values, roles, strict=True) if v is not None]
    jobs: dict[str, list[tuple[float, str]]] = {}
    for v, r in known:
        jobs.setdefault(r.split(":")[0], []).append((v, r))
    groups = [g for g in jobs.values() if len(g) >= 2] or ([known] if len(known) >= 2 else [])
    best: tuple[float, str, str] | None = None
    for group in groups:
        high, high_role = max(group)
        low = min(v for v, _ in group)
        if high < DIFFERENCE_FLOOR_MS or high < DIFFERENCE_RATIO * low:
            continue
        ratio = high / low if low >= 0.005 else float("inf")  # 0.00 as printed: no ratio to give
        if best is None or ratio > best[0]:
            words = f"mainly on {high_role}" if ratio == float("inf") else f"{ratio:.1f}x on {high_role}"
            best = (ratio, high_role, words)
    return None if best is None else (best[1], best[2])


def table_rows(profiles: Sequence[RoleProfile]) -> list[Row]:
    """The side-by-side table after the steps row, as both the CLI and the window's Profile tab
    show it: step times, where a step's time went, the top op types; differences marked."""
    roles = [p.role for p in profiles]

    def row(label: str, values: Sequence[float | None]) -> Row:
        found = difference(values, roles)
        return Row(label, tuple(values), *(found if found is not None else (None, "")))

    rows = [
        row("step time, mean (ms)", [p.mean_step_ms for p in profiles]),
        row("step time, median (ms)", [p.median_step_ms for p in profiles]),
        Row("where a step's time went (ms/step)"),
    ]
    for name, _ in BREAKDOWN:
        values = [p.breakdown_ms.get(name) for p in profiles]
        if name in ALWAYS_SHOWN or any(v for v in values):
            rows.append(row(name, values))
    ops = list(dict.fromkeys(o.op_type for p in profiles for o in p.top_ops))
    if ops:
        per = "ms/step" if all(p.steps for p in profiles) else "ms in capture"
        rows.append(Row(f"{OPS_HEADING} ({per}, {OPS_NOTE})"))
        rows += [row(op, [p.op_ms(op) if p.top_ops else None for p in profiles]) for op in ops[: TOP_OPS + 4]]
    return rows


def input_note(profiles: Sequence[RoleProfile]) -> str | None:
    """Whose input is tf.data's op time (:func:`with_input_ops`), in one line; None when no
    role's is. A user who opens the capture in TensorBoard sees xprof count no input there."""
    counted = [p.role for p in profiles if p.input_from_ops_ms > 0]
    if not counted:
        return None
    return (
        f"input of {', '.join(counted)}: the time of tf.data's ops ({', '.join(INPUT_OP_TYPES[:2])}...), "
        "which xprof's step table counts as other on a CPU-only host"
    )


def profile_notes(profiles: Sequence[RoleProfile]) -> list[str]:
    """What is said under the table, in the CLI and the Profile tab alike: where input was counted
    from tf.data's ops, then each role's notes (:func:`role_notes`)."""
    note = input_note(profiles)
    return [*([note] if note else []), *(line for p in profiles for line in role_notes(p))]


def format_profiles(profiles: Sequence[RoleProfile]) -> list[str]:
    """Text for the CLI: one column per role, differences of 2x or more marked, then what is said
    under it (:func:`profile_notes`)."""
    if not profiles:
        return []
    roles = [p.role for p in profiles]
    width = max(12, *(len(r) + 2 for r in roles))
    label_width = 40
    lines = [f"{'':<{label_width}}" + "".join(f"{r:>{width}}" for r in roles)]
    lines.append(f"{'steps captured':<{label_width}}" + "".join(f"{p.steps:>{width}}" for p in profiles))
    for r in table_rows(profiles):
        if r.values is None:
            lines.append(f"{r.label}:")
            continue
        label = r.label if r.label.startswith("step time") else f"  {r.label[: label_width - 3]}"
        cells = "".join(f"{_fmt(v):>{width}}" for v in r.values)
        lines.append(f"{label:<{label_width}}{cells}{f'  <- {r.mark}' if r.mark else ''}")
    lines.extend(profile_notes(profiles))
    return lines
