"""The one module that makes outside text safe for a terminal, a CSV cell and a shell line
(core/textsafe.py): properties over any text, and real round trips through csv and bash."""

from __future__ import annotations

import csv
import io
import subprocess
import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from core.textsafe import FORMULA_STARTS, csv_cell, csv_row, shell_quote, terminal, terminal_lines

# Any code point, surrogates included (a file name or argv decoded with surrogateescape has them).
ANY_TEXT = st.text(alphabet=st.characters(codec=None), max_size=60)
HOSTILE = st.sampled_from(
    ["\x1b]0;TITLE\x07\x1b[2J", "\x1b[31m", "\x9b2J", "\r", "\n", "\t", "\x00", "\x7f", "\u202e", "\u2028", "\x85"]
)
MIXED = st.lists(ANY_TEXT | HOSTILE, max_size=6).map("".join)
PRINTABLE = st.text(alphabet=st.characters(codec=None).filter(str.isprintable), max_size=60)


def control_free(text: str) -> bool:
    """No C0/C1 control character, DEL, or any other character a terminal would not print."""
    return all(unicodedata.category(c) != "Cc" and c.isprintable() for c in text)


@given(MIXED)
@settings(max_examples=500)
def test_any_text_is_shown_without_a_control_character(text: str):
    shown = terminal(text)
    assert control_free(shown)
    assert terminal(shown) == shown  # escaping twice changes nothing: every layer may escape


@given(PRINTABLE)
def test_printable_text_passes_unchanged(text: str):
    assert terminal(text) == text


def test_escapes_are_visible_and_say_which_character():
    assert terminal("\x1b]0;TITLE\x07\x1b[2J") == "\\x1b]0;TITLE\\x07\\x1b[2J"
    assert terminal("a\nb\tc\r") == "a\\x0ab\\x09c\\x0d"  # a newline inside a field is escaped too
    assert terminal("\x9b\u202e\U000e0001") == "\\x9b\\u202e\\U000e0001"
    assert terminal("C:\\path \u00e9\u4e2d") == "C:\\path \u00e9\u4e2d"  # printable, backslash included
    assert terminal(None) == "None" and terminal(3) == "3"
    assert terminal_lines(["a\x1b", "b"]) == "a\\x1b\nb"


NUMBERS = (
    st.integers().map(str)
    | st.floats(allow_nan=False, allow_infinity=False).map(repr)
    | st.sampled_from(["-2", "+3", "-1.5e3", ".5", "-.5", "+0.25E-2", "-10."])
)


def reads_as_number(text: str) -> bool:
    """An oracle apart from the module's pattern: digits, signs, a point and an exponent only,
    and Python reads it as a float."""
    if not text or set(text) - set("0123456789+-.eE"):
        return False
    try:
        float(text)
    except ValueError:
        return False
    return True


@given(MIXED | NUMBERS, st.sampled_from(FORMULA_STARTS))
@settings(max_examples=500)
def test_a_cell_starting_with_a_formula_character_is_neutralised(text: str, start: str):
    cell = start + text
    left_alone = reads_as_number(cell) or cell in ("-", "+")  # a sign alone has nothing to compute
    assert csv_cell(cell) == (cell if left_alone else "'" + cell)


@given(NUMBERS)
def test_numbers_stay_numbers(text: str):
    assert csv_cell(text) == text
    assert float(text) == float(csv_cell(text))  # type: ignore[arg-type]


@given(st.integers() | st.floats() | st.none() | st.booleans())
def test_non_strings_are_left_to_the_csv_writer(value: object):
    assert csv_cell(value) is value


@given(MIXED.filter(lambda s: not s.startswith(FORMULA_STARTS)))
def test_other_text_is_written_as_it_is(text: str):
    assert csv_cell(text) == text


@given(st.lists(MIXED | NUMBERS | st.sampled_from(['=HYPERLINK("http://x","y")', "@SUM(1,1)", "=1+1"])))
@settings(max_examples=300)
def test_through_a_real_csv_writer_no_cell_reads_back_as_a_formula(row: list[str]):
    buffer = io.StringIO()
    csv.writer(buffer).writerow(csv_row(row))
    [back] = list(csv.reader(io.StringIO(buffer.getvalue(), newline="")))
    for original, cell in zip(row, back, strict=True):
        assert not cell.startswith(FORMULA_STARTS) or csv_cell(cell) == cell  # a number, or neutralised
        assert cell in (original, "'" + original)


SHELL_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\0"), max_size=20) | HOSTILE.filter(
    lambda s: "\0" not in s
)


@given(st.lists(SHELL_TEXT, min_size=1, max_size=4))
@settings(max_examples=40, deadline=None)
def test_a_shell_word_prints_no_control_character_and_bash_reads_it_back(words: list[str]):
    line = " ".join(shell_quote(w) for w in words)
    assert control_free(line)
    script = f'for a in {line}; do printf "%s\\0" "$a"; done'
    out = subprocess.run(["bash", "-c", script], capture_output=True, check=True, timeout=30).stdout
    assert out.split(b"\0")[:-1] == [w.encode() for w in words]
