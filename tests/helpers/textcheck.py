"""Checks on what the CLI wrote: no raw control character reached the terminal, no CSV cell is a
formula a spreadsheet would run. Independent of core/textsafe.py on purpose (an oracle)."""

from __future__ import annotations

import csv
import io
import unicodedata
from pathlib import Path

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def raw_controls(text: str) -> list[str]:
    """Every character of ``text`` a terminal would not print (line ends aside), as reprs."""
    return [repr(c) for c in text if c != "\n" and (unicodedata.category(c) == "Cc" or not c.isprintable())]


def _is_number(cell: str) -> bool:
    if set(cell) - set("0123456789+-.eE"):
        return False
    try:
        float(cell)
    except ValueError:
        return False
    return True


def formula_cells(text: str) -> list[str]:
    """The cells of CSV ``text`` that a spreadsheet would run: starting with = + - @ TAB or CR, not
    a plain number, not a sign alone (no operand)."""
    return [
        cell
        for row in csv.reader(io.StringIO(text, newline=""))
        for cell in row
        if cell.startswith(FORMULA_STARTS) and cell not in ("-", "+") and not _is_number(cell)
    ]


def formula_cells_in(path: Path) -> list[str]:
    return formula_cells(path.read_text(encoding="utf-8"))
