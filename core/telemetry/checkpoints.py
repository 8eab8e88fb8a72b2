"""A checkpoint directory read without TensorFlow: its ``checkpoint`` state file and the checkpoints it
lists, with each one's step, time and size.

TensorFlow keeps the state of a checkpoint directory in a file named ``checkpoint``: a text-format
``CheckpointState`` proto that ``tf.train.CheckpointManager``, ``tf.compat.v1.train.Saver`` (and so
``MonitoredTrainingSession``) rewrite atomically after each save::

    model_checkpoint_path: "ckpt-40"
    all_model_checkpoint_paths: "ckpt-30"
    all_model_checkpoint_paths: "ckpt-40"
    all_model_checkpoint_timestamps: 1795815284.35
    all_model_checkpoint_timestamps: 1795815290.12

TF 2's manager writes names relative to the directory and the timestamps; TF 1's Saver writes
absolute paths and no timestamps (the index file's time stands in). A checkpoint ``X`` is the files
``X.index`` and ``X.data-NNNNN-of-MMMMM``; its step is the number its name ends with (``ckpt-40``,
``model.ckpt-1200``).

The state file is a trainer's output, so it is read as untrusted: a symlink, a FIFO or a device is
not opened, a file over :data:`MAX_STATE_BYTES` is not read, a damaged line is skipped, a path that
leads outside the directory is listed without being looked at, and every such thing is said in one
line (:attr:`CheckpointListing.problem`), never raised.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STATE_FILE = "checkpoint"
MAX_STATE_BYTES = 1 << 20  # a state file of 16,000 checkpoints; TensorFlow keeps 5 by default
MAX_LISTED = 1000  # checkpoints listed (the newest); a run that keeps every one lists its last 1000
MAX_DIR_ENTRIES = 20_000  # files looked at for the checkpoints' sizes
MAX_SUBDIRS = 50  # subdirectories looked into for a state file (tf-keras' BackupAndRestore: backup_dir/chief)

_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)[ \t]*:(.*)", re.DOTALL)
_QUOTED = re.compile(r'^"((?:[^"\\]|\\.)*)"$|^\'((?:[^\'\\]|\\.)*)\'$', re.DOTALL)
_ESCAPE = re.compile(rb"\\(?:([0-7]{1,3})|x([0-9a-fA-F]{1,2})|(.))", re.DOTALL)
_SIMPLE_ESCAPES = {b"n": b"\n", b"r": b"\r", b"t": b"\t", b"a": b"\a", b"b": b"\b", b"f": b"\f", b"v": b"\v"}
_STEP = re.compile(r"-(\d{1,18})$")


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint: its ``name`` as the state file gives it (relative to the directory, e.g.
    ``ckpt-40``), its training ``step`` (from the name), when it was saved and the size of its
    files (None when unknown: not there, or outside the directory)."""

    name: str
    step: int | None
    saved_at: float | None
    size_bytes: int | None

    def words(self) -> str:
        """``ckpt-40 (step 40)``: how a person names it."""
        return f"{self.name} (step {self.step:,})" if self.step is not None else self.name

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "step": self.step, "saved_at": self.saved_at, "size_bytes": self.size_bytes}

    @classmethod
    def from_json(cls, data: object) -> Checkpoint | None:
        """A checkpoint from its JSON form; None for anything else (a damaged record)."""
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            return None
        step, saved_at, size = data.get("step"), data.get("saved_at"), data.get("size_bytes")
        return cls(
            name=data["name"],
            step=step if isinstance(step, int) and not isinstance(step, bool) else None,
            saved_at=_finite(saved_at),
            size_bytes=size if isinstance(size, int) and not isinstance(size, bool) and size >= 0 else None,
        )


