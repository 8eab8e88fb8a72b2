"""The line that says why a trainer died, from its last lines of output.

A Python traceback ends in its exception line (``ZeroDivisionError: division by zero``,
``tensorflow.python.framework.errors_impl.UnavailableError: ...``); that line is what a person reads
first, so it is the one shown beside a role's exit code. Without a traceback, the last line the
role printed stands in (a C++ ``F0000 ... Check failed``, a shell's ``command not found``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

MAX_ERROR_CHARS = 240  # one line in a table cell or a terminal; the log has all of it
TRACEBACK_START = "Traceback (most recent call last):"
# An exception line: a dotted name ending in Error, Exception, Exit, Interrupt or Warning (or a
# known bare one), then its message. Frames ("  File ...", code lines) are indented.
_EXCEPTION = re.compile(
    r"^(?:[A-Za-z_][\w]*\.)*(?:[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Warning)|KeyError|StopIteration"
    r"|GeneratorExit|AssertionError)\b(?::.*)?$"
)
_ABSL_ERROR = re.compile(r"^[EF]\d{4} ")
_ABSL_PREFIX = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d+(?:\.\d+)?\s+\d+ [\w.]+:\d+\] ")


def error_line(lines: Sequence[str], *, last_line: bool = True) -> str:
    """The exception line of the last traceback among ``lines`` (oldest first), else the last
    non-empty line; cut to :data:`MAX_ERROR_CHARS`. '' when there is nothing. A line redrawn with
    carriage returns counts as what it shows last. ``last_line`` False (a process killed by a
    signal, whose last line is whatever it printed before) stands in only an absl error or fatal
    line (``E0000 ...``, ``F0000 ... Check failed``) for a missing traceback."""
    lines = [part for line in lines for part in line.splitlines()]
    start = _last_index(lines, TRACEBACK_START)
    if start is not None:  # the last traceback: a chain ("During handling...") ends in the one that killed it
        found = next((t for line in lines[start + 1 :] if _is_exception(t := line.rstrip())), None)
        if found is not None:
            return _cut(found)
    for line in reversed(lines):
        text = line.strip()
        if text and not text.startswith("[towerdeck]"):
            if not last_line and not _ABSL_ERROR.match(text):
                return ""
            return _cut(_ABSL_PREFIX.sub("", text))
    return ""


def _is_exception(text: str) -> bool:
    return bool(text) and not text[0].isspace() and _EXCEPTION.match(text) is not None


def _last_index(lines: Sequence[str], marker: str) -> int | None:
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].strip() == marker:
            return i
    return None


def _cut(text: str) -> str:
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1] + "…"
