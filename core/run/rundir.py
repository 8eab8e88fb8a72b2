"""The run directory: everything a launch leaves behind, readable after the fact.

Layout (documented in docs/guide/run-directory.md)::

    <runs root>/<run id>/
        run.json            id, name, times, state, result, the control socket
        cluster.toml        the cluster as launched (defaults filled in)
        events.jsonl        the journal, one JSON object per line: role state changes with pid,
                            exit code or signal, stalls, cluster phases, host states, warnings,
                            users' commands; no telemetry (see core/run/journal.py)
        agent-<host>.log    the host agent's own diagnostics
        telemetry/samples-<host>.jsonl  every sample of host, role and GPU figures
        roles/<job>-<index>/
            attempt-<n>.log complete stdout+stderr of attempt n, written by the role itself
            metrics.jsonl   step, loss, step time parsed from its output
            parsed.json     {attempt, end}: the log's byte offset parsed so far (reattach resumes there)
            scalars.jsonl   TensorBoard scalars (tag, step, wall_time, value) from its event files
            tensorboard/    TOWERDECK_TB_DIR: where the example trainers write event files
"""

from __future__ import annotations

import json
import math
import os
import secrets
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.cluster.problems import Problem
from core.cluster.render import role_dir
from core.cluster.spec import ClusterSpec, Task, dumps, load
from core.run import compact, journal
from core.run.lock import LOCK_FILE, holder
from core.run.openfiles import OpenFiles

RUN_FILE = "run.json"
SPEC_FILE = "cluster.toml"
MAX_CREATED = 32503680000.0  # year 3000: past it a "created" time is damage, not a date
PARSED_FILE = "parsed.json"  # roles/<role>/: how far its output was parsed into metrics.jsonl
PARSED_WIDTH = 64  # parsed.json's record, padded with blanks: rewritten in place, never shorter


def runs_root() -> Path:
    """Where runs go: $TOWERDECK_DATA_DIR/runs, else the user data dir from platformdirs."""
    override = os.environ.get("TOWERDECK_DATA_DIR")
    if override:
        return Path(override).expanduser() / "runs"
    import platformdirs

    return Path(platformdirs.user_data_dir("towerdeck", appauthor=False)) / "runs"


def _slug(name: str) -> str:
    """A short name for a run id or a samples file: letters, digits, ``-`` and ``_`` only."""
    cleaned = "".join(c if c.isalnum() or c in "-_" else "-" for c in name)[:40].strip("-")
    return cleaned or "cluster"


def host_file_name(host: str) -> str:
    """``host`` (``user@node:22``) as a file name: agents/HOST.sock, agents/HOST.seen.json,
    agent-HOST.log. Dots are kept, anything else not a letter, digit, ``-`` or ``_`` is ``_``."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in host)


def load_run_json(path: Path) -> dict[str, Any]:
    """The run directory's run.json; raises OSError when unreadable, ValueError when damaged or
    not a JSON object."""
    try:
        info = json.loads((path / RUN_FILE).read_text(encoding="utf-8"))
    except RecursionError as exc:
        raise ValueError("nested too deeply") from exc
    if not isinstance(info, dict):
        raise ValueError("not a run description (a JSON object)")
    return info


def read_run_json(path: Path) -> dict[str, Any] | None:
    """The run directory's run.json, or None when it is missing, unreadable or damaged."""
    try:
        return load_run_json(path)
    except (OSError, ValueError):
        return None


def read_run_spec(path: Path) -> tuple[ClusterSpec | None, list[Problem]]:
    """The cluster a run was launched with (its cluster.toml): the spec, or None and why not."""
    return load(path / SPEC_FILE)