@dataclass(frozen=True)
class CheckpointListing:
    """A checkpoint directory as read: its checkpoints, oldest first; the one the state file names
    as the newest (``latest``, what TensorFlow restores); ``problem``, one line when the state file
    or part of it could not be read (empty when all is well); ``state_file``, where it was read."""

    directory: str
    checkpoints: tuple[Checkpoint, ...] = ()
    latest: str | None = None
    problem: str = ""
    state_file: str | None = None

    def newest(self) -> Checkpoint | None:
        """The checkpoint TensorFlow would restore now (``model_checkpoint_path``)."""
        found = [c for c in self.checkpoints if c.name == self.latest]
        return found[-1] if found else (self.checkpoints[-1] if self.checkpoints else None)

    def to_json(self) -> dict[str, Any]:
        return {
            "directory": self.directory,
            "state_file": self.state_file,
            "latest": self.latest,
            "problem": self.problem,
            "checkpoints": [c.to_json() for c in self.checkpoints],
        }


@dataclass
class ParsedState:
    """What a state file's text says: the newest checkpoint's path, every path with its timestamp
    (None where none was written), and a line per problem (``line 3: ...``)."""

    latest: str | None = None
    paths: list[str] = field(default_factory=list)
    timestamps: list[float | None] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def step_of(name: str) -> int | None:
    """The step a checkpoint's name ends with: ``ckpt-40`` -> 40, ``model.ckpt-1200`` -> 1200."""
    found = _STEP.search(os.path.basename(name))
    return int(found.group(1)) if found else None


def _finite(value: object) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _unescape(body: str) -> str:
    """A text-format string's body with its C escapes undone (``\\"``, ``\\303\\251``, ``\\x41``);
    bytes that are not UTF-8 come out as U+FFFD."""

    def one(match: re.Match[bytes]) -> bytes:
        octal, hexa, char = match.groups()
        if octal is not None:
            return bytes([int(octal, 8) & 0xFF])
        if hexa is not None:
            return bytes([int(hexa, 16)])
        return _SIMPLE_ESCAPES.get(char, char)

    raw = body.encode("utf-8", "surrogateescape")
    return _ESCAPE.sub(one, raw).decode("utf-8", "replace")


def parse_state(text: str) -> ParsedState:
    """Parse a ``checkpoint`` state file's text (a ``CheckpointState`` in protobuf's text format).
    Unknown fields are skipped (newer TensorFlows add some); a line that is not ``name: value``, or
    whose value is not what its field holds, is a problem naming its line."""
    state = ParsedState()
    stamps: list[float | None] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _LINE.fullmatch(line.strip())
        if match is None:
            state.problems.append(f"line {number}: not `name: value`")
            continue
        name, value = match.group(1), match.group(2).strip()
        if name in ("model_checkpoint_path", "all_model_checkpoint_paths"):
            quoted = _QUOTED.match(value)
            if quoted is None:
                state.problems.append(f"line {number}: {name} is not a quoted string")
                continue
            path = _unescape(quoted.group(1) if quoted.group(1) is not None else quoted.group(2))
            if not path or "\x00" in path:
                state.problems.append(f"line {number}: {name} is empty or holds a NUL")
                continue
            if name == "model_checkpoint_path":
                state.latest = path
            else:
                state.paths.append(path)
        elif name == "all_model_checkpoint_timestamps":
            try:
                stamp: float | None = _finite(float(value))
            except ValueError:
                stamp = None
            if stamp is None:
                state.problems.append(f"line {number}: {name} is not a finite number")
            stamps.append(stamp)
    # Timestamps go with the paths one for one; a file where they do not is read without them.
    if stamps and len(stamps) != len(state.paths):
        state.problems.append(
            f"{len(stamps)} timestamps for {len(state.paths)} checkpoints; times taken from the files"
        )
        stamps = []
    state.timestamps = stamps or [None] * len(state.paths)
    if state.latest is not None and state.latest not in state.paths:
        state.paths.append(state.latest)  # TensorFlow always lists it too; a hand-written file may not
        state.timestamps.append(None)
    return state


