"""The Logs tab's model, without the widgets: what the window keeps of each role's output (bounded,
one budget for all roles), output turned into display lines the way a terminal shows them, and
each line's level for the filter. Qt-free.

Carriage-return progress bars (Keras, tqdm): only the last state of a line is kept, and a line
still being redrawn is held as :attr:`LineAssembler.partial` until it ends. The run directory
keeps every byte; :class:`RoleOutput` keeps each role's newest text only.
"""

from __future__ import annotations

import collections
import re

__all__ = [
    "LEVELS",
    "LOG_TEXT_BUDGET",
    "PARTIAL_LINE_CHARS",
    "ROLE_TEXT_CHARS",
    "ROLE_TEXT_MIN",
    "LineAssembler",
    "RoleOutput",
    "line_level",
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
_ERROR = re.compile(r"^[EF]\d{4} |\b(ERROR|FATAL|CRITICAL|Traceback)\b|^[\w.]*(Error|Exception)(:|$)|\[towerdeck\]")
_WARNING = re.compile(r"^W\d{4} |\bWARNING\b|\bWarning\b")


def line_level(line: str) -> int:
    """0 for an ordinary line, 1 for a warning, 2 for an error (absl prefixes, logging, tracebacks)."""
    if _ERROR.search(line):
        return 2
    if _WARNING.search(line):
        return 1
    return 0


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
    """Each role's newest output, as it came in chunks, within one budget for every role."""

    def __init__(self) -> None:
        self.role_text: dict[str, collections.deque[str]] = {}
        self.role_chars: dict[str, int] = {}
        self.role_cap = ROLE_TEXT_CHARS  # characters kept per role, from the number of roles

    def set_role_count(self, roles: int) -> None:
        """Share the budget between ``roles`` roles (what each keeps from its next chunk on)."""
        self.role_cap = max(ROLE_TEXT_MIN, min(ROLE_TEXT_CHARS, LOG_TEXT_BUDGET // max(1, roles)))

    def add(self, role: str, text: str) -> None:
        """Keep ``text`` for ``role``, dropping its oldest chunks past its share (never the newest)."""
        buffer = self.role_text.setdefault(role, collections.deque())
        buffer.append(text)
        chars = self.role_chars.get(role, 0) + len(text)
        while chars > self.role_cap and len(buffer) > 1:
            chars -= len(buffer.popleft())
        self.role_chars[role] = chars

    def text(self, role: str) -> str:
        """Everything kept of ``role``'s output."""
        return "".join(self.role_text.get(role, ()))

    def last_lines(self, role: str, n: int) -> list[str]:
        """The last ``n`` non-empty lines kept of ``role``'s output."""
        buffer = self.role_text.get(role)
        if not buffer:
            return []
        tail = "".join(list(buffer)[-4:])[-8192:]
        return [line for line in LineAssembler().feed(tail + "\n") if line.strip()][-n:]

    def clear(self) -> None:
        self.role_text.clear()
        self.role_chars.clear()
