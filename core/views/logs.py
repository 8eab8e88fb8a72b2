"""The Logs tab's model, without the widgets: what the window keeps of each role's output (bounded,
one budget for all roles, each chunk with the attempt that printed it), output turned into display
lines the way a terminal shows them, each line's level for the filter and its colour, and a divider
where an attempt begins. Qt-free.

Carriage-return progress bars (Keras, tqdm): only the last state of a line is kept, and a line
still being redrawn is held as :attr:`LineAssembler.partial` until it ends. The run directory
keeps every byte; :class:`RoleOutput` keeps each role's newest text only.

A Python traceback is an error from its ``Traceback (most recent call last):`` line to its
exception line: its frames (``  File "x.py", line 229, in <module>``, the code under them) say
nothing by themselves, so :class:`LineLevels` reads a role's lines in order. :class:`LogStream`
turns one role's output into :class:`ShownLine` s: a divider per attempt (``attempt 2 · started
15:10:37 · after exit 1``, from :class:`AttemptLog`), then its lines with their levels, a line past
:data:`MAX_SHOWN_LINE_CHARS` shown cut (a text view lays out a 1 MB line for tens of seconds).
"""

from __future__ import annotations

import collections
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeVar

from core.run.status import RoleState, exit_text
from core.telemetry.errors import TRACEBACK_START
from core.views.conditions import short_exit

__all__ = [
    "DIVIDER",
    "ERROR",
    "LEVELS",
    "LOG_TEXT_BUDGET",
    "MAX_SHOWN_LINE_CHARS",
    "PARTIAL_LINE_CHARS",
    "ROLE_TEXT_CHARS",
    "ROLE_TEXT_MIN",
    "WARNING",
    "AttemptLog",
    "LineAssembler",
    "LineLevels",
    "LogStream",
    "RoleOutput",
    "ShownLine",
    "line_level",
    "shown_line",
]

# What the window keeps of each role's output, to show when the view switches to that role (the
# run directory keeps every byte): all roles together at most LOG_TEXT_BUDGET characters, each
# between ROLE_TEXT_MIN and ROLE_TEXT_CHARS. Eight roles keep 512 KiB each; 65 keep 64 KiB each
# (about a thousand lines, a terminal's scrollback), 4 MiB in all instead of 33: the text was most
# of the window's growth over a day at 64 workers.
ROLE_TEXT_CHARS = 512 * 1024
ROLE_TEXT_MIN = 64 * 1024
LOG_TEXT_BUDGET = 4 * 1024 * 1024
PARTIAL_LINE_CHARS = 4096  # an unterminated line longer than this is shown as it is

LEVELS = ("All lines", "Warnings and errors", "Errors only")  # the filter's choices: minimum level 0, 1, 2
WARNING, ERROR = 1, 2  # a line's level (0: an ordinary line)
DIVIDER = 3  # not a level: the kind of a shown line that marks where an attempt begins
# Past this a line is shown cut (its start and its end): laid out wrapped, a 100 KB line took a Qt
# text view 1.8 s and a 1 MB line 38 s, during which the window answered nothing. The role's log
# file has the whole line.
MAX_SHOWN_LINE_CHARS = 6000
_SHOWN_HEAD_CHARS, _SHOWN_TAIL_CHARS = 4000, 1000
_ERROR = re.compile(
    r"^[EF]\d{4} |\b(ERROR|FATAL|CRITICAL|Traceback)\b|^[\w.]*(Error|Exception)(:|$)|\[towerdeck\]"
    r"|^During handling of the above exception|^The above exception was the direct cause"
)
_WARNING = re.compile(r"^W\d{4} |\bWARNING\b|\bWarning\b")
_V = TypeVar("_V")


def line_level(line: str) -> int:
    """0 for an ordinary line, 1 for a warning, 2 for an error (absl prefixes, logging, tracebacks),
    judged on the line alone; :class:`LineLevels` also knows a traceback's frames."""
    if _ERROR.search(line):
        return ERROR
    if _WARNING.search(line):
        return WARNING
    return 0