def _read_small(path: Path, limit: int) -> str:
    """The text of a regular file of at most ``limit`` bytes, never following a symlink nor
    opening a FIFO or device (it could block or never end). Raises ValueError with what is wrong."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if os.path.islink(path):
            raise ValueError("is a symbolic link; not followed") from None
        raise ValueError(exc.strerror or str(exc)) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError("is not a regular file")
        if info.st_size > limit:
            raise ValueError(f"is {info.st_size:,} bytes, more than the {limit:,} a state file may be; not read")
        with os.fdopen(fd, "rb", closefd=True) as handle:
            fd = -1
            data = handle.read(limit + 1)
    finally:
        if fd >= 0:
            os.close(fd)
    if len(data) > limit:  # it grew while being read
        raise ValueError(f"is more than {limit:,} bytes; not read")
    return data.decode("utf-8", "replace")


def find_state_file(directory: Path) -> Path | None:
    """The state file of ``directory``: ``directory/checkpoint``, else one in a subdirectory (a
    ``chief`` one first, else the newest), as tf-keras' ``BackupAndRestore`` keeps it in
    ``backup_dir/chief``. None when there is none (or the directory cannot be read)."""
    own = directory / STATE_FILE
    if os.path.lexists(own):
        return own
    found: list[tuple[int, float, Path]] = []
    with contextlib.suppress(OSError), os.scandir(directory) as entries:
        for count, entry in enumerate(entries):
            if count >= MAX_SUBDIRS * 20:
                break
            with contextlib.suppress(OSError):
                if not entry.is_dir(follow_symlinks=False) or entry.name.startswith("."):
                    continue
                candidate = Path(entry.path) / STATE_FILE
                info = candidate.lstat()
                if stat.S_ISREG(info.st_mode):
                    found.append((1 if entry.name == "chief" else 0, info.st_mtime, candidate))
                if len(found) >= MAX_SUBDIRS:
                    break
    return max(found)[2] if found else None


def _sizes(directory: Path) -> tuple[dict[str, int], dict[str, float], bool]:
    """Per checkpoint prefix in ``directory``: the bytes of its index and data files, and its
    index file's modification time; and whether the directory had more entries than are looked at.
    Symbolic links are not counted (their target may be anywhere)."""
    sizes: dict[str, int] = {}
    times: dict[str, float] = {}
    cut = False
    with contextlib.suppress(OSError), os.scandir(directory) as entries:
        for count, entry in enumerate(entries):
            if count >= MAX_DIR_ENTRIES:
                cut = True
                break
            name = entry.name
            if name.endswith(".index"):
                prefix = name[: -len(".index")]
            elif ".data-" in name:
                prefix = name.split(".data-", 1)[0]
            else:
                continue
            with contextlib.suppress(OSError):
                info = entry.stat(follow_symlinks=False)
                if not stat.S_ISREG(info.st_mode):
                    continue
                sizes[prefix] = sizes.get(prefix, 0) + info.st_size
                if name.endswith(".index"):
                    times[prefix] = info.st_mtime
    return sizes, times, cut


def _inside(directory: Path, path: str) -> str | None:
    """``path`` (from a state file: relative to ``directory``, or absolute) as a name relative to
    ``directory``, or None when it leads outside it."""
    base = os.path.realpath(directory)
    full = path if os.path.isabs(path) else os.path.join(base, path)
    # The checkpoint's own name is a prefix, not a file: only its folder is resolved.
    folder = os.path.realpath(os.path.dirname(os.path.normpath(full)))
    try:
        if os.path.commonpath([base, folder]) != base:
            return None
    except ValueError:
        return None
    return os.path.relpath(os.path.join(folder, os.path.basename(os.path.normpath(full))), base)


def read_listing(directory: Path, state_file: Path | None = None) -> CheckpointListing:
    """Every checkpoint ``directory``'s state file lists (``state_file``: where it is, when known;
    else :func:`find_state_file`). Never raises: what cannot be read is :attr:`CheckpointListing.problem`."""
    shown = str(directory)
    if not directory.is_dir():  # not written yet is no problem; something else in its place is
        there = os.path.lexists(directory)
        return CheckpointListing(shown, problem=f"{shown} is not a directory" if there else "")
    state_path = state_file or find_state_file(directory)
    if state_path is None:
        return CheckpointListing(shown)
    try:
        text = _read_small(state_path, MAX_STATE_BYTES)
    except ValueError as exc:
        return CheckpointListing(shown, problem=f"{state_path} {exc}", state_file=str(state_path))
    state = parse_state(text)
    problems = list(state.problems[:1])
    if len(state.problems) > 1:
        problems[0] += f" (and {len(state.problems) - 1} more)"
    folder = state_path.parent
    sizes, times, cut = _sizes(folder)
    if cut:
        problems.append(f"more than {MAX_DIR_ENTRIES:,} files in {folder}; some sizes not counted")
    paths = list(zip(state.paths, state.timestamps, strict=True))
    if len(paths) > MAX_LISTED:
        problems.append(f"it lists {len(paths):,} checkpoints; the newest {MAX_LISTED:,} are shown")
        paths = paths[-MAX_LISTED:]
    checkpoints: list[Checkpoint] = []
    outside: list[str] = []
    latest: str | None = None
    for path, stamp in paths:
        name = _inside(folder, path)
        if name is None:
            outside.append(path)
            checkpoints.append(Checkpoint(os.path.basename(path), step_of(path), stamp, None))
        else:
            checkpoints.append(Checkpoint(name, step_of(name), stamp or times.get(name), sizes.get(name)))
        if path == state.latest:
            latest = checkpoints[-1].name
    if outside:
        problems.append(
            f"{len(outside)} checkpoint path(s) lead outside {folder} (e.g. {outside[0]!r}); listed, not looked at"
        )
    problem = f"{state_path}: " + "; ".join(problems) if problems else ""
    return CheckpointListing(shown, tuple(checkpoints), latest, problem, str(state_path))


_RESTORE_VERB = re.compile(r"\b(?:restor(?:e|es|ed|ing)|resum(?:e|es|ed|ing))\b", re.IGNORECASE)
_TOKEN_SPLIT = re.compile(r"[\s'\"`,;()\[\]]+")
_AT_STEP = re.compile(r"\bat (?:global )?step (\d{1,18})\b", re.IGNORECASE)
MAX_RESTORE_LINE = 2000  # longer lines are not looked at: no trainer says "restored" at such length


def _checkpoint_token(token: str) -> tuple[str, int] | None:
    """``/ckpt/model.ckpt-60.index`` -> (``model.ckpt-60``, 60); None for a word that names no
    numbered checkpoint."""
    base = re.split(r"[/\\]", token.removesuffix(".index"))[-1].rstrip(".:")
    head, dash, number = base.rpartition("-")
    if not dash or not head or not number.isdigit() or not number.isascii() or len(number) > 18:
        return None
    return base, int(number)


def restored_from(line: str) -> tuple[str, int | None] | None:
    """The checkpoint a trainer's line says it restored, as (name, step): TF 1's Saver (``Restoring
    parameters from /ckpt/model.ckpt-60``), or a line of the kind the example trainers print
    (``resumed from checkpoint ckpt-6 at step 60``). The step is the line's ``at step N``, else the
    name's; None for any other line. Linear in the line's length (a trainer's line is untrusted)."""
    if len(line) > MAX_RESTORE_LINE:
        return None
    verb = _RESTORE_VERB.search(line)
    if verb is None:
        return None
    rest = line[verb.end() :]
    if "ckpt" not in rest.lower() and "checkpoint" not in rest.lower():
        return None
    position = 0
    for token in _TOKEN_SPLIT.split(rest):
        position = rest.find(token, position) + len(token)
        found = _checkpoint_token(token) if token else None
        if found is not None:
            at = _AT_STEP.search(rest, position)
            return found[0], int(at.group(1)) if at else found[1]
    return None