def launcher_alive(path: Path, info: dict[str, Any] | None = None) -> bool:
    """True when a launcher (``launch``, ``attach`` or a window) holds the run now (``info``: its
    run.json, read here when not given).

    The one place that judges liveness: the run's ``controller.lock`` (core.run.lock) is held. A run
    from before that lock existed falls back to its launcher's pid and control socket.
    """
    info = info if info is not None else (read_run_json(path) or {})
    if info.get("state") == "done":
        return False
    if (path / LOCK_FILE).exists():
        return holder(path) is not None
    sock = info.get("control_socket")
    if not isinstance(sock, str) or not Path(sock).exists():
        return False
    pid = info.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class RunDir:
    """A run directory being written. Writes never raise: a full disk is reported, not fatal."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.write_error: str | None = None
        self._info: dict[str, Any] = {}
        self._role_files: dict[tuple[str, str], Path] = {}
        # One encoder per telemetry file this process appends to (core.run.compact); samples come
        # from each host's link thread and metrics from the output intake, hence the lock.
        self._encoders: dict[Path, compact.Encoder] = {}
        self._encoders_lock = threading.Lock()
        # The telemetry and parsed-offsets files stay open (core.run.openfiles: opening each one
        # for every write was a third of the controller's CPU at 256 workers); closed by
        # close_files(), or when this object goes.
        self._files = OpenFiles()
        weakref.finalize(self, self._files.close)

    @classmethod
    def create(cls, spec: ClusterSpec, root: Path | None = None, path: Path | None = None) -> RunDir:
        created = time.time()
        if path is None:
            stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(created))
            path = (root or runs_root()) / f"{stamp}-{_slug(spec.name)}-{secrets.token_hex(2)}"
        path.mkdir(parents=True, exist_ok=True)
        if any(path.iterdir()):
            raise FileExistsError(f"{path} is not empty; give a new or empty directory")
        os.chmod(path, 0o700)
        run = cls(path)
        (path / "roles").mkdir()
        (path / SPEC_FILE).write_text(dumps(spec), encoding="utf-8")
        run._info = {
            "id": path.name,
            "name": spec.name,
            "created": created,
            "source": str(spec.source) if spec.source else None,
            "workdir": str(spec.workdir),
            "roles": spec.role_ids(),
            "state": "starting",
            "result": None,
            "ended": None,
            "pid": os.getpid(),
        }
        run.update()
        return run

    @classmethod
    def open(cls, path: Path) -> RunDir:
        """An existing run directory, to reattach to it; raises FileNotFoundError/ValueError."""
        run = cls(path)
        run._info = load_run_json(path)
        return run

    @property
    def created(self) -> float:
        """When the run was launched (run.json's ``created``); 0.0 when unknown."""
        return created_time(self._info.get("created"))

    def role_dir(self, task: Task) -> Path:
        return role_dir(self.path, task)

    def _role_file(self, task: Task, name: str) -> Path:
        """``roles/<role>/<name>``, built once: the metrics and parsed.json paths are asked for with
        every chunk of output (pathlib's joins were ~8 % of the controller's samples at 64 workers)."""
        key = (task.role_id, name)
        path = self._role_files.get(key)
        if path is None:
            path = self._role_files[key] = self.role_dir(task) / name
        return path

    def log_path(self, task: Task, attempt: int) -> Path:
        return self.role_dir(task) / f"attempt-{attempt}.log"

    def _guard(self, action: str, fn: Any) -> None:
        try:
            fn()
        except OSError as exc:
            if self.write_error is None:
                self.write_error = f"cannot {action} in {self.path}: {exc.strerror or exc}"

    def record(self, event: dict[str, Any]) -> None:
        """Append one state event to events.jsonl, flushed at once; telemetry kinds are not
        journalled (they have their own files, see :mod:`core.run.journal`)."""
        if not journal.is_state_record(event.get("kind")):
            return
        line = journal.json_line(event)
        self._guard("write events.jsonl", lambda: journal.append_lines(self.path / journal.EVENTS_FILE, line))

    def samples_path(self, host: str) -> Path:
        return self.path / "telemetry" / f"samples-{_slug(host)}.jsonl"

    def append_sample(self, host: str, sample: dict[str, Any]) -> None:
        """Append one telemetry sample to telemetry/samples-<host>.jsonl (compact, see
        :mod:`core.run.compact`: a GPU's name, uuid and limits once per key frame, not every second)."""
        self._append_compact("write telemetry samples", self.samples_path(host), [sample], codec=compact.SAMPLE_CODEC)

    def append_metrics(self, task: Task, samples: list[dict[str, Any]]) -> None:
        """Append parsed training metrics to roles/<role>/metrics.jsonl (compact)."""
        self._append_compact(
            "write metrics", self._role_file(task, "metrics.jsonl"), samples, codec=compact.METRICS_CODEC
        )

    def append_scalars(self, task: Task, points: list[dict[str, Any]]) -> None:
        """Append TensorBoard scalars (tag, step, wall_time, value) to roles/<role>/scalars.jsonl (compact)."""
        self._append_compact(
            "write scalars", self._role_file(task, "scalars.jsonl"), points, codec=compact.SCALARS_CODEC
        )

    def _append_compact(self, action: str, path: Path, records: list[dict[str, Any]], *, codec: compact.Codec) -> None:
        """Encode ``records`` against what this process last wrote to ``path`` and append them.

        A file opened for the first time starts with a key frame, after a newline if the last
        process left half a line (killed mid-write): the key frame must not be glued to it. A failed
        write (disk full) resets the encoder, so the next line written is a key frame again and no
        delta rests on a record that is not on disk."""
        if not records:
            return
        with self._encoders_lock:
            encoder = self._encoders.get(path)
            if encoder is None:
                encoder = self._encoders[path] = codec.encoder()
            fresh = encoder.fresh
            text = encoder.encode(records)

            def write() -> None:
                prefix = "\n" if fresh and _ends_mid_line(path) else ""
                self._files.append(path, (prefix + text).encode())

            failed_before = self.write_error
            try:
                write()
            except OSError as exc:
                encoder.reset()
                if failed_before is None:
                    self.write_error = f"cannot {action} in {self.path}: {exc.strerror or exc}"

    def close_files(self) -> None:
        """Close the files held open for appending (a later write opens them again)."""
        self._files.close()

    def note_parsed(self, task: Task, attempt: int, end: int) -> None:
        """Record that the output of ``attempt`` up to byte ``end`` (a line's end) is parsed and its
        metrics appended: a reattach resumes there, so no step is recorded twice or lost.

        Called with every chunk that gave metrics (~128 a second at 64 workers), so it overwrites
        the file in place with one ``pwrite`` of a record padded to a fixed width, instead of a
        temporary file renamed over it: on ext4 each rename over a file cost the launcher ~1 ms of
        CPU under a 64-worker run's writes, 2.3x the whole controller's CPU of c23e87e (profiled
        over a day-long run). A killed process has written all of the record or none of it (one small write
        at offset 0, within a page); padded to a fixed width, it covers any earlier record, and a
        file that was longer (an old format, or a record past that width) is cut to its length. Two
        system calls a note: an ``fstat`` (the file still linked, and its size) and the ``pwrite``."""
        # json.dumps's very text for two ints, formatted directly: json.dumps of the dict was
        # half of this note's CPU (~1,300 notes a second at 256 workers).
        record = f'{{"attempt": {int(attempt)}, "end": {int(end)}}}'.ljust(PARSED_WIDTH).encode()
        path = self._role_file(task, PARSED_FILE)

        self._guard("write parsed offsets", lambda: self._files.overwrite(path, record))

    def write_spec(self, spec: ClusterSpec) -> None:
        """Replace cluster.toml atomically: a Slurm run's counted tasks once they are placed."""

        def write() -> None:
            tmp = self.path / "cluster.toml.tmp"
            tmp.write_text(dumps(spec), encoding="utf-8")
            os.replace(tmp, self.path / SPEC_FILE)

        self._guard("write cluster.toml", write)

    def update(self, **fields: Any) -> None:
        """Merge ``fields`` into run.json, replacing it atomically."""
        self._info.update(fields)

        def write() -> None:
            tmp = self.path / "run.json.tmp"
            tmp.write_text(json.dumps(self._info, indent=2), encoding="utf-8")
            os.replace(tmp, self.path / RUN_FILE)

        self._guard("write run.json", write)


def _ends_mid_line(path: Path) -> bool:
    """True when ``path`` exists and its last byte is not a newline."""
    try:
        with open(path, "rb") as f:
            f.seek(-1, os.SEEK_END)
            return f.read(1) != b"\n"
    except OSError:  # missing, or empty (a seek before the start)
        return False


def read_parsed(role_path: Path) -> tuple[int, int] | None:
    """(attempt, byte end) of a role's output already parsed (see :meth:`RunDir.note_parsed`)."""
    try:
        data = json.loads((role_path / PARSED_FILE).read_text(encoding="utf-8"))
        return int(data["attempt"]), int(data["end"])
    except (OSError, ValueError, TypeError, KeyError):
        return None


@dataclass(frozen=True)
class RunInfo:
    path: Path
    id: str
    name: str
    created: float
    state: str
    result: str | None
    roles: int
    role_ids: tuple[str, ...] = ()


def created_time(value: Any) -> float:
    """run.json's ``created`` as a time ``time.localtime`` takes, else 0.0 (shown as unknown)."""
    try:
        created = float(value)
    except (TypeError, ValueError, OverflowError):
        return 0.0
    return created if math.isfinite(created) and 0.0 < created < MAX_CREATED else 0.0


def read_info(path: Path) -> RunInfo | None:
    """What ``runs`` lists of a run directory; None when its run.json is unreadable or not an object.

    A hand-edited or damaged field (``created`` NaN, 1e300, a string) is shown as unknown instead
    of losing the run, or the whole listing, to an exception."""
    info = read_run_json(path)
    if info is None:
        return None
    try:
        roles = info.get("roles", [])
        return RunInfo(
            path,
            path.name,  # as `runs` lists it: a copied or renamed folder keeps run.json's id
            str(info.get("name", "?")),
            created_time(info.get("created", 0.0)),
            str(info.get("state", "?")),
            info.get("result") if isinstance(info.get("result"), str) else None,
            len(roles) if isinstance(roles, list) else 0,
            tuple(r for r in roles if isinstance(r, str)) if isinstance(roles, list) else (),
        )
    except (ValueError, TypeError, AttributeError, RecursionError):
        return None


def started_text(created: float) -> str:
    """A run's start as ``runs`` shows it; ``?`` when unknown."""
    if not created:
        return "?"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(created))


def list_runs(root: Path | None = None) -> list[RunInfo]:
    root = root or runs_root()
    if not root.is_dir():
        return []
    runs = [info for p in root.iterdir() if p.is_dir() and (info := read_info(p)) is not None]
    return sorted(runs, key=lambda r: r.created, reverse=True)


def resolve(arg: str, root: Path | None = None) -> Path:
    """A run directory from a path, a run id, or ``latest``; raises FileNotFoundError."""
    candidate = Path(arg).expanduser()
    if (candidate / RUN_FILE).is_file():
        return candidate
    root = root or runs_root()
    if arg == "latest":
        runs = list_runs(root)
        if runs:
            return runs[0].path
        raise FileNotFoundError(f"there are no runs in {root}")
    if (root / arg / RUN_FILE).is_file():
        return root / arg
    matches = [r.path for r in list_runs(root) if r.id.startswith(arg)]
    if len(matches) == 1:
        return matches[0]
    raise FileNotFoundError(f"no run {arg!r} (a run directory, a run id from `runs`, or 'latest')")