class LineLevels:
    """The levels of one process's lines, read in order: as :func:`line_level`, and every line of a
    Python traceback an error, from ``Traceback (most recent call last):`` through its indented
    frames and code to the exception line that ends it (``ZeroDivisionError: division by zero``,
    or any first unindented line there, which is what Python prints)."""

    def __init__(self) -> None:
        self.in_traceback = False

    def level(self, line: str) -> int:
        if self.in_traceback:
            if line[:1] in (" ", "\t"):
                return ERROR  # a frame, its code line, the caret line under it
            self.in_traceback = False
            if line.strip():
                return ERROR  # the exception line
        level = line_level(line)
        if TRACEBACK_START in line:
            self.in_traceback = True
        return level


def shown_line(line: str) -> str:
    """``line`` as the Logs tab shows it: past :data:`MAX_SHOWN_LINE_CHARS`, its start and its end
    around a note of what is left out; a paragraph separator (which a text view would take for a
    line break) as a space."""
    line = line.replace("\u2029", " ")
    if len(line) <= MAX_SHOWN_LINE_CHARS:
        return line
    hidden = len(line) - _SHOWN_HEAD_CHARS - _SHOWN_TAIL_CHARS
    return (
        f"{line[:_SHOWN_HEAD_CHARS]} … [{hidden:,} characters of this line not shown here; the role's log file "
        f"has the whole line] … {line[-_SHOWN_TAIL_CHARS:]}"
    )


@dataclass(frozen=True)
class ShownLine:
    """One line of the Logs tab: its text, and its kind: 0, :data:`WARNING`, :data:`ERROR`, or
    :data:`DIVIDER` for the line that says where an attempt begins."""

    text: str
    kind: int = 0


class AttemptLog:
    """When each attempt of each role started and how it ended (from its ``role_state`` events):
    what the divider before an attempt's output says."""

    MAX_ATTEMPTS = 1000  # per role: a role restarted forever keeps its newest attempts' times

    def __init__(self) -> None:
        self._started: dict[str, dict[int, float]] = {}
        self._ended: dict[str, dict[int, str]] = {}

    def note(
        self, role: str, t: float, *, state: RoleState, attempt: int, returncode: int | None, signal: int | None
    ) -> None:
        """A role entered ``state`` at ``t`` in ``attempt`` (a ``role_state`` event)."""
        if attempt <= 0:
            return
        if state == RoleState.STARTING:
            _keep(self._started.setdefault(role, {}), attempt, t, most=self.MAX_ATTEMPTS)
        elif state in (RoleState.BACKOFF, RoleState.FAILED, RoleState.SUCCEEDED, RoleState.STOPPED):
            how = short_exit(exit_text(returncode, signal))
            if how:
                _keep(self._ended.setdefault(role, {}), attempt, how, most=self.MAX_ATTEMPTS)

    def divider(self, role: str, attempt: int) -> str:
        """``── attempt 2 · started 15:10:37 · after exit 1 ──`` (what is known of it)."""
        parts = [f"attempt {attempt}"]
        started = self._started.get(role, {}).get(attempt)
        if started is not None:
            parts.append("started " + time.strftime("%H:%M:%S", time.localtime(started)))
        before = self._ended.get(role, {}).get(attempt - 1)
        if before:
            parts.append(f"after {before}")
        return "── " + " · ".join(parts) + " ──"

    def clear(self) -> None:
        self._started.clear()
        self._ended.clear()


def _keep(book: dict[int, _V], attempt: int, value: _V, *, most: int) -> None:
    book[attempt] = value
    if len(book) > most:
        del book[min(book)]


