"""Refusing user regexes that can backtrack for ever on one line, before they meet any output.

Python's ``re`` backtracks and holds the GIL while it does: ``^(?P<step>(a|aa)+)+$`` against
``aaaa...a!`` takes exponential time, and the launcher froze for good, Ctrl-C included. So the
user's patterns are matched by the ``regex`` package with a time limit
(:data:`USER_MATCH_TIMEOUT_S`, in :mod:`core.telemetry.metrics`), which is what makes a freeze
impossible: no check of a pattern's shape catches every slow one (``.*x.*y.*z.*w.*v`` is
polynomial, about n^5, and passes what follows). The check here stays as the earlier and plainer
answer: the patterns are checked here when they are read (``validate``, the editor, the launch), and
the few shapes that make backtracking explode are refused with the fix:

- a repeat inside a repeat (``(a+)+``, ``(\\d+,)*``): exponential;
- an alternation inside a repeat (``(a|aa)+``): exponential when the branches overlap;
- two unbounded repeats that can match the same characters with nothing required between them
  (``.*.*``, ``\\d+\\s*\\d+``): each such pair multiplies the work by the line's length.

Possessive repeats (``a++``) and atomic groups (``(?>...)``, Python 3.11+) never backtrack into
what they matched, so they are the fix offered and are not refused. :data:`USER_LINE_CHARS`
bounds the line a user pattern sees.
"""

from __future__ import annotations

import re
from re import _compiler, _constants, _parser  # type: ignore[attr-defined]
from typing import Any

USER_LINE_CHARS = 2048  # a progress line is far shorter; past this a user pattern sees the start only
# A plain pattern takes microseconds on a 2 kB line; a quarter of a second is pathological, and
# still long enough that a loaded machine (the matching thread waiting for a core) does not turn a
# good pattern off. A pattern that overruns it is turned off for the role, and the user told.
USER_MATCH_TIMEOUT_S = 0.25

LONG_REPEAT = 64  # a repeat of up to this many is counted as unbounded (x{0,5000} is .* by another name)
_REPEATS = (_constants.MAX_REPEAT, _constants.MIN_REPEAT)
# Characters that tell apart the classes a metric line is made of (digits, letters, space, punctuation).
_PROBE = "".join(map(chr, range(1, 128))) + "\u00e9\u00a0\u2028\u4e00"
FIX = "use a possessive repeat (\\d++) or an atomic group (?>...), or a plainer pattern"


def backtracking_risk(regex: str) -> str | None:
    """Why ``regex`` can take exponential or runaway time on one line, or None when it cannot."""
    try:
        tree = _parser.parse(regex)
    except re.error:
        return None  # not a regex at all: compiling it says why
    return _scan(_flat(tree), in_repeat=False) or _adjacent(_flat(tree))


def _flat(items: Any) -> list[tuple[Any, Any]]:
    """A sequence with its plain groups opened: ``(?P<a>\\d+)\\s*(?P<b>\\d+)`` is three repeats in a row."""
    out: list[tuple[Any, Any]] = []
    for op, av in items:
        if op is _constants.SUBPATTERN:
            out += _flat(av[3])
        else:
            out.append((op, av))
    return out


def _scan(items: list[tuple[Any, Any]], *, in_repeat: bool) -> str | None:
    """Repeats inside repeats, and alternations inside repeats (exponential)."""
    for op, av in items:
        found: str | None = None
        if op in _REPEATS:
            high, body = av[1], av[2]
            if high > 1 and in_repeat:
                return "it repeats a repeat (e.g. (a+)+), which can take exponential time on one line"
            found = _scan(_flat(body), in_repeat=in_repeat or high > 1)
        elif op is _constants.BRANCH:
            if in_repeat:
                return "it repeats an alternation (e.g. (a|aa)+), which can take exponential time on one line"
            for branch in av[1]:
                found = found or _scan(_flat(branch), in_repeat=in_repeat)
        elif op in (_constants.ATOMIC_GROUP, _constants.POSSESSIVE_REPEAT):
            body = av if op is _constants.ATOMIC_GROUP else av[2]
            found = _scan(_flat(body), in_repeat=False)  # no backtracking into it once it has matched
        elif op in (_constants.ASSERT, _constants.ASSERT_NOT):
            found = _scan(_flat(av[1]), in_repeat=in_repeat)
        elif op is _constants.GROUPREF_EXISTS:
            found = _scan(_flat(av[1]), in_repeat=in_repeat) or (
                _scan(_flat(av[2]), in_repeat=in_repeat) if av[2] else None
            )
        if found:
            return found
    return None


def _adjacent(items: list[tuple[Any, Any]]) -> str | None:
    """Unbounded repeats of common characters in a row, with only optional items between them.

    Each start position of the search tries every split of the text between them: two such
    repeats where the search tries every position (nothing required before them), or three
    anywhere, cost the line's length cubed, seconds for a 2 kB line.
    """
    run: list[tuple[Any, bool]] = []  # unbounded repeats since the last required item, each with
    required = False  # whether something required comes before it (then the search has few starts)
    for op, av in items:
        if op in _REPEATS and av[1] >= LONG_REPEAT:
            low, body = av[0], av[2]
            overlapping = [before for other, before in run if _overlap(other, body)]
            if len(overlapping) >= 2 or (overlapping and not overlapping[0]):
                return "unbounded repeats of the same characters follow each other (e.g. .*.* or \\d+\\s*\\d+)"
            if low > 0:  # required text that the earlier repeats cannot take separates them from what follows
                run = [(other, before) for other, before in run if _overlap(other, body)]
            run.append((body, required))
            required = required or low > 0
        elif op in _REPEATS and av[0] == 0:
            continue  # optional: the repeats around it still meet
        elif op is _constants.AT:
            required = required or av is _constants.AT_BEGINNING
        else:
            run, required = [], True
    return None


def _overlap(first: Any, second: Any) -> bool:
    """Whether two repeat bodies can match a common character (True when unsure)."""
    a, b = _chars(first), _chars(second)
    return a is None or b is None or bool(a & b)


def _chars(body: Any) -> set[str] | None:
    """The probe characters a one-character body matches, or None for anything longer."""
    nodes = list(body)
    if len(nodes) != 1 or nodes[0][0] not in (
        _constants.LITERAL,
        _constants.NOT_LITERAL,
        _constants.IN,
        _constants.ANY,
    ):
        return None
    sub = _parser.SubPattern(body.state, nodes)
    single = _compiler.compile(sub, body.state.flags)
    return {c for c in _PROBE if single.match(c)}
