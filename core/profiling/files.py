"""A capture's files under a run's ``profiles/`` folder: written whole, read back with care.

A capture's ``profile.json`` and ``why.json`` are replaced in one step (no half file, no stray
temporary one when the disk is full), and a write that fails names the file and why in words a
user can act on (a full disk, a read-only file system), never "the run is not running". A
``profile.json`` read back is checked field by field: a damaged or foreign one is named in one
line, never a traceback.
"""

from __future__ import annotations

import errno
import json
from pathlib import Path, PurePath
from typing import Any

from core.cluster.spec import write_atomically
from core.profiling.env import ProfileError

RECORD_NAME = "profile.json"

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


def read_record(folder: Path) -> tuple[dict[str, Path], list[tuple[str, str]]]:
    """A capture's ``profile.json``: each captured role's xplane (role -> path), and each role not
    captured with why. ProfileError, one line naming the file, when it is missing, unreadable or
    not a capture's record."""
    path = folder / RECORD_NAME
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ProfileError(f"{path} is missing: {folder} is not a capture") from None
    except OSError as exc:
        raise ProfileError(f"{path} is unreadable: {exc.strerror or exc}") from None
    except ValueError as exc:  # not JSON, or not UTF-8
        raise ProfileError(f"{path} is unreadable: not JSON ({exc})") from None
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
    return xplanes, failures


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