class LogStream:
    """One role's output, chunk by chunk in order, as the lines the Logs tab shows: a divider where
    an attempt begins, each line with its level (a traceback's lines errors), lines below
    ``minimum`` left out (dividers never are), long lines cut (:func:`shown_line`)."""

    def __init__(self, role: str, attempts: AttemptLog, minimum: int = 0) -> None:
        self.role = role
        self.attempts = attempts
        self.minimum = minimum
        self.attempt: int | None = None
        self.assembler = LineAssembler()
        self.levels = LineLevels()

    @property
    def partial(self) -> str:
        """The line being redrawn now (a progress bar), not shown as a line yet."""
        return self.assembler.partial

    def feed(self, text: str, attempt: int | None = None) -> list[ShownLine]:
        shown: list[ShownLine] = []
        if attempt is not None and attempt != self.attempt:
            if self.assembler.partial:  # the last attempt's last line, never ended: no more comes
                shown += self._lines([self.assembler.partial])
                self.assembler.partial = ""
            self.levels = LineLevels()  # a new process: no traceback goes on across attempts
            shown.append(ShownLine(self.attempts.divider(self.role, attempt), DIVIDER))
            self.attempt = attempt
        return shown + self._lines(self.assembler.feed(text))

    def _lines(self, lines: Iterable[str]) -> list[ShownLine]:
        out = []
        for line in lines:
            text = shown_line(line)
            level = self.levels.level(text)
            if level >= self.minimum:
                out.append(ShownLine(text, level))
        return out


class LineAssembler:
    """Turns a stream of output chunks into complete display lines, as a terminal would.

    ``\\r`` returns to the start of the line, so of ``10%\\r20%\\r30%\\n`` only ``30%`` stays; a
    chunk may end in the middle of a line, which is kept as :attr:`partial` until its end arrives.
    """

    def __init__(self) -> None:
        self.partial = ""

    def feed(self, text: str) -> list[str]:
        text = self.partial + text
        lines = text.split("\n")
        self.partial = lines.pop()
        if len(self.partial) > PARTIAL_LINE_CHARS and "\r" not in self.partial[-PARTIAL_LINE_CHARS:]:
            lines.append(self.partial)  # a line without an end (binary, or a huge blob): show it
            self.partial = ""
        self.partial = _last_state(self.partial) if "\r" in self.partial else self.partial
        return [_last_state(line) for line in lines]


def _last_state(line: str) -> str:
    line = line.rstrip("\r")
    return line.rsplit("\r", 1)[-1]


class RoleOutput:
    """Each role's newest output, as it came in chunks (each with the attempt that printed it, when
    known), within one budget for every role."""

    def __init__(self) -> None:
        self.role_text: dict[str, collections.deque[tuple[int | None, str]]] = {}
        self.role_chars: dict[str, int] = {}
        self.role_cap = ROLE_TEXT_CHARS  # characters kept per role, from the number of roles

    def set_role_count(self, roles: int) -> None:
        """Share the budget between ``roles`` roles (what each keeps from its next chunk on)."""
        self.role_cap = max(ROLE_TEXT_MIN, min(ROLE_TEXT_CHARS, LOG_TEXT_BUDGET // max(1, roles)))

    def add(self, role: str, text: str, attempt: int | None = None) -> None:
        """Keep ``text`` (of ``attempt``) for ``role``, dropping its oldest chunks past its share
        (never the newest)."""
        buffer = self.role_text.setdefault(role, collections.deque())
        buffer.append((attempt, text))
        chars = self.role_chars.get(role, 0) + len(text)
        while chars > self.role_cap and len(buffer) > 1:
            chars -= len(buffer.popleft()[1])
        self.role_chars[role] = chars

    def text(self, role: str) -> str:
        """Everything kept of ``role``'s output."""
        return "".join(text for _, text in self.role_text.get(role, ()))

    def pieces(self, role: str) -> list[tuple[int | None, str]]:
        """Everything kept of ``role``'s output, a piece per run of chunks of one attempt, in order."""
        pieces: list[tuple[int | None, str]] = []
        for attempt, text in self.role_text.get(role, ()):
            if pieces and pieces[-1][0] == attempt:
                pieces[-1] = (attempt, pieces[-1][1] + text)
            else:
                pieces.append((attempt, text))
        return pieces

    def last_lines(self, role: str, n: int) -> list[str]:
        """The last ``n`` non-empty lines kept of ``role``'s output."""
        buffer = self.role_text.get(role)
        if not buffer:
            return []
        tail = "".join(text for _, text in list(buffer)[-4:])[-8192:]
        return [line for line in LineAssembler().feed(tail + "\n") if line.strip()][-n:]

    def clear(self) -> None:
        self.role_text.clear()
        self.role_chars.clear()
