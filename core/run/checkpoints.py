"""Where a run's trainers write their checkpoints, and what is there now.

The directory is, in this order:

1. the cluster file's ``[recovery] checkpoint_dir`` (relative to ``workdir``; ``{run_dir}`` allowed);
2. a ``--checkpoint_dir``-style flag in a role's command (``--checkpoint_dir``, ``--ckpt_dir``,
   ``--model_dir``, ``--backup_dir``, ``--train_dir``, with ``-`` or ``_``; ``--flag=DIR`` or
   ``--flag DIR``), the chief's first (it is the role that saves), relative to its working directory;
3. else the folder of a ``checkpoint`` state file that appeared under the workdir or the run
   directory since the run began (a bounded look, :func:`search_state_file`).

The first two are known at launch; the third is looked for again from time to time while nothing
is found. The listing itself is :func:`core.telemetry.checkpoints.read_listing`.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from core.cluster.roles import chief_of
from core.cluster.spec import ClusterSpec, Task
from core.run.rundir import read_run_json, read_run_spec
from core.telemetry.checkpoints import STATE_FILE, CheckpointListing, read_listing

CHECKPOINT_FLAGS = ("checkpoint_dir", "ckpt_dir", "model_dir", "backup_dir", "train_dir")
SEARCH_DEPTH = 3  # folders below the workdir or the run directory looked into for a state file
SEARCH_ENTRIES = 5000  # entries looked at in all, per search: a workdir may be a whole repository
SKIPPED_FOLDERS = frozenset({".git", "__pycache__", ".venv", "venv", "node_modules", "roles", "telemetry"})


@dataclass(frozen=True)
class CheckpointSource:
    """Where a run's checkpoints are, and how that was found (``how``: ``[recovery] checkpoint_dir``,
    ``chief:0's --checkpoint_dir``, ``a checkpoint file under the workdir``). ``remote_host``: the
    SSH host whose filesystem holds it (it is not listed from here)."""

    directory: Path
    how: str
    remote_host: str | None = None

    def words(self) -> str:
        where = f" on {self.remote_host}" if self.remote_host else ""
        return f"{self.directory}{where} (from {self.how})"


def _flag_value(argv: tuple[str, ...] | list[str]) -> tuple[str, str] | None:
    """The first checkpoint-directory flag in ``argv``: (flag, value)."""
    for i, arg in enumerate(argv):
        if not arg.startswith("--"):
            continue
        name, eq, value = arg[2:].partition("=")
        if name.replace("-", "_") not in CHECKPOINT_FLAGS:
            continue
        if not eq:
            if i + 1 >= len(argv) or argv[i + 1].startswith("--"):
                continue
            value = argv[i + 1]
        if value:
            return f"--{name}", value
    return None


def _fill(text: str, task: Task | None, run_dir: Path | None) -> str:
    values = {"{run_dir}": str(run_dir) if run_dir is not None else "<run-dir>"}
    if task is not None:
        values |= {"{job_name}": task.job, "{task_index}": str(task.index), "{role}": task.role_id}
    for key, value in values.items():
        text = text.replace(key, value)
    return text


def _absolute(text: str, base: Path) -> Path:
    path = Path(os.path.expanduser(text))
    return path if path.is_absolute() else base / path


def _ordered_tasks(spec: ClusterSpec) -> list[Task]:
    """The chief first (the role that saves), then the others in launch order."""
    tasks = spec.explicit_tasks()
    chief = chief_of(t.role_id for t in tasks)
    return sorted(tasks, key=lambda t: t.role_id != chief)


def declared_source(spec: ClusterSpec, run_dir: Path | None) -> CheckpointSource | None:
    """The checkpoint directory the cluster file says: its ``[recovery] checkpoint_dir``, else a
    checkpoint-directory flag in a role's command (the chief's first). None when neither says."""
    key = spec.recovery.checkpoint_dir
    if key:
        return CheckpointSource(_absolute(_fill(key, None, run_dir), spec.workdir), "[recovery] checkpoint_dir")
    for task in _ordered_tasks(spec):
        found = _flag_value(spec.command_for(task))
        if found is None:
            continue
        flag, value = found
        host = spec.host_config(task.host)
        workdir = Path(host.workdir) if host.remote and host.workdir else spec.workdir
        directory = _absolute(_fill(value, task, run_dir), workdir)
        return CheckpointSource(directory, f"{task.role_id}'s {flag}", host.address if host.remote else None)
    return None


def search_state_file(roots: list[Path], *, since: float | None) -> Path | None:
    """The newest ``checkpoint`` state file (a regular file, modified at or after ``since``) within
    :data:`SEARCH_DEPTH` folders of ``roots``, looking at :data:`SEARCH_ENTRIES` entries at most.
    Symbolic links, hidden folders and :data:`SKIPPED_FOLDERS` are not entered."""
    best: tuple[float, Path] | None = None
    budget = SEARCH_ENTRIES
    queue: list[tuple[Path, int]] = [(root, 0) for root in roots]
    while queue and budget > 0:
        folder, depth = queue.pop(0)
        with contextlib.suppress(OSError), os.scandir(folder) as entries:
            for entry in entries:
                budget -= 1
                if budget <= 0:
                    break
                with contextlib.suppress(OSError):
                    if entry.name == STATE_FILE:
                        info = entry.stat(follow_symlinks=False)
                        fresh = since is None or info.st_mtime >= since
                        if stat.S_ISREG(info.st_mode) and fresh and (best is None or info.st_mtime > best[0]):
                            best = (info.st_mtime, Path(entry.path))
                    elif (
                        depth < SEARCH_DEPTH
                        and not entry.name.startswith(".")
                        and entry.name not in SKIPPED_FOLDERS
                        and entry.is_dir(follow_symlinks=False)
                    ):
                        queue.append((Path(entry.path), depth + 1))
    return best[1] if best is not None else None


def searched_source(spec: ClusterSpec, run_dir: Path | None, *, since: float | None) -> CheckpointSource | None:
    """The folder of a state file that appeared under the workdir or the run directory since
    ``since`` (:func:`search_state_file`); None when there is none."""
    roots = [spec.workdir, *([run_dir] if run_dir is not None else [])]
    found = search_state_file(roots, since=since)
    if found is None:
        return None
    under = "the run directory" if run_dir is not None and found.is_relative_to(run_dir) else "the workdir"
    return CheckpointSource(found.parent, f"a checkpoint file under {under}")


def where_looked(spec: ClusterSpec, run_dir: Path | None) -> str:
    """Where checkpoints were looked for when none were found, in words."""
    source = declared_source(spec, run_dir)
    if source is not None:
        return source.words()
    places = f"{spec.workdir}" + (f" and {run_dir}" if run_dir is not None else "")
    return f"no checkpoint_dir key nor --checkpoint_dir-style flag; no checkpoint file under {places}"


@dataclass(frozen=True)
class RunCheckpoints:
    """A run's checkpoints as ``ctl RUN checkpoints`` and ``runs --json`` show them: where they are
    (None when not found: ``looked`` says where it looked) and the listing."""

    source: CheckpointSource | None
    listing: CheckpointListing | None
    looked: str = ""

    def to_json(self) -> dict[str, object]:
        listing = self.listing.to_json() if self.listing is not None else {"checkpoints": [], "problem": ""}
        return {
            **listing,
            "directory": str(self.source.directory) if self.source is not None else None,
            "found_from": self.source.how if self.source is not None else None,
            "remote_host": self.source.remote_host if self.source is not None else None,
            "looked": self.looked,
        }


def run_checkpoints(spec: ClusterSpec, run_dir: Path, *, since: float | None) -> RunCheckpoints:
    """The checkpoints of the run in ``run_dir`` launched as ``spec`` at ``since``."""
    source = declared_source(spec, run_dir) or searched_source(spec, run_dir, since=since)
    if source is None:
        return RunCheckpoints(None, None, where_looked(spec, run_dir))
    if source.remote_host is not None:
        problem = f"the checkpoints are on {source.remote_host}; they are not listed from this machine"
        return RunCheckpoints(source, CheckpointListing(str(source.directory), problem=problem))
    return RunCheckpoints(source, read_listing(source.directory))


def read_run_checkpoints(path: Path) -> RunCheckpoints:
    """The checkpoints of the run directory ``path`` (its cluster.toml and start time); raises
    ValueError (one line) when its cluster file cannot be read."""
    spec, problems = read_run_spec(path)
    if spec is None:
        first = problems[0].format() if problems else "unreadable"
        raise ValueError(f"cannot read the run's cluster file ({first})")
    info = read_run_json(path) or {}
    created = info.get("created")
    since = float(created) - 1.0 if isinstance(created, (int, float)) and not isinstance(created, bool) else None
    return run_checkpoints(spec, path, since=since if since is not None and since < time.time() else None)
