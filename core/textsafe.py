"""Text that came from elsewhere (a user's file, a trainer's output, NVML, the process table, a run
directory), made safe for where it is written: a terminal, a CSV cell, a shell line to paste.

- :func:`terminal`: every character that is not printable (C0 and C1 control characters, DEL,
  ESC, newlines and tabs inside a field, format characters such as right-to-left overrides) is
  shown as a visible escape (``\\x1b``, ``\\u202e``). A cluster named ``\\e]0;TITLE\\a\\e[2J``
  would otherwise retitle and clear the terminal of whoever runs ``runs compare``. Printable text
  passes unchanged, backslashes included.
- :func:`csv_cell` / :func:`csv_row`: OWASP's rule against formula injection. A cell that starts
  with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return and is not a plain number gets a
  leading single quote (a lone ``-`` or ``+``, TowerDeck's "no value", computes nothing and is
  left), so a spreadsheet shows it as text instead of running it
  (``=HYPERLINK(...)`` from a TensorBoard tag, a cluster named ``=1+1``). Numbers stay numbers.
- :func:`shell_quote`: ``shlex.quote``, except that a word holding unprintable characters is
  written as ``$'...'`` with ``\\xHH`` escapes (bash, zsh, ksh, POSIX.1-2024 sh): the line pastes
  back to the same bytes and shows no raw control character.

Standard library only, and nothing of TowerDeck's: every layer above the agent may import it.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# A sign alone has no operand: spreadsheets read it as text, and "-" is TowerDeck's "no value".
LONE_SIGNS = ("-", "+")
# A plain number as a spreadsheet reads one: -2, +3.5, .5, 1e-3. Anything else after a sign is text.
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def _escape(char: str) -> str:
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def terminal(text: object) -> str:
    """``text`` with every unprintable character shown as an escape; printable text unchanged."""
    value = text if isinstance(text, str) else str(text)
    if value.isprintable():  # the common case, checked in C
        return value
    return "".join(c if c.isprintable() else _escape(c) for c in value)


def terminal_lines(lines: Iterable[object]) -> str:
    """Lines (each one field or one composed line) joined by newlines, each escaped alone."""
    return "\n".join(terminal(line) for line in lines)


def is_plain_number(text: str) -> bool:
    """Whether ``text`` is a number a spreadsheet would read as one (and nothing more)."""
    return _NUMBER.fullmatch(text) is not None


def csv_cell(value: object) -> object:
    """A CSV cell that no spreadsheet runs as a formula: a string starting with one of
    :data:`FORMULA_STARTS` that is not a plain number (nor a lone sign) gets a leading ``'``;
    numbers, None and other strings are returned as they are."""
    if (
        isinstance(value, str)
        and value.startswith(FORMULA_STARTS)
        and value not in LONE_SIGNS
        and not is_plain_number(value)
    ):
        return "'" + value
    return value


def csv_row(values: Iterable[object]) -> list[object]:
    """A row for ``csv.writer.writerow``, every cell through :func:`csv_cell`."""
    return [csv_cell(v) for v in values]


def _utf8(char: str) -> bytes:
    try:
        return char.encode("utf-8", "surrogateescape")  # a byte a file name or argv could not decode
    except UnicodeEncodeError:
        return char.encode("utf-8", "surrogatepass")


def shell_quote(word: str) -> str:
    """``word`` as one shell word that reads back the same and prints no control character."""
    if word.isprintable():
        return shlex.quote(word)
    out = []
    for c in word:
        if c in "\\'":
            out.append("\\" + c)
        elif c.isprintable():
            out.append(c)
        else:  # the bytes themselves: \u in $'...' depends on the shell's locale, \xHH does not
            out.append("".join(f"\\x{b:02x}" for b in _utf8(c)))
    return "$'" + "".join(out) + "'"
