"""Training metrics (step, loss, step time) read from what trainers print.

Formats understood out of the box (``MetricSample.source`` names them):

- ``classic``: the classic between-graph example,
  ``Step: 201,  Epoch:  1,  Batch: 100 of 550,  Cost: 8.2541,  AvgTime: 3.04ms``.
- ``tf1_hooks``: TF1's logging hooks, ``loss = 0.31, step = 100 (0.523 sec)`` and
  ``global_step/sec: 191.2``, with or without an absl (``I1121 23:53:47.123 140 file.py:260] ``)
  or ``INFO:tensorflow:`` prefix. The ``(0.523 sec)`` is the time since the hook last logged, so the
  step time is that divided by the step difference to the previous ``loss = ...`` line (the first
  line has none).
- ``keras``: ``model.fit`` output, ``Epoch 3/10`` then verbose=2 lines
  (``100/100 - 1s - 6ms/step - loss: 0.31 - accuracy: 0.91``) or verbose=1 progress bars redrawn
  with carriage returns (``\\r 37/100 [=====>....] - ETA: 1s - loss: 0.45``), Keras 2 or 3 style.
  The step is ``(epoch - 1) * N + n`` from ``n/N``; every metric other than ``loss`` goes to
  ``extra``. One sample per distinct ``n`` at most (plus the final line of an epoch when it adds the
  step time), so a redrawing bar does not flood.
- ``user`` (or the name given): :class:`MetricPattern` regexes, matched with a time limit per line
  (:data:`core.telemetry.regex_risk.USER_MATCH_TIMEOUT_S`); a pattern that overruns it is turned off
  for that parser and reported (:meth:`MetricParser.take_slow_patterns`).

Text is fed in arbitrary chunks; only lines ended by ``\\n`` or ``\\r`` are parsed, so the result
does not depend on where the chunks split. The unfinished line is kept up to
:data:`MAX_PARTIAL_LINE_CHARS`; a longer line is dropped whole.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from core.telemetry.regex_risk import USER_LINE_CHARS, USER_MATCH_TIMEOUT_S, backtracking_risk

_regex: Any
try:  # users' patterns are matched with a time limit (requirements.in says why)
    import regex as _regex  # type: ignore[no-redef]
except ImportError:  # the headless core run without the project's environment (the GPU proof kit's `python -S`)
    _regex = None


MAX_PARTIAL_LINE_CHARS = 64 * 1024
"""Longest line kept while waiting for its end; longer lines are dropped, not parsed."""

_NUM = r"[-+]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|(?i:nan|inf(?:inity)?))"

_CLASSIC = re.compile(
    rf"Step:\s*(?P<step>\d+),.*?Cost:\s*(?P<loss>{_NUM})"
    rf"(?:,\s*AvgTime:\s*(?P<time>{_NUM})\s*(?P<unit>us|µs|ms|s)\b)?"
)
# _CLASSIC in two pieces, for MetricParser._classic.
_CLASSIC_STEP = re.compile(r"Step:\s*(\d+),").search
_CLASSIC_COST = re.compile(
    rf"Cost:\s*(?P<loss>{_NUM})(?:,\s*AvgTime:\s*(?P<time>{_NUM})\s*(?P<unit>us|µs|ms|s)\b)?"
).match
_TF1_LOSS = re.compile(rf"\bloss = (?P<loss>{_NUM}), step = (?P<step>\d+)(?: \((?P<sec>{_NUM}) sec\))?")
_TF1_RATE = re.compile(rf"global_step/sec: (?P<rate>{_NUM})").search
_KERAS_EPOCH = re.compile(r"^\s*Epoch (?P<epoch>\d+)/(?P<epochs>\d+)\s*$")
# "n/N" followed by a bar ("[", Keras 3's "━"), " - " (verbose=2) or a duration ("1s 6ms/step").
_KERAS_PROGRESS = re.compile(r"^\s*(?P<n>\d+)/(?P<total>\d+|Unknown)\s+(?=[\[━─-]|\d)(?P<rest>.*)$")
_KERAS_STEP_TIME = re.compile(rf"(?P<value>{_NUM})(?P<unit>us|µs|ms|s)/step")
_KERAS_METRIC = re.compile(r" - ([A-Za-z_][\w.]*): ([^\s\x08]+)")
_DECIMAL = r"(?:\d+\.\d+(?:e[-+]\d+)?|nan)"
# The common Keras lines in full: a verbose=1 bar redraw ("[==>..] - ETA: 1s"), its last draw or a
# verbose=2 line ("[====] - 1s 6ms/step", "- 1s - 6ms/step"), then " - loss: x" and other plain
# "name: decimal" metrics. Groups: n, total, step time and its unit (None with ETA), loss, the rest.
# Possessive (*+, ++): nothing after a repeat can start with what it repeats, so giving back never
# helps a match, and re skips the bookkeeping for it (~10 % of the regex's time).
_KERAS_COMMON_LINE = re.compile(
    r" *+(\d++)/(\d++|Unknown) (?:\[[=>. ]*+\] - ETA: [0-9:]++s?|(?:\[[=>. ]*+\] )?- \d++s(?: - | )(\d++)(ms|us|s)/step)"
    rf" - loss: ({_DECIMAL})((?: - [A-Za-z_]\w*+: {_DECIMAL})*+)"
).fullmatch
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

_INF = math.inf
_new = object.__new__
# Longest run of digits int() is sure to take (Python's limit on digits in a str is 4300 by
# default); longer ones go through _int, which then makes them a float or None.
_INT_DIGITS = 640
_UNIT_S = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6}
_KNOWN_GROUPS = frozenset({"step", "loss", "step_time_s", "step_time_ms", "step_time_us", "steps_per_sec"})


@dataclass(slots=True)
class MetricSample:
    """One reading from a trainer's output.

    ``t`` is when the text arrived (seconds, the caller's clock, ``time.time()`` by default).
    ``step_time_s`` and ``steps_per_sec`` are only set when the line itself says them (or, for
    ``tf1_hooks``, the printed interval and the previous line's step do); :class:`WorkerStats`
    derives them otherwise. ``loss`` may be NaN or infinite: a diverging run is information.
    Not frozen, only for speed (a frozen dataclass is built ~3x slower, and a log makes one per
    step line): treat a sample as read-only.
    """

    t: float
    step: int | None
    loss: float | None
    step_time_s: float | None
    steps_per_sec: float | None
    extra: dict[str, float]
    source: str


@dataclass(frozen=True)
class MetricPattern:
    """A user's regex for a trainer's own progress line.

    Named groups ``step``, ``loss``, ``step_time_s`` / ``step_time_ms`` / ``step_time_us`` and
    ``steps_per_sec`` fill the sample's fields; any other named group becomes an ``extra`` scalar.
    The regex is compiled here: a bad one raises ``ValueError`` naming it and why.

    It is written in Python's ``re`` syntax (checked with ``re``) and matched by the ``regex``
    package in its ``re``-compatible mode: ``re`` cannot be stopped once a match has started (and
    holds the GIL, so not even Ctrl-C gets through), while ``regex`` takes a ``timeout`` and lets
    other threads run as it matches. So whatever a pattern does, a line costs at most
    :data:`USER_MATCH_TIMEOUT_S`.
    """

    regex: str
    source: str = "user"
    compiled: Any = field(init=False, repr=False, compare=False)  # a regex.Pattern (the package has no types)

    def __post_init__(self) -> None:
        try:
            checked = re.compile(self.regex)
        except re.error as exc:
            raise ValueError(f"metric pattern {self.regex!r} is not a valid regular expression: {exc}") from None
        if not checked.groupindex:
            raise ValueError(
                f"metric pattern {self.regex!r} has no named groups: name them, e.g. (?P<loss>[0-9.]+) or (?P<step>\\d+)"
            )
        risk = backtracking_risk(self.regex)
        if risk is not None:
            raise ValueError(f"metric pattern {self.regex!r} is refused: {risk}")
        if _regex is None:  # no time limit to be had: the shape check above is all the guard there is
            object.__setattr__(self, "compiled", _Untimed(checked))
            return
        try:
            compiled = _regex.compile(self.regex, flags=_regex.VERSION0)
        except _regex.error as exc:  # re takes it, the matcher does not: say so rather than guess
            raise ValueError(
                f"metric pattern {self.regex!r} cannot be matched with a time limit ({exc}): write it more plainly"
            ) from None
        object.__setattr__(self, "compiled", compiled)


@dataclass(frozen=True)
class _Untimed:
    """A pattern matched by ``re`` where the ``regex`` package is missing: no time limit."""

    pattern: re.Pattern[str]

    def search(self, text: str, timeout: float | None = None) -> re.Match[str] | None:
        return self.pattern.search(text)


@dataclass(frozen=True)
class SlowPattern:
    """A user pattern that overran :data:`USER_MATCH_TIMEOUT_S` on one line, and was turned off.

    ``line`` is the line's start as it was matched (at most :data:`SLOW_LINE_EXCERPT_CHARS`),
    ``line_chars`` its length; ``timeout_s`` the limit it overran."""

    regex: str
    line: str
    line_chars: int
    timeout_s: float


SLOW_LINE_EXCERPT_CHARS = 60


def _float(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        value = _float(text)
        return int(value) if value is not None and math.isfinite(value) else None


def positive_or_none(value: float | None) -> float | None:
    """``value`` if it is a finite number above 0, else None."""
    return value if value is not None and math.isfinite(value) and value > 0 else None


def inverse_or_none(value: float | None) -> float | None:
    """``1 / value`` for a finite positive ``value`` (a step time to a rate, or back), else None."""
    value = positive_or_none(value)
    return 1.0 / value if value is not None else None


class MetricParser:
    """Streaming parser: feed it a role's output as it arrives, get :class:`MetricSample` back.

    One parser per role (it keeps per-stream state: the unfinished line, Keras' epoch, the last
    TF1 step). User patterns are tried first on every line; the first one that yields a value wins
    and the built-in formats are skipped for that line. A pattern that overruns its time limit on
    a line is dropped from this parser (the line goes on to the other patterns and the built-in
    formats), and waits in :meth:`take_slow_patterns` for the caller to report it.
    """

    def __init__(self, patterns: Sequence[MetricPattern] = ()) -> None:
        self._patterns = tuple(patterns)
        self._slow: list[SlowPattern] = []
        self._partial = ""
        self._discarding = False
        self._tf1_prev_step: int | None = None
        self._keras_epoch: int | None = None
        self._keras_base = 0
        self._keras_last_n: int | None = None
        self._keras_last_key: tuple[int | None, int, bool] | None = None

    def feed(self, text: str, t: float | None = None) -> list[MetricSample]:
        """Parse the complete lines in ``text`` (plus what earlier chunks left unfinished)."""
        if not text:
            return []
        now = time.time() if t is None else t
        if "\r" in text:
            text = text.replace("\r", "\n")
        lines = text.split("\n")
        tail = lines.pop()
        if not lines:
            if not self._discarding:
                if len(self._partial) + len(tail) > MAX_PARTIAL_LINE_CHARS:
                    self._partial, self._discarding = "", True
                else:
                    self._partial += tail
            return []
        if self._discarding:
            self._discarding = False
            lines[0] = ""
        elif self._partial:
            lines[0] = self._partial + lines[0]
        if len(tail) > MAX_PARTIAL_LINE_CHARS:
            self._partial, self._discarding = "", True
        else:
            self._partial = tail
        # Overlong lines are dropped, not parsed. Only the first line (the kept partial line plus
        # the text's first) can be longer than the text, so a text no longer than the limit needs
        # one length, not one per line.
        if (len(text) > MAX_PARTIAL_LINE_CHARS or len(lines[0]) > MAX_PARTIAL_LINE_CHARS) and max(
            map(len, lines)
        ) > MAX_PARTIAL_LINE_CHARS:
            lines = [line for line in lines if len(line) <= MAX_PARTIAL_LINE_CHARS]
        out: list[MetricSample] = []
        self._parse_lines(lines, now, out)
        return out

    def take_slow_patterns(self) -> list[SlowPattern]:
        """The patterns turned off since the last call (each was too slow on one line)."""
        slow, self._slow = self._slow, []
        return slow

    def _turn_off(self, pattern: MetricPattern, line: str) -> tuple[MetricPattern, ...]:
        """Drop ``pattern`` (it overran its time limit on ``line``); the patterns left."""
        self._patterns = tuple(p for p in self._patterns if p is not pattern)
        shown = line[:USER_LINE_CHARS]
        self._slow.append(SlowPattern(pattern.regex, shown[:SLOW_LINE_EXCERPT_CHARS], len(shown), USER_MATCH_TIMEOUT_S))
        return self._patterns

    def drop_partial(self) -> None:
        """Forget the unfinished line: the next text does not continue it (output was skipped)."""
        self._partial, self._discarding = "", False

    def flush(self, t: float | None = None) -> list[MetricSample]:
        """Parse the unfinished last line (at the end of a stream) and forget it."""
        line, self._partial, self._discarding = self._partial, "", False
        out: list[MetricSample] = []
        if line:
            self._parse_lines([line], time.time() if t is None else t, out)
        return out

    def _parse_lines(self, lines: list[str], t: float, out: list[MetricSample]) -> None:
        # One loop for all lines, with cheap substring tests choosing at most one regex per line and
        # the Keras progress line (most of a Keras log) handled inline: profiled, the per-line
        # method calls and helper calls cost more than the regexes.
        patterns = self._patterns
        epoch, last_key = self._keras_epoch, self._keras_last_key  # copies, kept in step below
        append = out.append
        of_text, of_n = "", 0  # the fast path's last Keras "n/N"'s N, as text and as a number
        for line in lines:
            if not line:
                continue
            if patterns:
                sample = None
                for pattern in patterns:
                    try:
                        sample = _user_sample(pattern, line, t)
                    except TimeoutError:
                        patterns = self._turn_off(pattern, line)
                        continue
                    if sample is not None:
                        break
                if sample is not None:
                    append(sample)
                    continue
            if " - loss: " in line:
                # The common Keras lines, most of a Keras log, by one fullmatch: such a line holds
                # no other format's marker and no ANSI, so the general path would read it the same.
                m = _KERAS_COMMON_LINE(line)
                if m is not None:
                    n_text, of, time_text, unit, loss_text, more = m.groups()
                    n = int(n_text)
                    # A redraw of what was already reported (n first: it differs from the last
                    # sample's on most lines, and no key tuple is built for the comparison).
                    if last_key is not None and n == last_key[1] and last_key == (epoch, n, time_text is not None):
                        continue
                    common_time_s = None
                    if time_text is not None:
                        common_time_s = float(time_text) * _UNIT_S[unit]
                        if not common_time_s > 0.0:
                            common_time_s = None
                    common_loss = float(loss_text)
                    common_extra: dict[str, float] = {}
                    if more:
                        for name, text in _KERAS_METRIC.findall(more):
                            if name == "loss":
                                common_loss = float(text)
                            elif name != "ETA":
                                common_extra[name] = float(text)
                    self._keras_last_key = last_key = (epoch, n, time_text is not None)
                    self._keras_last_n = n
                    if epoch is not None and of != "Unknown":
                        if of != of_text:
                            of_text, of_n = of, int(of)
                        step = (epoch - 1) * of_n + n
                    else:
                        step = self._keras_base + n
                    # The sample's slots set here rather than through MetricSample(...): the
                    # generated __init__'s call costs more than the stores (most samples of a
                    # Keras log are made here; the result is the same object).
                    sample = _new(MetricSample)
                    sample.t = t
                    sample.step = step
                    sample.loss = common_loss
                    sample.step_time_s = common_time_s
                    sample.steps_per_sec = None if common_time_s is None else 1.0 / common_time_s
                    sample.extra = common_extra
                    sample.source = "keras"
                    append(sample)
                    continue
            elif line[:6] == "Epoch " and self._keras_epoch_line(line):
                epoch = self._keras_epoch
                continue
            if "Cost:" in line:
                self._classic(line, t, out)
            elif (at := line.find("loss = ")) >= 0:
                self._tf1_loss(line, t, out, at=at)
            elif (at := line.find("global_step/sec")) >= 0:
                m = _TF1_RATE(line, at)  # no match can start before the first "global_step/sec"
                if m is not None:
                    rate = float(m[1])  # a _NUM: float() takes every one
                    append(
                        MetricSample(t, None, None, 1.0 / rate if 0.0 < rate < _INF else None, rate, {}, "tf1_hooks")
                    )
            elif "/" in line:
                if "\x1b" in line:
                    line = _ANSI.sub("", line)
                stripped = line.lstrip()
                if not stripped[:1].isdigit():
                    if stripped.startswith("Epoch "):
                        self._keras_epoch_line(line)
                        epoch = self._keras_epoch
                    continue
                # "n/..." at the start, or not a progress line (a timestamp): no regex for those.
                if not stripped.partition("/")[0].isdigit():
                    continue
                m = _KERAS_PROGRESS.match(line)
                if m is None:
                    continue
                n = int(m["n"])
                rest = m["rest"]
                has_step_time = "/step" in rest
                key = (self._keras_epoch, n, has_step_time)
                if key == self._keras_last_key:  # a redraw of what was already reported
                    continue
                step_time_s = None
                if has_step_time:
                    tm = _KERAS_STEP_TIME.search(rest)
                    if tm is not None:
                        value = _float(tm["value"])
                        if value is not None:
                            value *= _UNIT_S[tm["unit"]]
                            if 0.0 < value < _INF:
                                step_time_s = value
                loss = None
                extra: dict[str, float] = {}
                # Metrics are " - name: value" pieces.
                if ": " in rest:
                    for name, text in _KERAS_METRIC.findall(rest):
                        if name == "ETA":
                            continue
                        try:
                            number = float(text)
                        except ValueError:
                            continue
                        if name == "loss":
                            loss = number
                        else:
                            extra[name] = number
                if loss is None and step_time_s is None and not extra:
                    continue
                self._keras_last_key = last_key = key
                self._keras_last_n = n
                total = m["total"]
                if self._keras_epoch is not None and total != "Unknown":
                    step = (self._keras_epoch - 1) * int(total) + n
                else:
                    step = self._keras_base + n
                append(
                    MetricSample(
                        t, step, loss, step_time_s, None if step_time_s is None else 1.0 / step_time_s, extra, "keras"
                    )
                )

    def _classic(self, line: str, t: float, out: list[MetricSample]) -> None:
        # _CLASSIC.search in two steps: its lazy ".*?" between "Step: n," and "Cost:" cost more
        # than the rest of the line. "Step:\s*\d+," matches at most one way at each "Step:", and a
        # later "Step:" ends later, so only the first one's following "Cost:"s can complete it.
        head = _CLASSIC_STEP(line)
        if head is None:
            return
        k = head.end()
        while True:
            k = line.find("Cost:", k)
            if k < 0:
                return
            m = _CLASSIC_COST(line, k)
            if m is not None:
                break
            k += 1
        loss_text, time_text, unit = m.groups()
        step_time_s = None
        if time_text is not None:
            step_time_s = float(time_text) * _UNIT_S[unit]
            if not 0.0 < step_time_s < _INF:
                step_time_s = None
        out.append(
            MetricSample(
                t,
                _int(step_text) if len(step_text := head[1]) > _INT_DIGITS else int(step_text),
                float(loss_text),
                step_time_s,
                None if step_time_s is None else 1.0 / step_time_s,
                {},
                "classic",
            )
        )

    def _tf1_loss(self, line: str, t: float, out: list[MetricSample], *, at: int) -> None:
        # Searched from the first "loss = " (``at``), where any match starts: "\b" first in the
        # regex keeps re from skipping ahead by its literal prefix, so a search from 0 tries every
        # position of an absl prefix.
        m = _TF1_LOSS.search(line, at)
        if m is None:
            return
        loss_text, step_text, sec_text = m.groups()
        step = _int(step_text) if len(step_text) > _INT_DIGITS else int(step_text)
        step_time_s = None
        prev = self._tf1_prev_step
        if step is not None and prev is not None and step > prev and sec_text is not None:
            step_time_s = float(sec_text) / (step - prev)
            if not 0.0 < step_time_s < _INF:
                step_time_s = None
        self._tf1_prev_step = step
        out.append(
            MetricSample(
                t,
                step,
                float(loss_text),
                step_time_s,
                None if step_time_s is None else 1.0 / step_time_s,
                {},
                "tf1_hooks",
            )
        )

    def _keras_epoch_line(self, line: str) -> bool:
        m = _KERAS_EPOCH.match(line)
        if m is None:
            return False
        if self._keras_last_n is not None:
            self._keras_base += self._keras_last_n
        self._keras_last_n = None
        self._keras_epoch = int(m["epoch"])
        return True


def _user_sample(pattern: MetricPattern, line: str, t: float) -> MetricSample | None:
    """The sample ``pattern`` reads from ``line``, or None; TimeoutError when it overran its limit."""
    # Bounded work per line: the first USER_LINE_CHARS characters, for USER_MATCH_TIMEOUT_S at most.
    m = pattern.compiled.search(line[:USER_LINE_CHARS], timeout=USER_MATCH_TIMEOUT_S)
    if m is None:
        return None
    step = loss = step_time_s = steps_per_sec = None
    extra: dict[str, float] = {}
    for name, text in m.groupdict().items():
        if text is None:
            continue
        if name == "step":
            step = _int(text)
            continue
        value = _float(text)
        if value is None:
            continue
        if name == "loss":
            loss = value
        elif name == "step_time_s":
            step_time_s = positive_or_none(value)
        elif name == "step_time_ms":
            step_time_s = positive_or_none(value * 1e-3)
        elif name == "step_time_us":
            step_time_s = positive_or_none(value * 1e-6)
        elif name == "steps_per_sec":
            steps_per_sec = positive_or_none(value)
        elif name not in _KNOWN_GROUPS:
            extra[name] = value
    if step is None and loss is None and step_time_s is None and steps_per_sec is None and not extra:
        return None
    if steps_per_sec is None:
        steps_per_sec = inverse_or_none(step_time_s)
    elif step_time_s is None:
        step_time_s = inverse_or_none(steps_per_sec)
    return MetricSample(t, step, loss, step_time_s, steps_per_sec, extra, pattern.source)
