"""Replacing a file in one step: whoever reads it sees the old file or the new one, never half.

Used for cluster files, profile summaries and the desktop entry. (The host agent keeps its own
copy in core/agent/artifact.py: it ships as a standalone zipapp that cannot import ``core``.)
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

__all__ = ["replace_file"]


def replace_file(target: Path, data: bytes, *, mode: int | None = None) -> None:
    """Write ``data`` to a temporary file beside ``target``, then rename it over ``target``: a crash
    or a full disk leaves the old file whole and no temporary behind. ``mode`` None keeps an
    existing file's permissions (a new file is owner-only); it touches the disk: never on a GUI
    thread."""
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".towerdeck-tmp", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        if mode is not None:
            os.chmod(tmp, mode)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.chmod(tmp, stat.S_IMODE(target.stat().st_mode))
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
