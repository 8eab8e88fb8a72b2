"""Every run under the runs root, one summary each, fast with thousands (a user keeps months of runs).

A run's :class:`RunSummary` says what the runs browser (``runs`` and the window's Runs page)
shows: name, cluster file, start, duration, outcome, roles, backend, last/best loss, restarts,
checkpoints, and what each training role did over the run's last 30 s
(:class:`~core.telemetry.step_window.StepSums`), of which :func:`core.views.rates.summary_rates` makes its global steps/s, batches/s and examples/s. Building it reads the run's journal and every role's ``metrics.jsonl`` (or, for a
trainer that reports only through TensorBoard, the loss tags of its ``scalars.jsonl``), so it is cached
in ``summary.json`` in the run directory: written (atomically) when the launch session finishes
the run (:func:`write_summary`, called from :meth:`core.controller.session.LaunchSession.close`), and rebuilt
lazily the first time an older run, or one whose launcher died, is listed once it is over. A
listing then reads one small file per finished run and never its telemetry.

A run that is not over (``run.json`` state other than ``done``) is never cached: its outcome is
``running`` while a launcher holds it and ``left`` when nobody does (:func:`core.run.rundir.launcher_alive`), and
its losses and speed come from the last :data:`LIVE_TAIL_BYTES` of each role's metrics only.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.cluster.batch_size import batch_sizes
from core.cluster.hyperparams import hyperparameters
from core.cluster.render import role_dir
from core.cluster.spec import ClusterSpec
from core.run import journal
from core.run.checkpoints import run_checkpoints
from core.run.rundir import RUN_FILE, created_time, launcher_alive, read_run_json, read_run_spec
from core.telemetry.checkpoints import Checkpoint
from core.telemetry.loss_tags import is_loss_tag
from core.telemetry.step_window import StepSums, StepWindow
from core.telemetry.worker_stats import printed_step_time

if TYPE_CHECKING:  # core.run.leftover imports the agent's modules: not for every listing
    from core.run.leftover import Agent

SUMMARY_FILE = "summary.json"
SUMMARY_VERSION = 5  # 2: the rates' windows (step_window, batch_size, strategy) instead of a mean steps/s; 3: and the run's checkpoints; 4: and its hyperparameters; 5: telemetry files may be compact (core/run/compact.py), which a version-4 reader skips
SUMMARY_CHECKPOINTS = 100  # the newest checkpoints a summary lists (ctl RUN checkpoints lists them all)
LIVE_TAIL_BYTES = 256 * 1024
ARCHIVE_DIR = "archived"  # under the runs root; it holds no run.json, so listings skip it
OUTCOMES = ("succeeded", "failed", "stopped", "running", "left")


@dataclass(frozen=True)
class RoleFigures:
    """One role's end: final state, exit code (or ``signal N``), restarts, its training figures,
    its last 30 s of steps (the run's window) and its batch size."""

    state: str = "?"
    exit: str = "-"
    restarts: int = 0
    last_loss: float | None = None
    best_loss: float | None = None
    steps: int | None = None
    window: StepSums | None = None
    batch_size: int | None = None


@dataclass(frozen=True)
class RunSummary:
    """What the runs browser shows of one run; ``outcome`` is one of :data:`OUTCOMES`."""

    path: Path
    id: str  # the run's folder name: what `runs` shows and `attach`/`runs compare` take
    name: str
    cluster_file: str
    created: float
    ended: float | None
    outcome: str
    outcome_detail: str  # "worker:1 exit 3" for a failed run, the launcher's pid for a live one
    reason: str
    roles: tuple[str, ...]
    backend: str  # "local", "SSH a, b", "Slurm job 123"
    last_loss: float | None
    best_loss: float | None
    restarts: int
    role_figures: dict[str, RoleFigures] = field(default_factory=dict)
    strategy: str = "between_graph"  # how its trainers replicate: what their printed steps mean
    # run.json's id where it differs from the folder's name (a copied or renamed run folder), else "".
    recorded_id: str = ""
    # Where the run's checkpoints are and the newest of them (core.run.checkpoints.RunCheckpoints.to_json).
    checkpoints: dict[str, Any] = field(default_factory=dict)
    # The command's flags and the [env] values, label -> value (core.cluster.hyperparams).
    hyperparams: dict[str, str] = field(default_factory=dict)

    @property
    def duration_s(self) -> float | None:
        end = self.ended if self.ended is not None else (time.time() if self.outcome == "running" else None)
        return None if end is None or not self.created else max(0.0, end - self.created)

    @property
    def live(self) -> bool:
        """A launcher holds the run now: it can be reattached to, never deleted."""
        return self.outcome == "running"

    def shape(self) -> str:
        """``1 ps, 2 worker``: the count of roles per job, in launch order."""
        counts: dict[str, int] = {}
        for role in self.roles:
            job = role.split(":")[0]
            counts[job] = counts.get(job, 0) + 1
        return ", ".join(f"{n} {job}" for job, n in counts.items())

    def outcome_text(self) -> str:
        return f"{self.outcome} ({self.outcome_detail})" if self.outcome_detail else self.outcome

    def search_text(self) -> str:
        """What a text filter matches against (case-insensitively)."""
        return " ".join(
            [
                self.id,
                self.recorded_id,
                self.name,
                self.cluster_file,
                self.outcome_text(),
                self.backend,
                self.reason,
                self.shape(),
                *(f"{k}={v}" for k, v in self.hyperparams.items()),
            ]
        ).lower()

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["path"] = str(self.path)
        data["roles"] = list(self.roles)
        data["duration_s"] = self.duration_s
        return data


def duration_text(seconds: float | None) -> str:
    """``1h02m``, ``3m05s``, ``4.2s``; ``-`` when unknown."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def _finite(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _end_time(value: Any) -> float | None:
    """run.json's ``ended``, when it is a time (as ``created`` is, see :func:`created_time`)."""
    ended = _finite(value)
    return ended if ended is not None and created_time(ended) == ended else None


def _role_ends(path: Path) -> tuple[dict[str, dict[str, Any]], str]:
    """Per role, its last journalled state, exit and restarts; and the first failure's text."""
    ends: dict[str, dict[str, Any]] = {}
    first_failure = ""
    tail = journal.JsonlTail(path / journal.EVENTS_FILE)
    while records := tail.read():
        for record in records:
            if record.get("kind") != "role_state" or not isinstance(record.get("role"), str):
                continue
            role = record["role"]
            end = ends.setdefault(role, {"restarts": 0})
            end["state"] = str(record.get("state"))
            if isinstance(record.get("restarts"), int):
                end["restarts"] = max(end["restarts"], record["restarts"])
            if record.get("returncode") is not None:
                end["exit"] = str(record["returncode"])
            elif record.get("signal") is not None:
                end["exit"] = f"signal {record['signal']}"
            if end["state"] == "failed" and not first_failure:
                first_failure = f"{role} {'exit ' + end['exit'] if 'exit' in end else 'failed'}"
    return ends, first_failure


def _tail(path: Path, *, tail_only: bool) -> journal.JsonlTail:
    offset = 0
    if tail_only:
        with contextlib.suppress(OSError):
            offset = max(0, path.stat().st_size - LIVE_TAIL_BYTES)
    return journal.JsonlTail(path, offset)


def training_records(role_path: Path, *, from_scalars: bool, tail_only: bool = False) -> Iterator[dict[str, Any]]:
    """A role's training records (``t``, ``step``, ``loss``, maybe ``step_time_s``), streamed: its
    ``metrics.jsonl`` (parsed from its output), or, ``from_scalars``, the loss tags of its
    ``scalars.jsonl`` (a trainer that reports only through TensorBoard)."""
    tail = _tail(role_path / ("scalars.jsonl" if from_scalars else "metrics.jsonl"), tail_only=tail_only)
    while records := tail.read():
        for r in records:
            if not from_scalars:
                yield r
            elif is_loss_tag(str(r.get("tag", ""))):
                yield {"t": r.get("wall_time"), "step": r.get("step"), "loss": r.get("value")}


def _figures(records: Iterable[dict[str, Any]], window: StepWindow) -> dict[str, Any]:
    """Last and best loss and the last step; the records' steps into ``window``, as the live run's
    were (the same records, taken in the same order by the same code)."""
    last = best = None
    last_step: int | None = None
    for r in records:
        loss = _finite(r.get("loss"))
        if loss is not None:
            last = loss
            best = loss if best is None else min(best, loss)
        window.take(r.get("t"), r.get("step"), printed_step_time(r.get("step_time_s"), r.get("steps_per_sec")))  # type: ignore[arg-type]
        step, t = _finite(r.get("step")), _finite(r.get("t"))
        if step is None or t is None:
            continue
        last_step = int(step)
    return {"last_loss": last, "best_loss": best, "steps": last_step}


def _role_figures(role_path: Path, *, tail_only: bool) -> tuple[dict[str, Any], StepWindow]:
    """From the role's metrics, else from its TensorBoard loss scalars; and its last 30 s of steps."""
    window = StepWindow()
    figures = _figures(training_records(role_path, from_scalars=False, tail_only=tail_only), window)
    if figures["steps"] is None:
        window = StepWindow()
        figures = _figures(training_records(role_path, from_scalars=True, tail_only=tail_only), window)
    return figures, window


def _backend(spec: ClusterSpec | None, info: dict[str, Any]) -> str:
    slurm = info.get("slurm")
    if isinstance(slurm, dict) and slurm.get("job_id"):
        return f"Slurm job {slurm['job_id']}"
    if spec is None:
        return "?"
    if spec.slurm is not None:
        return "Slurm (no job)"
    try:
        hosts = sorted({t.host for t in spec.tasks()})
    except Exception:  # a counted job never placed
        return "?"
    remote = [h for h in hosts if spec.host_config(h).remote]
    return f"SSH {', '.join(remote)}" if remote else "local"


def _checkpoints(path: Path, spec: ClusterSpec | None, created: float) -> dict[str, Any]:
    """The run's checkpoints for its summary: where, how found, the newest :data:`SUMMARY_CHECKPOINTS`."""
    if spec is None:
        return {"directory": None, "checkpoints": [], "problem": "the run's cluster file is unreadable"}
    try:
        data = run_checkpoints(spec, path, since=created - 1.0 if created else None).to_json()
    except Exception as exc:  # a checkpoint directory must never cost the run its row
        return {"directory": None, "checkpoints": [], "problem": f"cannot list checkpoints: {exc}"}
    listed = data.get("checkpoints")
    if isinstance(listed, list) and len(listed) > SUMMARY_CHECKPOINTS:
        data["checkpoints"] = listed[-SUMMARY_CHECKPOINTS:]
    return data


def build(path: Path, info: dict[str, Any] | None = None) -> dict[str, Any]:
    """The cacheable part of a run's summary, read from its files (journal and metrics included)."""
    info = info if info is not None else (read_run_json(path) or {})
    over = info.get("state") == "done"
    spec: ClusterSpec | None = None
    with contextlib.suppress(Exception):  # an unreadable cluster.toml costs the backend column only
        spec, _ = read_run_spec(path)
    roles = [str(r) for r in info.get("roles") or []] or (spec.role_ids() if spec else [])
    ends, first_failure = _role_ends(path)
    sizes: dict[str, int | None] = {}
    with contextlib.suppress(Exception):  # batch sizes only where the command says them
        sizes = dict(batch_sizes(spec)) if spec is not None else {}
    figures: dict[str, dict[str, Any]] = {}
    windows: dict[str, StepWindow] = {}
    for role in roles:
        end = ends.get(role, {})
        metrics, windows[role] = _role_figures(role_dir(path, role), tail_only=not over)
        figures[role] = {
            "state": end.get("state", "?"),
            "exit": end.get("exit", "-"),
            "restarts": int(end.get("restarts", 0)),
            **metrics,
        }
    # The run's window ends at its newest training record, as the live status's did.
    ends_at = [w.last_t for w in windows.values() if w.last_t is not None]
    for role, window in windows.items():
        sums = window.sums(max(ends_at)) if ends_at and window.last_t is not None else None
        figures[role]["window"] = sums.to_json() if sums is not None else None
        figures[role]["batch_size"] = sizes.get(role)
    lasts = [f["last_loss"] for f in figures.values() if f["last_loss"] is not None]
    bests = [f["best_loss"] for f in figures.values() if f["best_loss"] is not None]
    try:
        stat = (path / RUN_FILE).stat()
        key = [stat.st_mtime_ns, stat.st_size]
    except OSError:
        key = None
    return {
        "version": SUMMARY_VERSION,
        "key": key,
        "id": str(info.get("id") or path.name),
        "name": str(info.get("name") or "?"),
        "cluster_file": str(info.get("source") or ""),
        "created": created_time(info.get("created")),
        "ended": _end_time(info.get("ended")),
        "state": str(info.get("state") or "?"),
        "result": info.get("result") if isinstance(info.get("result"), str) else None,
        "reason": str(info.get("reason") or ""),
        "first_failure": first_failure,
        "roles": roles,
        "backend": _backend(spec, info),
        "last_loss": sum(lasts) / len(lasts) if lasts else None,  # the mean of each role's last
        "best_loss": min(bests) if bests else None,
        "restarts": sum(f["restarts"] for f in figures.values()),
        "role_figures": figures,
        "checkpoints": _checkpoints(path, spec, created_time(info.get("created"))),
        "strategy": spec.strategy if spec is not None else "between_graph",
        "hyperparams": hyperparameters(spec) if spec is not None else {},
    }


def _atomic_write(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(data, separators=(",", ":")), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()


def write_summary(path: Path) -> bool:
    """Cache the summary of a run that is over (the session's hook); False when it is not over or
    the directory cannot be written (the listing rebuilds it then)."""
    info = read_run_json(path)
    if info is None or info.get("state") != "done":
        return False
    _atomic_write(path / SUMMARY_FILE, build(path, info))
    return (path / SUMMARY_FILE).is_file()


def _is_text(value: Any) -> bool:
    return isinstance(value, str)


def _is_number(value: Any) -> bool:
    return _finite(value) is not None


def _is_figure(value: Any) -> bool:
    return value is None or _is_number(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_count(value: Any) -> bool:
    return _is_int(value) and value >= 0


def _is_time(value: Any) -> bool:
    return _is_number(value) and created_time(value) == float(value)


# What summary.json holds, field by field: what :func:`build` writes, and nothing else.
_ROLE_FIELDS: dict[str, Callable[[Any], bool]] = {
    "state": _is_text,
    "exit": _is_text,
    "restarts": _is_count,
    "last_loss": _is_figure,
    "best_loss": _is_figure,
    "steps": lambda v: v is None or _is_int(v),
    "window": lambda v: v is None or StepSums.from_json(v) is not None,
    "batch_size": lambda v: v is None or (_is_int(v) and v > 0),
}
_SUMMARY_FIELDS: dict[str, Callable[[Any], bool]] = {
    "version": lambda v: v == SUMMARY_VERSION,
    "key": lambda v: isinstance(v, list) and len(v) == 2 and all(_is_count(n) for n in v),
    "id": _is_text,
    "name": _is_text,
    "cluster_file": _is_text,
    "created": lambda v: v == 0.0 or _is_time(v),
    "ended": lambda v: v is None or _is_time(v),
    "state": _is_text,
    "result": lambda v: v is None or _is_text(v),
    "reason": _is_text,
    "first_failure": _is_text,
    "roles": lambda v: isinstance(v, list) and all(_is_text(r) for r in v),
    "backend": _is_text,
    "last_loss": _is_figure,
    "best_loss": _is_figure,
    "restarts": _is_count,
    "role_figures": lambda v: isinstance(v, dict) and all(_role_figures_problem(f) is None for f in v.values()),
    "checkpoints": lambda v: (
        isinstance(v, dict)
        and isinstance(v.get("checkpoints"), list)
        and all(Checkpoint.from_json(c) is not None for c in v["checkpoints"])
    ),
    "strategy": _is_text,
    "hyperparams": lambda v: isinstance(v, dict) and all(_is_text(k) and _is_text(x) for k, x in v.items()),
}


def _fields_problem(data: dict[str, Any], fields: dict[str, Callable[[Any], bool]]) -> str | None:
    for name, valid in fields.items():
        if name not in data:
            return f"no {name}"
        if not valid(data[name]):
            return f"{name}: {_shown(data[name])} is not what it should be"
    unknown = sorted(str(k) for k in data if k not in fields)
    return f"unknown field {unknown[0]!r}" if unknown else None


def _role_figures_problem(value: Any) -> str | None:
    return _fields_problem(value, _ROLE_FIELDS) if isinstance(value, dict) else "not an object"


def _shown(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:39] + "…"


def summary_problem(data: Any) -> str | None:
    """Why ``data`` (a parsed summary.json) is not a summary :func:`build` wrote, e.g.
    ``restarts: "abc" is not what it should be``; None when every field is what it should be. A
    cache written by this code never fails it, so one that does is damage (or a hand edit), and is
    rebuilt from the run."""
    if not isinstance(data, dict):
        return "not a JSON object"
    try:
        return _fields_problem(data, _SUMMARY_FIELDS)
    except RecursionError:  # json.dumps of a deeply nested value
        return "nested too deeply"


def _cached(path: Path) -> dict[str, Any] | None:
    """The cached summary while it still describes run.json (same mtime and size) and every field
    is what :func:`build` writes, else None (the caller rebuilds it from the run)."""
    try:
        data = json.loads((path / SUMMARY_FILE).read_text(encoding="utf-8"))
        stat = (path / RUN_FILE).stat()
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("version") != SUMMARY_VERSION:
        return None
    if data.get("key") != [stat.st_mtime_ns, stat.st_size]:
        return None
    if summary_problem(data) is not None:
        return None
    return data


def _from_data(path: Path, data: dict[str, Any], info: dict[str, Any] | None) -> RunSummary:
    if data.get("state") == "done":
        result = data.get("result")
        outcome = result if result in ("succeeded", "failed") else "stopped"
        detail = data.get("first_failure", "") if outcome == "failed" else ""
    elif launcher_alive(path, info or {}):
        outcome, detail = "running", f"pid {(info or {}).get('pid')}"
    else:
        outcome, detail = "left", "launcher gone"
    roles = {
        str(k): RoleFigures(**{**v, "window": StepSums.from_json(v.get("window"))})
        for k, v in (data.get("role_figures") or {}).items()
        if isinstance(v, dict)
    }
    recorded = str(data.get("id") or "")
    return RunSummary(
        path=path,
        # A copied or renamed run folder keeps run.json's id: the folder's name tells them apart.
        id=path.name,
        recorded_id=recorded if recorded != path.name else "",
        name=str(data.get("name")),
        cluster_file=str(data.get("cluster_file") or ""),
        created=created_time(data.get("created")),
        ended=data.get("ended"),
        outcome=outcome,
        outcome_detail=str(detail or ""),
        reason=str(data.get("reason") or ""),
        roles=tuple(data.get("roles") or ()),
        backend=str(data.get("backend") or "?"),
        last_loss=data.get("last_loss"),
        best_loss=data.get("best_loss"),
        restarts=int(data.get("restarts") or 0),
        role_figures=roles,
        checkpoints=data["checkpoints"] if isinstance(data.get("checkpoints"), dict) else {},
        strategy=str(data.get("strategy") or "between_graph"),
        hyperparams=dict(data["hyperparams"]) if isinstance(data.get("hyperparams"), dict) else {},
    )


def summarize(path: Path, *, use_cache: bool = True) -> RunSummary | None:
    """One run's summary: the cache when valid; else built (and cached once the run is over).
    None when ``path`` holds no readable run.json."""
    if use_cache and (data := _cached(path)) is not None:
        return _from_data(path, data, None)
    info = read_run_json(path)
    if info is None:
        return None
    try:
        data = build(path, info)
    except Exception as exc:  # one damaged run lists as such, and never hides the others
        data = {"id": path.name, "name": str(info.get("name") or "?"), "state": "?", "reason": f"unreadable: {exc}"}
    if use_cache and info.get("state") == "done":
        _atomic_write(path / SUMMARY_FILE, data)
    return _from_data(path, data, info)


def list_summaries(root: Path, *, use_cache: bool = True, workers: int = 4) -> list[RunSummary]:
    """Every run under ``root``, newest first. Summaries that must be rebuilt are built on a few
    threads (the work is file reading)."""
    if not root.is_dir():
        return []
    paths = [p for p in root.iterdir() if p.is_dir() and p.name != ARCHIVE_DIR]
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        found = [s for s in pool.map(lambda p: summarize(p, use_cache=use_cache), paths) if s is not None]
    return sorted(found, key=lambda s: s.created, reverse=True)


class RunBusyError(Exception):
    """Something of the run still runs: its launcher, or (no launcher holding it) its roles or
    agents. ``forceable``: only roles on hosts that cannot be checked from here may run, and the
    user may say they do not (``force=True``)."""

    def __init__(self, message: str, *, forceable: bool = False) -> None:
        super().__init__(message)
        self.forceable = forceable


def _refuse_live(path: Path, *, force: bool) -> tuple[Agent, ...]:
    """Raise :class:`RunBusyError` while something of the run runs; else the run's agents that
    run nothing any more (they wait for a reattach), for the caller to stop or leave."""
    from core.run import leftover

    info = read_run_json(path) or {}
    if launcher_alive(path, info):
        raise RunBusyError(
            f"run {path.name} is still running (launcher pid {info.get('pid')}); stop it first, then delete it"
        )
    if info.get("state") == "done":  # its launcher saw every role end (a damaged run.json says nothing)
        return ()
    left = leftover.find(path, info)
    if left.runs_here or (left.elsewhere and not force):
        raise RunBusyError(leftover.busy_message(path, left), forceable=not left.runs_here)
    return left.idle_agents


def delete_run(path: Path, *, force: bool = False) -> None:
    """Remove a run directory. Raises :class:`RunBusyError` while its launcher holds it, or, with
    no launcher, while a role or an agent with a role still runs (on a host that cannot be checked
    from here: unless ``force``); OSError on failure. An agent that runs nothing any more, waiting
    for a reattach, is stopped first: once the folder is gone nothing could reach it."""
    from core.run import leftover

    idle = _refuse_live(path, force=force)
    if idle:
        still = leftover.stop_agents(idle, path / "agents")
        if still:
            raise RunBusyError(f"run {path.name}: its agent {', '.join(still)} did not stop; the run is kept")
    shutil.rmtree(path)


def archive_run(path: Path, *, force: bool = False) -> Path:
    """Move a run under ``<runs root>/archived/`` (out of listings, kept on disk); raises
    :class:`RunBusyError` as :func:`delete_run` does. An idle agent is left to end by itself: its
    files move with the run."""
    _refuse_live(path, force=force)
    target = path.parent / ARCHIVE_DIR / path.name
    target.parent.mkdir(exist_ok=True)
    os.replace(path, target)
    return target
