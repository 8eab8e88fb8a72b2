"""A capture's files under a run's ``profiles/`` folder: written whole, read back with care.

A capture's ``profile.json`` and ``why.json`` are replaced in one step (no half file, no stray
temporary one when the disk is full), and a write that fails names the file and why in words a
user can act on (a full disk, a read-only file system), never "the run is not running". A
``profile.json`` read back is checked field by field: a damaged or foreign one is named in one
line, never a traceback.

``profile.json`` holds what was asked (``requested``: the roles, the trace's length, why the
capture was taken: ``purpose`` *profile* or *why*, ``origin`` *window* or *cli*), what came of it
per role (``roles``), and, once computed, the capture's one breakdown (``breakdown``: each
captured role's profile, :class:`core.profiling.summary.RoleProfile`), which every view shows.
A breakdown that is missing, of another version or damaged is computed again
(:mod:`core.profiling.breakdown`).
"""

from __future__ import annotations

import errno
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

from core.cluster.spec import write_atomically
from core.profiling.env import ProfileError
from core.profiling.summary import RoleProfile

RECORD_NAME = "profile.json"
WHY_NAME = "why.json"  # the verdict kept with a capture made by *why* (core/profiling/why_record.py)
# The breakdown's rules (core/profiling/summary.py: the parts, the tf.data adjustment): a stored
# breakdown of another version is computed again rather than shown with other rules.
BREAKDOWN_VERSION = 1
PURPOSES = ("profile", "why")
ORIGINS = {"window": "from the window", "cli": "from the CLI"}

# errno -> what happened, and what to do about it.
_WRITE_FAILURES = {
    errno.ENOSPC: ("the disk is full", "free some space, then try again"),
    errno.EDQUOT: ("the disk quota is used up", "free some space, then try again"),
    errno.EROFS: ("the file system is read-only", "make it writable, then try again"),
    errno.EACCES: ("permission denied", "make the run's profiles folder writable, then try again"),
    errno.EPERM: ("permission denied", "make the run's profiles folder writable, then try again"),
}


def cannot_write(path: Path, exc: OSError) -> ProfileError:
    """The one-line error for a failed write of ``path``."""
    what, fix = _WRITE_FAILURES.get(exc.errno or 0, (exc.strerror or str(exc), ""))
    detail = f" ({exc.strerror})" if exc.strerror and exc.strerror.lower() != what else ""
    return ProfileError(f"cannot write {path}: {what}{detail}" + (f"; {fix}" if fix else ""))


