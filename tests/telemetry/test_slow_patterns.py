"""A user's metric pattern that would take too long on a line is stopped, turned off and named.

``(?P<step>.*x.*y.*z.*w.*v)`` passes the shape check (core/telemetry/regex_risk.py) and takes about
n^5 on a line of ``'xyzw' * 512``: with ``re`` the parser never came back, holding the GIL, which
pytest-timeout's thread needs as well; so each body that meets such a line runs in a child process
that a deadline kills (tests/helpers/in_child.py)."""

from __future__ import annotations

import itertools
import threading
import time

import pytest

from core.telemetry.live import RoleTelemetry
from core.telemetry.metrics import MetricParser, MetricPattern
from core.telemetry.regex_risk import USER_LINE_CHARS, USER_MATCH_TIMEOUT_S
from tests.helpers.in_child import run_in_child

POLYNOMIAL = r"(?P<step>.*x.*y.*z.*w.*v)"
LONG_LINE = "xyzw" * 512


@pytest.mark.timeout(120)
def test_a_polynomial_pattern_is_stopped_on_its_line_and_turned_off() -> None:
    run_in_child(_a_polynomial_pattern_is_stopped_on_its_line_and_turned_off, 60)


def _a_polynomial_pattern_is_stopped_on_its_line_and_turned_off() -> None:
    parser = MetricParser((MetricPattern(r"iter (?P<step>\d+)"), MetricPattern(POLYNOMIAL)))
    samples = parser.feed(f"{LONG_LINE}\nStep: 3,  Cost: 1.5\niter 7\n", 0.0)
    # The line went on to the built-in formats, and the other pattern still works.
    assert [(s.step, s.source) for s in samples] == [(3, "classic"), (7, "user")]
    (slow,) = parser.take_slow_patterns()
    assert slow.regex == POLYNOMIAL
    assert LONG_LINE.startswith(slow.line) and slow.line and slow.line_chars == USER_LINE_CHARS
    assert slow.timeout_s == USER_MATCH_TIMEOUT_S
    assert parser.take_slow_patterns() == []
    started = time.monotonic()
    parser.feed(LONG_LINE * 3 + "\n", 0.0)  # the pattern is off: no time limit waited out again
    assert time.monotonic() - started < USER_MATCH_TIMEOUT_S
    assert parser.take_slow_patterns() == []


@pytest.mark.timeout(120)
def test_a_pattern_turned_off_stays_off_for_the_role_after_a_restart() -> None:
    run_in_child(_a_pattern_turned_off_stays_off_for_the_role_after_a_restart, 60)


def _a_pattern_turned_off_stays_off_for_the_role_after_a_restart() -> None:
    telemetry = RoleTelemetry((POLYNOMIAL, r"iter (?P<step>\d+)"))
    telemetry.feed(LONG_LINE + "\n", 0.0)
    assert [s.regex for s in telemetry.take_slow_patterns()] == [POLYNOMIAL]
    telemetry.new_attempt()
    started = time.monotonic()
    samples = telemetry.feed(LONG_LINE + "\niter 4\n", 0.0)
    assert time.monotonic() - started < USER_MATCH_TIMEOUT_S
    assert [s.step for s in samples] == [4] and telemetry.take_slow_patterns() == []


@pytest.mark.timeout(120)
def test_other_threads_run_while_a_user_pattern_matches() -> None:
    run_in_child(_other_threads_run_while_a_user_pattern_matches, 60)


def _other_threads_run_while_a_user_pattern_matches() -> None:
    """The matcher lets go of the GIL: the main thread (where Python runs signal handlers) and
    the rest of the controller are not held for the length of a match."""
    parser = MetricParser((MetricPattern(POLYNOMIAL),))
    ticks: list[float] = []
    done = threading.Event()
    worker = threading.Thread(target=lambda: (parser.feed(LONG_LINE + "\n", 0.0), done.set()))
    worker.start()
    while not done.is_set():
        ticks.append(time.monotonic())
        time.sleep(0.001)
    worker.join()
    assert parser.take_slow_patterns(), "the pattern was not turned off"
    gaps = [b - a for a, b in itertools.pairwise(ticks)]
    assert len(ticks) > 10 and max(gaps) < USER_MATCH_TIMEOUT_S * 0.8, (len(ticks), max(gaps, default=None))


def test_a_pattern_stays_in_python_re_syntax() -> None:
    """Patterns are Python ``re`` patterns: what only the ``regex`` package reads is refused."""
    with pytest.raises(ValueError, match="not a valid regular expression"):
        MetricPattern(r"(?P<step>\p{N}+)")  # a Unicode property: regex reads it, re does not
    assert MetricPattern(r"(?P<step>\d++) (?>(?P<loss>[0-9.]+))").compiled.search("12 0.5")["loss"] == "0.5"