def write_whole(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` in one step; raises ProfileError (one line) and leaves no
    temporary file behind when the disk refuses."""
    try:
        write_atomically(path, text)
    except OSError as exc:
        raise cannot_write(path, exc) from None


@dataclass(frozen=True)
class CaptureRecord:
    """A capture's ``profile.json`` read back: what was asked, what came of it, and the stored
    breakdown (None until computed, or when stored by other rules or damaged)."""

    folder: Path
    xplanes: dict[str, Path]  # each captured role's file
    failures: list[tuple[str, str]]  # each role not captured, with why
    asked: tuple[str, ...] = ()  # the roles asked for, in the order asked (a why: the straggler first)
    seconds: float | None = None  # the trace's length
    purpose: str = "profile"  # "profile" or "why"
    origin: str = ""  # "window" or "cli"; "" for a capture of an older TowerDeck
    taken_t: float | None = None  # when it was asked (epoch seconds)
    breakdown: tuple[RoleProfile, ...] | None = field(default=None, compare=False)

    @property
    def roles(self) -> list[str]:
        """The captured roles, in the order asked."""
        return list(self.xplanes)

    @property
    def finished(self) -> bool:
        """Whether the capture is over: its record names each role's outcome. The record is first
        written, with no outcome yet, when the capture begins, so a capture being taken is listed."""
        return bool(self.xplanes or self.failures)

    def describe(self) -> str:
        """Why and how the capture was taken, in a few words: "why, from the window, 2 s"."""
        words = [self.purpose]
        if self.origin in ORIGINS:
            words.append(ORIGINS[self.origin])
        if self.seconds is not None:
            words.append(f"{self.seconds:g} s")
        return ", ".join(words)

    def when(self) -> str:
        """When it was taken (local time), else the folder's name."""
        if self.taken_t is None:
            return self.folder.name
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.taken_t))


def _load(path: Path, folder: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ProfileError(f"{path} is missing: {folder} is not a capture") from None
    except OSError as exc:
        raise ProfileError(f"{path} is unreadable: {exc.strerror or exc}") from None
    except ValueError as exc:  # not JSON, or not UTF-8
        raise ProfileError(f"{path} is unreadable: not JSON ({exc})") from None


def read_record(folder: Path) -> CaptureRecord:
    """A capture's ``profile.json``: each captured role's xplane, each role not captured with why,
    what was asked, and the stored breakdown. ProfileError, one line naming the file, when it is
    missing, unreadable or not a capture's record."""
    path = folder / RECORD_NAME
    record = _load(path, folder)
    roles = record.get("roles") if isinstance(record, dict) else None
    if not isinstance(roles, list):
        raise ProfileError(f"{path} is not a capture's record: it has no list of roles")
    xplanes: dict[str, Path] = {}
    failures: list[tuple[str, str]] = []
    for i, entry in enumerate(roles):
        problem = _entry_problem(entry)
        if problem:
            raise ProfileError(f"{path} is not a capture's record: roles[{i}] {problem}")
        if entry.get("ok") is True:
            xplanes[entry["role"]] = folder / entry["xplane"]
        else:
            failures.append((entry["role"], str(entry.get("error") or "not captured")))
    asked = record.get("requested")
    asked = asked if isinstance(asked, dict) else {}
    purpose = asked.get("purpose")
    if purpose not in PURPOSES:  # an older record: a capture with a verdict was made by why
        purpose = "why" if (folder / WHY_NAME).is_file() else "profile"
    names = asked.get("roles")
    return CaptureRecord(
        folder,
        xplanes,
        failures,
        asked=tuple(str(n) for n in names) if isinstance(names, list) else tuple(e["role"] for e in roles),
        seconds=_number_or_none(asked.get("seconds")),
        purpose=str(purpose),
        origin=str(asked.get("origin")) if asked.get("origin") in ORIGINS else "",
        taken_t=_number_or_none(asked.get("t")),
        breakdown=_stored_breakdown(record.get("breakdown"), xplanes),
    )


def _number_or_none(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _stored_breakdown(stored: Any, xplanes: dict[str, Path]) -> tuple[RoleProfile, ...] | None:
    """The stored breakdown when it is of these rules and of exactly the captured roles, else None
    (it is computed again: never shown half, or by other rules)."""
    if not isinstance(stored, dict) or stored.get("version") != BREAKDOWN_VERSION:
        return None
    try:
        profiles = tuple(RoleProfile.from_json(p) for p in stored.get("roles") or ())
    except ValueError:
        return None
    return profiles if [p.role for p in profiles] == list(xplanes) else None


def save_breakdown(folder: Path, profiles: Sequence[RoleProfile]) -> None:
    """Keep ``profiles`` (the capture's breakdown, in the record's order) in its ``profile.json``,
    the rest of the record as it was; ProfileError (one line naming the file) when the disk
    refuses or the record cannot be read."""
    path = folder / RECORD_NAME
    record = _load(path, folder)
    if not isinstance(record, dict):
        raise ProfileError(f"{path} is not a capture's record: it has no list of roles")
    record["breakdown"] = {"version": BREAKDOWN_VERSION, "roles": [p.to_json() for p in profiles]}
    write_whole(path, json.dumps(record, indent=2) + "\n")


def _entry_problem(entry: Any) -> str | None:
    """What is wrong with one role's outcome in a record, or None."""
    if not isinstance(entry, dict) or not isinstance(entry.get("role"), str):
        return "is not a role's outcome (no role name)"
    if entry.get("ok") is not True:
        return None
    xplane = entry.get("xplane")
    if not isinstance(xplane, str) or not xplane:
        return f"({entry['role']}) was captured but names no file"
    relative = PurePath(xplane)
    if relative.is_absolute() or ".." in relative.parts:
        return f"({entry['role']}) names a file outside the capture: {xplane}"
    return None
